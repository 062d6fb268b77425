"""``mgm evaluate``'s other tasks than summaries.

- ``--task rag``: the answers in a file judged against their retrieved passages, logged as an MLflow evaluation run
  (``tracking.evaluate_answers``): one trace per row with its faithfulness, relevance and (with expected answers)
  context-sufficiency cards, the headline figures with their intervals, the rows, claims and facts tables. The
  passages column holds a list of texts per row (JSONL, JSON, Parquet), or a JSON list in a CSV cell.
- ``--task rewrite``: the rewrites in a file judged against their inputs and instruction, logged as an MLflow
  evaluation run (``tracking.evaluate_rewrites``): one trace per row with its claim-alignment, coverage and
  instruction cards, the headline figures (``strict_alignment``: no new facts, ``coverage``: nothing lost,
  ``instruction_following``), the tables, report and signature.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import EXIT_EVALUATION_FAILED, make_judge, method_arguments, set_experiment, set_tracking
from .run_output import report_evaluation

# The summaries' options that mean nothing for the other tasks: refused rather than silently ignored.
_SUMMARY_ONLY = {"model": "--model", "reference_col": "--reference-col", "category_col": "--category-col", "ter": "--ter",
                 "no_coverage": "--no-coverage", "grounding_only": "--grounding-only", "estimate": "--estimate"}
_ANSWERS_ONLY = {"expected_col": "--expected-col"}
_REWRITES_ONLY = {"instruction": "--instruction", "instruction_col": "--instruction-col"}


def refuse_other_tasks(args: argparse.Namespace) -> None:
    """``--task summary`` refuses the options of the other tasks (rather than ignore them)."""
    _refuse(args, {**_ANSWERS_ONLY, **_REWRITES_ONLY})


def _refuse(args: argparse.Namespace, options: dict[str, str]) -> None:
    given = [flag for name, flag in options.items() if getattr(args, name)]
    if given:
        raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not for --task {args.task}")


def _passages(value: Any, position: int, column: str) -> Any:
    """A CSV cell's JSON list as a list; every other value as it is (``prepare_answer_rows`` names what is wrong)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError(f"row {position}: {column} is text that is not a JSON list of passages: {value[:80]!r}") from None
        return parsed
    return value


def answer_records(data, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows as ``mlflow.genai.evaluate`` takes them: question, passages and id in ``inputs``, the answer in
    ``outputs``, the expected answer in ``expectations``."""
    from ..tables import is_missing

    records = []
    for position, row in enumerate(data.to_dict(orient="records")):
        inputs = {"question": row[args.question_col], "passages": _passages(row[args.passages_col], position, args.passages_col),
                  "id": row[args.id_col] if args.id_col else position}
        record: dict[str, Any] = {"inputs": inputs, "outputs": row[args.answer_col]}
        expected = row[args.expected_col] if args.expected_col else None
        if not is_missing(expected):  # one that is not text is refused, by row
            record["expectations"] = {"expected_response": expected}
        records.append(record)
    return records


def evaluate_rag(args: argparse.Namespace, data) -> int:
    import mlflow

    from ..judge import preflight
    from ..tracking.answer_judges import answer_scorers, evaluate_answers
    from ..tracking.evaluate import RunRowsMismatch, check_rows

    _refuse(args, {**_SUMMARY_ONLY, **_REWRITES_ONLY})
    missing = [c for c in (args.question_col, args.passages_col, args.answer_col, args.expected_col, args.id_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    records = answer_records(data, args)
    set_tracking(args)
    experiment = set_experiment(args)
    judge = make_judge(args, batch_files=True)
    preflight(judge)  # a wrong model, a refused key or no endpoint: said before a run is started
    judges = answer_scorers(judge, sufficiency=bool(args.expected_col), **method_arguments(args))
    check_rows(records, judges)  # bad rows and repeated ids: refused before a run is started
    try:
        with mlflow.start_run(run_name=args.run_name) as run:
            evaluation = evaluate_answers(records, judges, all_metrics=args.all_metrics)
    except RunRowsMismatch as error:
        print(f"mgm evaluate: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    return report_evaluation(run, experiment, evaluation, f"{len(records)} answers")


def rewrite_records(data, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows as ``mlflow.genai.evaluate`` takes them: input, instruction and id in ``inputs``, the rewrite in
    ``outputs``."""
    return [{"inputs": {"input": row[args.input_col], "id": row[args.id_col] if args.id_col else position,
                        "instruction": args.instruction if args.instruction is not None else row[args.instruction_col]},
             "outputs": row[args.rewrite_col]}
            for position, row in enumerate(data.to_dict(orient="records"))]


def evaluate_rewrites(args: argparse.Namespace, data) -> int:
    import mlflow

    from ..judge import preflight
    from ..tracking.evaluate import RunRowsMismatch, check_rows, evaluate_rewrites
    from ..tracking.judge_sets import rewrite_scorers

    _refuse(args, {**_SUMMARY_ONLY, **_ANSWERS_ONLY})
    if (args.instruction is None) == (args.instruction_col is None):
        raise ValueError("--task rewrite needs --instruction TEXT (every row's) or --instruction-col COLUMN (one per row)")
    missing = [c for c in (args.input_col, args.rewrite_col, args.instruction_col, args.id_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    records = rewrite_records(data, args)
    set_tracking(args)
    experiment = set_experiment(args)
    judge = make_judge(args, batch_files=True)
    preflight(judge)
    judges = rewrite_scorers(judge, **method_arguments(args))
    check_rows(records, judges)  # bad rows and repeated ids: refused before a run is started
    try:
        with mlflow.start_run(run_name=args.run_name) as run:
            evaluation = evaluate_rewrites(records, judges, all_metrics=args.all_metrics)
    except RunRowsMismatch as error:
        print(f"mgm evaluate: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    return report_evaluation(run, experiment, evaluation, f"{len(records)} rewrites")
