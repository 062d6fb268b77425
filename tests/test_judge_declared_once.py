"""Each judge setting is declared once (``setting(...)``, a field of ``JudgeSettings``) and everything else is derived
from the declaration: ``Judge``'s signature, attributes and ``repr``, the ``mgm`` judge flags, the scorers' spec and
the docs table. A new setting is one declaration, and shows in each."""

from __future__ import annotations

import argparse
import inspect
import pickle

import pytest
from test_judge_signature_doc import settings_table

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.cli.common import judge_arguments, judge_options, method_arguments, method_options
from mlflow_genai_metrics.judge import JudgeSettings, declared, setting
from mlflow_genai_metrics.tracking import JudgeSpec

LOCAL = "http://127.0.0.1:9/v1"


class PatientSettings(JudgeSettings):
    """A new setting, declared the one way a setting is (issue 29's ``stability`` was added so)."""

    patience: int = setting(1, "how many times each request is asked; the answers must agree", flag="--patience", ge=1)


class PatientJudge(Judge, settings_type=PatientSettings):
    pass


def test_a_setting_declared_once_shows_in_the_constructor_the_cli_and_the_docs_table():
    parameter = inspect.signature(PatientJudge).parameters["patience"]
    assert (parameter.kind, parameter.default, parameter.annotation) == (parameter.KEYWORD_ONLY, 1, int)
    judge = PatientJudge("m", LOCAL, patience=3, cache_dir=None)
    assert judge.patience == 3 and judge.settings.patience == 3 and "patience=3" in repr(judge)
    assert "``patience`` (1): how many times" in PatientJudge.__doc__
    with pytest.raises(AttributeError, match="with_limits"):
        judge.patience = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="patience"):
        PatientJudge("m", LOCAL, patience=0)
    assert pickle.loads(pickle.dumps(judge)).patience == 3
    assert judge.with_limits(max_concurrency=2, max_requests_per_s=None).patience == 3

    parser = argparse.ArgumentParser()
    judge_options(parser, settings_type=PatientSettings)
    assert "--patience PATIENCE" in parser.format_help()
    given = judge_arguments(parser.parse_args(["--patience", "2", "--judge-model", "m", "--judge-base-url", LOCAL]),
                            settings_type=PatientSettings)
    assert (given["patience"], given["model"]) == (2, "m")
    assert PatientJudge(**given, cache_dir=None).patience == 2

    assert "| `patience` | `1` | how many times each request is asked; the answers must agree |" in settings_table(PatientSettings)
    assert "patience" not in inspect.signature(Judge).parameters  # the base judge is left as it was


def test_every_declared_setting_is_a_parameter_and_the_rest_are_not():
    names = [s.name for s in declared(JudgeSettings)]
    assert list(inspect.signature(Judge).parameters) == names
    assert set(JudgeSettings.model_fields) - set(names) == {"api_key_given"}  # worked out by resolve
    assert [name for name, p in inspect.signature(Judge).parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == [
        "model", "base_url", "api_key"]


def test_an_unknown_setting_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="max_retrys"):
        Judge("m", LOCAL, max_retrys=2)
    with pytest.raises(TypeError):
        Judge("m", LOCAL, "key", "a fourth positional")


def test_repr_shows_the_settings_that_differ_from_their_defaults_never_the_key_or_url_credentials():
    judge = Judge("m", "http://user:hunter2-secret@127.0.0.1:9/v1", seed=7, cache_dir=None)
    assert repr(judge) == "Judge(model='m', base_url='http://***@127.0.0.1:9/v1', seed=7, cache_dir=None)"


def test_the_mgm_flags_are_the_declared_ones_with_their_names():
    parser = argparse.ArgumentParser()
    judge_options(parser)
    flags = {option for action in parser._actions for option in action.option_strings} - {"-h", "--help"}
    assert flags == {"--judge-model", "--judge-base-url", "--judge-context", "--concurrency", "--prices", "--max-calls",
                     "--max-cost-usd", "--batch", "--batch-poll-s", "--batch-dir", "--batch-command"}
    left_out = argparse.ArgumentParser()
    judge_options(left_out, leave_out=("batch",))
    assert judge_arguments(left_out.parse_args([])) == {
        "model": None, "base_url": None, "context_window": None, "max_concurrency": 8, "prices": None, "max_calls": None,
        "max_cost_usd": None}


def test_the_method_s_flags_are_its_declared_ones_and_not_the_judge_s():
    """Issue 46: stability, the order check and examples are how claims are verified, not settings of the LLM client:
    ``Judge`` refuses them, and their flags are ``Method``'s, read into its keywords."""
    for name, value in (("stability", 3), ("order_check", 0.5), ("examples", None)):
        with pytest.raises(TypeError, match=name):
            Judge("m", LOCAL, **{name: value})
    parser = argparse.ArgumentParser()
    method_options(parser)
    assert {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"} == {"--stability", "--order-check", "--examples"}
    assert method_arguments(parser.parse_args([])) == {"stability": 1, "order_check": 0.0, "examples": None}
    assert method_arguments(parser.parse_args(["--stability", "3", "--order-check", "0.25"])) == {"stability": 3, "order_check": 0.25, "examples": None}


def test_batch_flags_make_the_batch_options():
    parser = argparse.ArgumentParser()
    judge_options(parser)
    assert judge_arguments(parser.parse_args([]))["batch"] is None
    assert judge_arguments(parser.parse_args(["--batch-poll-s", "5"]))["batch"] is None  # a poll interval alone is not batch mode
    assert judge_arguments(parser.parse_args(["--batch"]))["batch"].poll_s == 30.0
    options = judge_arguments(parser.parse_args(["--batch-dir", "files", "--batch-poll-s", "5"]))["batch"]
    assert (str(options.files_dir), options.poll_s, options.command) == ("files", 5.0, None)  # --batch-dir implies --batch


def test_the_scorers_spec_carries_the_settings_marked_spec():
    spec = JudgeSpec.model_fields
    assert list(spec) == [s.name for s in declared(JudgeSettings) if s.spec] + ["cache", "prompts"]
    assert spec["model"].is_required() and spec["base_url"].is_required() and spec["max_concurrency"].default == 8
