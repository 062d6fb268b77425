"""The ``mgm`` command line: one module per group of commands, each adding its subcommands (``add_commands``).

    mgm evaluate data.csv --source-col text --summary-col summary [--reference-col reference]   # evaluate.py
    mgm evaluate data.jsonl --source-col text --model gpt-4o-mini      # generate the summaries first
    mgm evaluate data.csv --grounding-only                             # the model-free check, no judge
    mgm evaluate data.csv --estimate --prices 0.15,0.60                # what judging would cost, no call
    mgm compare RUN_ID RUN_ID ... [--log]                              # runs.py
    mgm gate RUN_ID --model-uri models:/... --name summarizer --rule "strict_alignment>=0.8" --rule "rougeL>=0.3"
    mgm meta-eval ../shared/data/faithfulness/frank.jsonl [--grounding-only]   # people.py
    mgm agreement --experiment NAME                                    # the judge against people's feedback on traces
    mgm align --experiment NAME -o examples.json                       # their corrections as examples; agreement before/after
    mgm monitor --experiment NAME                                      # score traces not yet scored
    mgm serve smollm2-135m --port 8080                                 # local.py
    mgm demo

Exit codes a CI pipeline can use: 0 done (gate passed), 1 gate failed or evaluation failed (the judge failed on
every row), 2 bad input or configuration (a missing column, a malformed rule, an unknown run id, model URI,
registered model or alias, a file that is missing, a folder, unreadable or of no format it reads, a number out of
range), said in one line ``mgm <command>: <message>`` on stderr; also a cache that could not be written mid-run (a
full disk, a read-only file: ``store_writes``), said once the command has kept and logged what it judged. Any other
error is a bug and keeps its traceback. The tracking store defaults to ``$MLFLOW_TRACKING_URI``, else a local SQLite file ``mlflow.db``;
an experiment ``mgm`` creates in a local SQLite store keeps its artifacts in ``mlartifacts/`` beside the database.
Every argument's help names its default (``mgm <command> --help``); MLflow's own chatter is quieted (``quiet.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from . import evaluate, local, people, runs
from .common import EXIT_EVALUATION_FAILED, EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE, DefaultsShown

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped with Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as shells report a writer whose reader left (yes | head -1)
from .quiet import quiet_mlflow

__all__ = ["EXIT_EVALUATION_FAILED", "EXIT_GATE_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """``mgm``'s argument parser, every subcommand included (what ``--help`` shows, and what the tests walk)."""
    parser = argparse.ArgumentParser(
        prog="mgm", description="LLM-as-a-judge summarization metrics for MLflow. `mgm COMMAND --help` explains each command.",
        formatter_class=DefaultsShown,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (local, evaluate, people, runs):
        module.add_commands(commands)
    for command in commands.choices.values():  # argparse reads it when it formats the help
        command.formatter_class = DefaultsShown
    return parser


def _bad_input(error: Exception) -> bool:
    """Bad input or configuration: ours (ValueError and its kin), or MLflow saying a name is unknown or a value invalid."""
    from mlflow.exceptions import MlflowException

    from ..judge import JudgeConfigError
    from ..local import LocalModelServerError
    from ..sqlite_store import StoreUnreadable
    from ..store_writes import StoreWriteError
    from ..tracking.errors import is_bad_input

    if isinstance(error, MlflowException):  # MLflow says what went wrong through its error code
        return is_bad_input(error)
    if isinstance(error, OSError) and error.filename is not None:  # a file or folder given (or set) that cannot be used
        return True
    if _is_tracking_store_error(error):
        return True
    return isinstance(error, (ValueError, FileNotFoundError, JudgeConfigError, LocalModelServerError, StoreUnreadable, StoreWriteError))


def _is_tracking_store_error(error: Exception) -> bool:
    """The MLflow tracking store's database cannot be opened or read (``--tracking-uri`` names a folder, a file
    that is not a database, a corrupt one): SQLAlchemy's error, which MLflow lets through as it is."""
    try:
        from sqlalchemy.exc import DatabaseError, OperationalError
    except ImportError:  # mlflow-skinny: no SQL store at all
        return False
    return isinstance(error, OperationalError) or type(error) is DatabaseError


def _message(error: Exception) -> str:
    """The one line said for bad input: an operating-system error as ``cannot use PATH: PROBLEM`` (its errno and
    quoting left out), a tracking store that cannot be read by its URI, any other in its own words; credentials
    in a URL are hidden."""
    from pydantic import ValidationError

    from ..judge import redact_url

    if isinstance(error, ValidationError):  # a setting's own words, under its flag's name, not pydantic's dump
        return redact_url(_flags("; ".join(_setting_error(item) for item in error.errors())))
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"cannot use {error.filename}: {error.strerror}"
    if _is_tracking_store_error(error):
        import mlflow

        return redact_url(f"the MLflow tracking store {mlflow.get_tracking_uri()} cannot be used: {getattr(error, 'orig', None) or error}")
    return redact_url(_flags(str(error)))


def _flags(said: str) -> str:
    """The library's advice names its keywords (``pass prices=``); a command's user has flags (``--prices``)."""
    for keyword, flag in _KEYWORD_FLAGS:
        said = said.replace(keyword, flag)
    return said


_KEYWORD_FLAGS = (
    ("pass allow_mixed_judges=True", "pass --allow-mixed-judges"), ("pass allow_signature_mismatch=True", "pass --allow-mixed-judges"),
    ("pass allow_partial=True", "pass --allow-partial"), ("pass prices=", "pass --prices"), ("with card=", "with --card"),
    ("or pass model= / base_url=", "or pass --judge-model / --judge-base-url"), ("or pass model= to one", "or pass --judge-model, one"),
    ("set OPENAI_API_KEY or pass api_key=.", "set OPENAI_API_KEY."),
    ("pass Judge(model=...) or set MGM_JUDGE_MODEL", "pass --judge-model or set MGM_JUDGE_MODEL"),
    ("set MGM_JUDGE_BASE_URL or pass base_url=", "set MGM_JUDGE_BASE_URL or pass --judge-base-url"),
    ("are MGM_JUDGE_BASE_URL / base_url right?", "are MGM_JUDGE_BASE_URL / --judge-base-url right?"),
)


def _setting_error(item: dict) -> str:
    """One pydantic error as ``--prices: prices '1': write INPUT,OUTPUT...``: the flag of the setting it names when
    it has one, and the validator's message without pydantic's "Value error, " prefix."""
    from ..judge import JudgeSettings, declared
    from ..summarization.method import Method

    flags = {setting.name: setting.flag for kind in (JudgeSettings, Method) for setting in declared(kind) if setting.flag}
    location = [str(part) for part in item.get("loc", ())]
    where = flags.get(location[0], ".".join(location)) if location else ""
    message = str(item.get("msg", "")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _is_server_error(error: Exception) -> bool:
    from ..local import LocalModelServerError

    return isinstance(error, LocalModelServerError)


def main(argv: list[str] | None = None) -> int:
    from ..store_writes import StoreWriteWarning, one_line, watching_store_writes

    args = build_parser().parse_args(argv)
    # MLflow writes the experiment it was set to into $MLFLOW_EXPERIMENT_ID: a later main() in the same process
    # (tests, a notebook) must read the user's setting, not the last command's
    experiment_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    # and MLflow's current experiment, which the command sets: the caller's next run goes where it went before
    current = getattr(sys.modules.get("mlflow.tracking.fluent"), "_active_experiment_id", None)
    try:
        # A cache that could not be written is said once, in one line, after the command kept what it judged
        with quiet_mlflow(), watching_store_writes() as unwritten, warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWriteWarning)
            code = args.run(args)
        if unwritten:
            print(f"mgm {args.command}: {' '.join(one_line(unwritten).split())}", file=sys.stderr)
            return EXIT_USAGE if code == EXIT_OK else code
        return code
    except BrokenPipeError:  # the reader left (mgm ... | head -1): nothing more to say, and no traceback to say it with
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would raise it again
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C: said in one line, not a traceback through the event loop's frames
        print(f"mgm {args.command}: interrupted; what the judge answered is in its cache, and the same command goes on "
              "from there", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not _bad_input(exc):
            raise  # a bug: its traceback shows
        message, _, log_tail = str(exc).partition(":\n") if _is_server_error(exc) else (_message(exc), "", "")
        print(f"mgm {args.command}: {' '.join(message.split())}", file=sys.stderr)
        if log_tail.strip():  # what the local model server said before it died, as it said it
            print(log_tail.rstrip(), file=sys.stderr)
        return EXIT_USAGE
    finally:
        if experiment_id is None:
            os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
        else:
            os.environ["MLFLOW_EXPERIMENT_ID"] = experiment_id
        if (fluent := sys.modules.get("mlflow.tracking.fluent")) is not None:
            fluent._active_experiment_id = current
