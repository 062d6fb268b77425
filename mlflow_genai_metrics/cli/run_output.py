"""What an evaluation command (``mgm evaluate``, summaries or answers) prints when its run is logged, and how it
ends: the run, where its artifacts are, one line per headline figure with its interval, the warnings; a run whose
every row the judge failed on is marked FAILED and the command exits 1."""

from __future__ import annotations

import math
import sys
from typing import Any

from .common import EXIT_EVALUATION_FAILED, EXIT_OK


def report_evaluation(run: Any, experiment: Any, evaluation: Any, rows: str) -> int:
    """Print what ``evaluation`` logged to ``run`` (``rows``: "8 rows", "3 answers") and return the exit code."""
    import mlflow

    from ..tracking.labels import people_lines

    print(f"run {run.info.run_id} ({rows}) in experiment {experiment.name!r} of {mlflow.get_tracking_uri()}")
    print(f"artifacts: {run.info.artifact_uri}")
    for line in summary_lines(evaluation.metrics):
        print(line)
    if "grounded_rate" in evaluation.metrics:  # what the grounded label holds on, as the run's tag and every card say
        print(f"  (grounding, grounded_rate: {grounding_caveat()})")
    for line in people_lines(run.info.run_id):  # a run with a labelled sample (mgm label-sample): people's rate
        print(line)
    for warning in evaluation.warnings:
        print(f"WARNING: {warning}")
    if evaluation.metrics.get("judge_error_rate") == 1.0:
        return evaluation_failed(run.info.run_id, evaluation.result.rows["error"])
    return EXIT_OK


def grounding_caveat() -> str:
    """The data the grounding score (and its 0.5 cut, ``grounded``) was calibrated on, and what that makes it."""
    from ..grounding.model import calibration_note

    note = calibration_note()
    return note[:1].lower() + note[1:]


def summary_lines(metrics: dict[str, float]) -> list[str]:
    """One line per headline figure the evaluation has: ``name  value  [low, high]``, or ``(no interval from n
    rows)`` where too few rows (or rows all alike) give no interval that holds its coverage."""
    from ..summarization.metrics import ANSWER_RUN_METRICS, REWRITE_RUN_METRICS, RUN_METRICS, RUN_USAGE
    from ..summarization.scoring import interval_names

    lines = []
    for name in (*RUN_METRICS, *ANSWER_RUN_METRICS, *REWRITE_RUN_METRICS, "ter", "judge/suspect_rate", *RUN_USAGE):  # ter: only with --ter
        if name not in metrics:
            continue
        low, high, n = (metrics.get(key) for key in interval_names(name))
        if math.isnan(metrics[name]):  # no row to stand on (every summary empty, say): words, not "nan"
            lines.append(f"  {name:<28} none: no row to stand on" + (f" (n={n:.0f})" if n is not None else ""))
            continue
        if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
            interval = f"  [{_number(low)}, {_number(high)}]"
        elif n is not None:
            interval = f"  (no interval from {n:.0f} row{'s' if n != 1 else ''})"
        else:
            interval = ""
        lines.append(f"  {name:<28} {_number(metrics[name])}{interval}")
    return lines


def _number(value: float) -> str:
    """A figure as a person reads it: 3 significant digits (as the cards show them), a count whole."""
    from ..summarization.cards import shown

    if math.isfinite(value) and value.is_integer():
        return f"{value:.0f}"
    return f"{shown(value):g}" if math.isfinite(value) else str(value)


def evaluation_failed(run_id: str, errors) -> int:
    """Every row a judge failure: no judge metric stands on anything, so the run is marked FAILED and mgm exits 1."""
    from mlflow.tracking import MlflowClient

    from ..study import judge_failure_summary

    first = next((e for e in errors.fillna("").astype(str) if e), "")
    MlflowClient().set_terminated(run_id, status="FAILED")
    detail = f"; the first error: {' '.join(first.split())}" if first else ""
    print(f"mgm evaluate: the judge failed on every row, {judge_failure_summary(errors) or len(errors)}: run {run_id} marked FAILED{detail}", file=sys.stderr)
    return EXIT_EVALUATION_FAILED
