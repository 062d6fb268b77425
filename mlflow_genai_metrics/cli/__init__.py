"""The ``mgm`` command line: one module per group of commands, each adding its subcommands (``add_commands``).

    mgm evaluate data.csv --source-col text --summary-col summary [--reference-col reference]   # evaluate.py
    mgm evaluate data.jsonl --source-col text --model gpt-4o-mini      # generate the summaries first
    mgm evaluate data.csv --grounding-only                             # the model-free check, no judge
    mgm evaluate data.csv --estimate --prices 0.15,0.60                # what judging would cost, no call
    mgm compare RUN_ID RUN_ID ... [--log]                              # runs.py
    mgm gate RUN_ID --model-uri models:/... --name summarizer --rule "alignment>=0.9" --rule "rougeL>=0.3"
    mgm meta-eval ../shared/data/faithfulness/frank.jsonl [--grounding-only]   # people.py
    mgm agreement --experiment NAME                                    # the judge against people's feedback on traces
    mgm monitor --experiment NAME                                      # score traces not yet scored
    mgm serve smollm2-135m                                             # local.py
    mgm demo

Exit codes a CI pipeline can use: 0 done (gate passed), 1 gate failed or evaluation failed (the judge failed on
every row), 2 bad input or configuration (a missing column, a malformed rule, an unknown run id, model URI,
registered model or alias), said in one line ``mgm <command>: <message>`` on stderr. Any other error is a bug and
keeps its traceback. The tracking store defaults to ``$MLFLOW_TRACKING_URI``, else a local SQLite file ``mlflow.db``.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import evaluate, local, people, runs
from .common import EXIT_EVALUATION_FAILED, EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_EVALUATION_FAILED", "EXIT_GATE_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mgm", description="LLM-as-a-judge summarization metrics for MLflow.")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (local, evaluate, people, runs):
        module.add_commands(commands)
    return parser


def _quiet_mlflow() -> None:
    """Our own progress bars and tables are the output; MLflow's info lines and artifact bars would drown them.
    Warnings are not filtered: the code that caused them is fixed instead (tests/test_quiet.py)."""
    import logging
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow  # noqa: F401  (MLflow configures its loggers on import: quieten them after that)

    logging.getLogger("mlflow").setLevel(logging.WARNING)


def _bad_input(error: Exception) -> bool:
    """Bad input or configuration: ours (ValueError and its kin), or MLflow saying a name is unknown or a value invalid."""
    from mlflow.exceptions import MlflowException

    from ..judge import JudgeConfigError
    from ..tracking.errors import is_bad_input

    if isinstance(error, MlflowException):  # MLflow says what went wrong through its error code
        return is_bad_input(error)
    return isinstance(error, (ValueError, FileNotFoundError, JudgeConfigError))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_mlflow()
    # MLflow writes the experiment it was set to into $MLFLOW_EXPERIMENT_ID: a later main() in the same process
    # (tests, a notebook) must read the user's setting, not the last command's
    experiment_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    try:
        return args.run(args)
    except Exception as exc:
        if not _bad_input(exc):
            raise  # a bug: its traceback shows
        print(f"mgm {args.command}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if experiment_id is None:
            os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
        else:
            os.environ["MLFLOW_EXPERIMENT_ID"] = experiment_id
