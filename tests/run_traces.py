"""What people see of an evaluation run in the MLflow UI's Traces tab: one trace per row, the judges' cards on it."""

from __future__ import annotations

import mlflow
from mlflow.entities import Feedback

__all__ = ["cards_per_row"]


def cards_per_row(run_id: str) -> dict[str, list[str]]:
    """Row id (the trace's ``inputs["id"]``) -> the names of the feedback cards on its trace, sorted (a reference
    the row carries is an expectation, not a card). A row with two traces fails here."""
    mlflow.flush_trace_async_logging()
    experiment_id = mlflow.get_run(run_id).info.experiment_id  # the run's, whichever experiment is the current one
    found: dict[str, list[str]] = {}
    for trace in mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list"):
        root = next(span for span in trace.data.spans if span.parent_id is None)
        row_id = str(root.inputs["id"])
        assert row_id not in found, f"row {row_id} has more than one trace in run {run_id}"
        found[row_id] = sorted(a.name for a in trace.info.assessments if isinstance(a, Feedback))
    return found
