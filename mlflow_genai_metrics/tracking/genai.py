"""Scorers for ``mlflow.genai.evaluate``.

    mlflow.genai.evaluate(data=[{"inputs": {"text": article}, "outputs": summary}, ...],
                          scorers=summarization_scorers(judge))

One ``Feedback`` per metric per row (value, rationale = the judge's reasoning, JSON-encoded claims and verdicts
in the metadata); a judge failure is ``Feedback(error=...)``, never a value. All scorers share one judgement per
row. ``mlflow.genai.evaluate`` logs traces with assessments but no per-row table and only means: when every row is
scored, the ``judge_error`` scorer's aggregation logs the exact aggregates of ``docs/metrics.md`` (with intervals),
the tables, report, signature and plots to the evaluation run, as on the classic path.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import uuid
from typing import Any

import mlflow
from mlflow.entities import Feedback
from mlflow.genai.scorers import Scorer, scorer

from ..grounding.model import model_tag
from ..judge import Judge
from ..signature import summarization_signature
from ..summarization.ids import canonical_id
from ..summarization.judging import prepare_rows, source_key
from ..summarization.records import RowInput, RowJudgement
from ..summarization.metrics import METRICS
from ..summarization.scoring import explanation, judge_row_columns, row_values
from .run_logging import log_result
from .shared import SharedJudgement

__all__ = ["summarization_scorers"]



class _GenaiAdapter:
    """Collects the rows one ``mlflow.genai.evaluate`` scores, and logs the run-level report when it is done."""

    def __init__(self, shared: SharedJudgement, *, source_key: str, id_key: str, category_key: str):
        self.shared = shared
        self.source_key = source_key
        self.id_key = id_key
        self.category_key = category_key
        self._pending: dict[tuple[str, str | None, str, str], tuple[RowInput, Any]] = {}
        self._lock = threading.Lock()

    def row(self, inputs: Any, outputs: Any) -> tuple[RowInput, Any]:
        if isinstance(inputs, str):
            source, row_id, category = inputs, None, None
        elif isinstance(inputs, dict) and isinstance(inputs.get(self.source_key), str):
            source, row_id, category = inputs[self.source_key], inputs.get(self.id_key), inputs.get(self.category_key)
        else:
            keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"the source text must be `inputs` (a string) or `inputs[{self.source_key!r}]`; got {keys}")
        summary = outputs.get("summary") if isinstance(outputs, dict) else outputs
        missing = summary is None or (isinstance(summary, float) and math.isnan(summary))  # MLflow turns None into NaN
        if not missing and not isinstance(summary, str):
            raise ValueError(f"`outputs` must be the summary text (or {{'summary': text}}); got {type(outputs).__name__}")
        # A missing summary is a model that wrote nothing: an empty summary, scored as on every other path.
        row_id = row_id if row_id is not None else source_key(source)
        return prepare_rows([source], ["" if missing else summary], [row_id])[0], category

    def judgement(self, inputs: Any, outputs: Any, trace: Any = None) -> RowJudgement:
        row, category = self.row(inputs, outputs)
        # One entry per evaluated row: rows with the same texts under different ids (or different traces) both count.
        identity = getattr(getattr(trace, "info", None), "trace_id", None)
        with self._lock:
            if not self._pending:  # the first row of a new evaluation: bill its judge usage afresh
                self.shared.begin_session(uuid.uuid4().hex)
            self._pending.setdefault((canonical_id(row.id), identity, row.source_key, row.summary), (row, category))
        return self.shared.judgement(row)

    def finish(self) -> int:
        """Log this evaluation's result to the active run; return the number of rows."""
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        pending.sort(key=lambda item: (str(item[0].id), item[0].summary))
        rows, seen = [], {}
        for row, _ in pending:
            count = seen[row.id] = seen.get(row.id, 0) + 1
            rows.append(row if count == 1 else row.model_copy(update={"id": f"{row.id}#{count}"}))
        categories = [category for _, category in pending]
        extra = {"category": categories} if any(c is not None for c in categories) else None
        result = self.shared.result(rows, extra_columns=extra)
        if mlflow.active_run() is not None:
            log_result(result, log_metrics=True)
        return len(rows)


def _feedback(name: str, judgement: RowJudgement, signature: str) -> Feedback:
    if judgement.error is not None:
        return Feedback(name=name, error=str(judgement.error))
    value = row_values(judgement)[name]
    why = explanation(judgement, METRICS.row(name).reasoning)
    claims = [c.model_dump() for c in judgement.claims]
    metadata = {"row_id": str(judgement.id), "claims": json.dumps(claims), "signature": signature}
    if judgement.key_points is not None:
        metadata["key_points"] = json.dumps([p.model_dump() for p in judgement.key_points])
    return Feedback(name=name, value=value, rationale=why, metadata=metadata)


def _grounding_feedback(judgement: RowJudgement) -> Feedback:
    """The model-free check needs no judge: a row the judge failed on still gets its grounding."""
    checked = judgement.grounding
    if checked is None or checked.grounding is None:
        return Feedback(name="grounding", error="the summary has no sentence to check")
    metadata = {"row_id": str(judgement.id), "grounded": str(checked.grounded)}
    return Feedback(name="grounding", value=checked.grounding, rationale=checked.reasoning, metadata=metadata)


def summarization_scorers(
    judge: Judge,
    *,
    coverage: bool = True,
    grounding: bool = True,
    source_key: str = "text",
    id_key: str = "id",
    category_key: str = "category",
    max_source_tokens: int | None = None,
) -> list[Scorer]:
    """Scorers for ``mlflow.genai.evaluate``, one per per-row metric plus ``judge_error``, sharing one judgement per row.

    The source is ``inputs`` when it is a string, else ``inputs[source_key]``; the summary is ``outputs``. Row ids
    (for comparing runs row by row) come from ``inputs[id_key]`` when present, else from a hash of the source, so
    the same article pairs up across runs; ``inputs[category_key]`` feeds the per-category plot. ``grounding=True``
    adds a ``grounding`` scorer (the model-free check; its run metric is ``grounding`` with its interval, logged
    with the other results, so MLflow's own mean is not logged beside it).
    """
    shared = SharedJudgement(judge, coverage=coverage, grounding=grounding, max_source_tokens=max_source_tokens, progress=False)
    adapter = _GenaiAdapter(shared, source_key=source_key, id_key=id_key, category_key=category_key)

    @functools.cache
    def signature() -> str:
        return summarization_signature(
            judge, coverage=coverage, max_source_tokens=shared.max_source_tokens, grounding=model_tag() if grounding else None
        )

    def make(name: str) -> Scorer:
        def score(inputs: Any, outputs: Any, trace: Any = None) -> Feedback:
            return _feedback(name, adapter.judgement(inputs, outputs, trace), signature())

        return scorer(score, name=name)

    scorers = [make(name) for name in judge_row_columns(coverage=coverage)]
    if grounding:
        def grounding_score(inputs: Any, outputs: Any, trace: Any = None) -> Feedback:
            return _grounding_feedback(adapter.judgement(inputs, outputs, trace))

        scorers.append(scorer(grounding_score, name="grounding", aggregations=[]))

    def judge_error(inputs: Any, outputs: Any, trace: Any = None) -> Feedback:
        judgement = adapter.judgement(inputs, outputs, trace)
        return Feedback(name="judge_error", value=int(judgement.error is not None), rationale=str(judgement.error) if judgement.error is not None else "judged")

    def rows(values: list[float]) -> float:
        # MLflow calls this once, after every row is scored: the moment to log the run-level report.
        return float(adapter.finish())

    scorers.append(scorer(judge_error, name="judge_error", aggregations=["mean", rows]))
    return scorers
