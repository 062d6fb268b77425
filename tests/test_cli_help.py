"""Every ``mgm`` command explains itself: each argument has help, and each default is shown once."""

from __future__ import annotations

import argparse

import pytest

from mlflow_genai_metrics.cli import build_parser
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.cli.common import DefaultsShown


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers, by name (argparse has no public way to list them)."""
    found = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def help_problems(parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with ``parser``'s help: an argument without help, a default not shown or shown twice."""
    formatter = parser._get_formatter()
    problems = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = "/".join(action.option_strings) or action.dest
        text = formatter._expand_help(action) if action.help else ""
        if not text.strip():
            problems.append(f"{parser.prog} {name}: no help")
        elif action.default not in (None, False, argparse.SUPPRESS):
            if str(action.default) not in text:
                problems.append(f"{parser.prog} {name}: default {action.default!r} not shown")
            if text.count("default") > 1:
                problems.append(f"{parser.prog} {name}: default shown twice: {text!r}")
    return problems


def test_every_argument_of_every_mgm_command_has_help_that_shows_its_default():
    parser = build_parser()
    assert commands(parser), "mgm has no subcommands?"
    problems = [problem for command in commands(parser).values() for problem in help_problems(command)]
    assert problems == []


def test_the_help_check_finds_an_argument_without_help_and_a_default_not_shown():
    broken = argparse.ArgumentParser(prog="broken", formatter_class=argparse.HelpFormatter)
    broken.add_argument("--seed", type=int, default=0)
    broken.add_argument("--alias", default="champion", help="alias to move")
    assert help_problems(broken) == ["broken --seed: no help", "broken --alias: default 'champion' not shown"]


def test_a_default_the_help_already_names_is_not_shown_twice():
    parser = argparse.ArgumentParser(prog="p", formatter_class=DefaultsShown)
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight (default: 8)")
    parser.add_argument("--port", type=int, default=8080, help="port")
    parser.add_argument("--flag", action="store_true", help="a flag")
    assert help_problems(parser) == []
    text = " ".join(parser.format_help().split())
    assert "calls in flight (default: 8)" in text and "port (default: 8080)" in text and "(default: False)" not in text


@pytest.mark.parametrize("command", sorted(commands(build_parser())))
def test_mgm_command_help_prints_and_exits_0(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        mgm([command, "--help"])
    assert stopped.value.code == 0
    assert f"usage: mgm {command}" in capsys.readouterr().out


def test_mgm_serve_takes_host_and_port():
    args = build_parser().parse_args(["serve", "--host", "127.0.0.1", "--port", "8080", "--n-ctx", "4096"])
    assert (args.model, args.host, args.port, args.n_ctx) == ("smollm2-135m", "127.0.0.1", 8080, 4096)
