"""``mgm evaluate --task rag``: judge the answers in a file against their retrieved passages and log an MLflow
evaluation run (``tracking.evaluate_answers``): one trace per row with its faithfulness, relevance and (with
expected answers) context-sufficiency cards, the headline figures with their intervals, the rows, claims and facts
tables. The passages column holds a list of texts per row (JSONL, JSON, Parquet), or a JSON list in a CSV cell."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import EXIT_EVALUATION_FAILED, make_judge, set_experiment, set_tracking
from .run_output import report_evaluation

# The summaries' options that mean nothing for answers: refused with --task rag rather than silently ignored.
_SUMMARY_ONLY = {"model": "--model", "reference_col": "--reference-col", "category_col": "--category-col", "ter": "--ter",
                 "no_coverage": "--no-coverage", "grounding_only": "--grounding-only", "estimate": "--estimate"}


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
    records = []
    for position, row in enumerate(data.to_dict(orient="records")):
        inputs = {"question": row[args.question_col], "passages": _passages(row[args.passages_col], position, args.passages_col),
                  "id": row[args.id_col] if args.id_col else position}
        record: dict[str, Any] = {"inputs": inputs, "outputs": row[args.answer_col]}
        if args.expected_col and isinstance(row[args.expected_col], str):
            record["expectations"] = {"expected_response": row[args.expected_col]}
        records.append(record)
    return records


def evaluate_rag(args: argparse.Namespace, data) -> int:
    import mlflow

    from ..judge import preflight
    from ..tracking.answer_judges import answer_scorers, evaluate_answers
    from ..tracking.evaluate import RunRowsMismatch

    given = [flag for name, flag in _SUMMARY_ONLY.items() if getattr(args, name)]
    if given:
        raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for summaries, not for --task rag")
    missing = [c for c in (args.question_col, args.passages_col, args.answer_col, args.expected_col, args.id_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    records = answer_records(data, args)
    set_tracking(args)
    experiment = set_experiment(args)
    judge = make_judge(args, batch_files=True)
    preflight(judge)  # a wrong model, a refused key or no endpoint: said before a run is started
    judges = answer_scorers(judge, sufficiency=bool(args.expected_col))
    try:
        with mlflow.start_run(run_name=args.run_name) as run:
            evaluation = evaluate_answers(records, judges, all_metrics=args.all_metrics)
    except RunRowsMismatch as error:
        print(f"mgm evaluate: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    return report_evaluation(run, experiment, evaluation, f"{len(records)} answers")
