"""The rows one evaluation's scorers are handed (``EvaluationRows``), for every task, and settling them into the
run's one result.

Plain ``mlflow.genai.evaluate`` calls a scorer once per row, from worker threads where nothing says reliably which
run the row is for (``mlflow.active_run()`` is None there, and a trace's ``mlflow.sourceRun`` names the run started
last in the process, or is missing when the store was too busy to write it). So a plain scorer only judges its row
and gives its card, and MLflow aggregates the cards' values itself (``claim_alignment/mean``, ...): it keeps no
evaluation's rows, hangs nothing on MLflow's objects and logs nothing from MLflow's aggregation hook. The full report
of a plain run (intervals, tables, signature, plots) is ``log_results(run_id, judges)`` afterwards.

``evaluate`` judges every row first (the task's ``TaskPipeline``) and hands MLflow scorers bound to one
``EvaluationRows`` made for that call: they read the pipeline's judgements, and every call is recorded with the
trace it came on, so after MLflow is done (its trace writers flushed) ``settle`` checks the rows handed against the
data, MLflow's ``result_df`` and the run's evaluated traces, and logs the result once, or tags the run ``mgm.error``
naming what is missing: never a smaller n, never a renamed row.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import mlflow
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient

from .pipeline import TaskPipeline
from .run_logging import log_result, tag_value

log = logging.getLogger(__name__)

ERROR_TAG = "mgm.error"  # why a run has no figures: the rows it was handed and the rows it has, both counted


@dataclass(frozen=True)
class Call:
    """One scorer call of an evaluation: which scorer, the trace it came with (None: MLflow handed none), the row
    (None: it could not be read), whether the feedback had a value MLflow aggregates, and a configuration error."""

    scorer: str
    trace_id: str | None
    row: Any
    valued: bool
    config_error: str | None = None
    unreadable: str | None = None  # why the row could not be read (its id and the reason: ``unreadable``)


def unreadable(inputs: Any, id_key: str, error: Exception) -> str:
    """A row that could not be read, in words: its id (when its inputs give one) and what is wrong with it."""
    row_id = inputs.get(id_key) if isinstance(inputs, dict) else None
    return f"{f'id {row_id!r}: ' if row_id is not None else ''}{error}"


@dataclass(frozen=True)
class Outcome:
    """What settling a run gave: its result, or why it has none; and each scorer's count of values."""

    run_id: str
    result: Any
    error: str | None
    valued: dict[str, int] = field(default_factory=dict)


class EvaluationRows:
    """The rows one evaluation's scorers were handed: the task's ``pipeline`` they read, and every call since (made
    for that evaluation and kept by its scorers only); ``all_metrics``: log every figure as a run metric."""

    def __init__(self, pipeline: TaskPipeline, *, all_metrics: bool = False):
        self.pipeline, self.all_metrics = pipeline, all_metrics
        self._calls: list[Call] = []
        self._lock = threading.Lock()

    def record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def settle(self, run_id: str, *, expected: tuple[int, int] | None = None) -> Outcome:
        """The run's result from the calls recorded, logged to ``run_id`` once; or, when they do not add up to the
        run's rows, no figures and the ``mgm.error`` tag. ``expected``: the rows of the data and of MLflow's
        ``result_df``, which must be the rows the scorers were handed."""
        with self._lock:
            calls, self._calls = self._calls, []
        rows = {c.trace_id: c.row for c in calls if c.row is not None and c.trace_id is not None}
        valued = {name: sum(c.valued for c in calls if c.scorer == name) for name in {c.scorer for c in calls}}
        found = problems(calls, rows, run_row_ids(run_id), self.pipeline)
        handed = max(calls_per_scorer(calls).values(), default=0)
        if expected is not None and not handed == expected[0] == expected[1]:
            found.insert(0, f"data has {expected[0]} rows, the judges were handed {handed}, MLflow's result_df lists {expected[1]}")
        if found:
            return Outcome(run_id, None, fail(run_id, "; ".join(found)), valued)
        result = self.pipeline.result(list(rows.values()))
        log_result(result, run_id=run_id, log_metrics=True, all_metrics=self.all_metrics)
        return Outcome(run_id, result, None, valued)


def run_row_ids(run_id: str) -> set[str]:
    """The traces MLflow lists as the evaluated rows of ``run_id`` (what its Traces tab shows of the evaluation), once
    its trace writers are done."""
    run = MlflowClient().get_run(run_id)
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, include_spans=False, return_type="list")
    return {t.info.trace_id for t in traces if TraceTagKey.EVAL_REQUEST_ID in t.info.tags}


def calls_per_scorer(calls: list[Call]) -> dict[str, int]:
    """How many times each scorer was called: the rows it was handed, traced or not."""
    return {name: sum(c.scorer == name for c in calls) for name in sorted({c.scorer for c in calls})}


def problems(calls: list[Call], rows: dict[str, Any], run_rows: set[str], pipeline: TaskPipeline) -> list[str]:
    """Why these calls do not add up to the run's rows (nothing: they do). Each scorer is called once per row, so
    the rows handed are its calls, whether or not they came with a trace. Rows whose ids repeat are refused, as
    every other path refuses them, never renamed."""
    found = []
    # A row the application answered with what no judge can read (a number, a dict without the summary): named, by its
    # trace and id with the reason, and not taken for a row MLflow failed to store (the message once blamed the store).
    bad = {c.trace_id: c.unreadable for c in calls if c.row is None and c.config_error is None}
    if bad:
        said = [f"the row of trace {trace} ({why})" if trace else f"a row ({why})" for trace, why in sorted(bad.items(), key=str)]
        found.append(f"{len(bad)} row(s) could not be read: {'; '.join(said[:10])}{' ...' if len(said) > 10 else ''}")
    run_rows = run_rows - set(bad)
    ordered = sorted(rows.values(), key=lambda p: (pipeline.order(p), p.trace_id or ""))
    repeated = pipeline.repeated_ids(ordered)
    if repeated:
        found.append(f"the rows' ids repeat ({'; '.join(repeated)})")
    config = next((c.config_error for c in calls if c.config_error), None)
    if config:
        found.append(f"the judge's configuration was refused: {config}")
    per_scorer = calls_per_scorer(calls)
    handed = max(per_scorer.values(), default=0)
    traceless = handed - len(rows) - len(bad)
    if traceless or set(rows) != run_rows:
        missing = f" ({traceless} without a trace)" if traceless else ""
        lost = sorted(str(r.row.id) for trace, r in rows.items() if trace not in run_rows)
        named = f": ids {', '.join(lost[:10])}{' ...' if len(lost) > 10 else ''}" if lost else ""
        found.append(f"the scorers were handed {handed} rows{missing}, the run lists {len(run_rows)} evaluated traces "
                     f"({len(set(rows) - run_rows)} of the rows handed are not among them{named}; {len(run_rows - set(rows))} "
                     "were not scored)")
    if len(set(per_scorer.values())) > 1:
        found.append("the scorers were not called alike: " + ", ".join(f"{name} {count} times" for name, count in per_scorer.items()))
    if traceless or set(rows) - run_rows:
        found.append("MLflow could not write every row's trace to its store; on a SQLite store, "
                     "MLFLOW_GENAI_EVAL_MAX_WORKERS=4 (evaluate's default) keeps them")
    return found


def fail(run_id: str, why: str) -> str:
    """Say on the run why it has no figures (the ``mgm.error`` tag) and in a warning; returns the sentence."""
    message = f"no results logged for run {run_id}: {why}"
    MlflowClient().set_tag(run_id, ERROR_TAG, tag_value(message))
    log.warning(message)
    return message

