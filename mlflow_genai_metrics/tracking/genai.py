"""The one pipeline behind the MLflow-native judges: inputs -> rows -> one judgement per row -> the run's result.

Every judge (``judges.ClaimAlignment``, ``KeyPointCoverage``, ``Grounding``) reads its row's judgement from a
``Pipeline``; judges made with the same settings share one, so a row is judged once however many of them score it.
The pipeline remembers which rows each MLflow run scored, and ``finish(run_id)`` builds that run's result once and
logs it (``log_result``: metrics with intervals and n, tables, plots, signature).

    mlflow.genai.evaluate(data=..., scorers=summarization_scorers(judge))   # the three judges on one pipeline

The judge's own chat calls are made with MLflow tracing off for them (``mlflow.tracing.context(enabled=False)``,
carried into the judge's event loop with the call's context), so they are never traces of the evaluation.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import openai

from ..judge import Judge, JudgeConfigError
from ..judge.models import check_served_model
from ..judge.runner import run_sync
from ..summarization.ids import canonical_id
from ..summarization.judging import prepare_rows, source_key
from ..summarization.records import RowInput, RowJudgement
from ..summarization.result import SummarizationResult
from .run_logging import log_result
from .shared import SharedJudgement

__all__ = ["REFERENCE_KEYS", "InputKeys", "ParsedRow", "Pipeline", "finish_run", "logged_result", "parse_row", "preflight", "trace_rows"]

log = logging.getLogger(__name__)

# Where a reference summary sits in MLflow's ``expectations``: MLflow's own key first (its Correctness and
# Equivalence judges read ``expected_response``), then ours.
REFERENCE_KEYS = ("expected_response", "expected_summary")
_KEPT_RUNS = 32  # runs whose rows (or logged result) a pipeline remembers: enough for any notebook, bounded


@dataclass(frozen=True)
class InputKeys:
    """Where the source, the row id and the category are in a row's ``inputs`` (a dict), and the summary in ``outputs``."""

    source: str = "text"
    id: str = "id"
    category: str = "category"


@dataclass(frozen=True)
class ParsedRow:
    """One row as a judge sees it: the validated texts, its category and reference (if any), the trace it is on."""

    row: RowInput
    category: Any = None
    reference: str | None = None
    trace_id: str | None = None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))  # MLflow turns None into NaN


def parse_row(inputs: Any, outputs: Any, expectations: Any = None, *, keys: InputKeys = InputKeys(), trace_id: str | None = None) -> ParsedRow:
    """The row in MLflow's terms: the source is ``inputs`` (a string) or ``inputs[keys.source]``, the summary is
    ``outputs`` (or ``outputs["summary"]``; a missing one is an empty summary), the id ``inputs[keys.id]`` (else a
    hash of the source, so one article pairs up across runs), the reference ``expectations["expected_response"]``
    (or ``["expected_summary"]``). Raises ``ValueError`` naming what is wrong."""
    if isinstance(inputs, str):
        source, row_id, category = inputs, None, None
    elif isinstance(inputs, dict) and isinstance(inputs.get(keys.source), str):
        source, row_id, category = inputs[keys.source], inputs.get(keys.id), inputs.get(keys.category)
    else:
        found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"the source text must be `inputs` (a string) or `inputs[{keys.source!r}]`; got {found}")
    summary = outputs.get("summary") if isinstance(outputs, dict) else outputs
    if not _missing(summary) and not isinstance(summary, str):
        raise ValueError(f"`outputs` must be the summary text (or {{'summary': text}}); got {type(outputs).__name__}")
    reference = None
    if isinstance(expectations, dict):
        reference = next((expectations[k] for k in REFERENCE_KEYS if isinstance(expectations.get(k), str)), None)
    row_id = row_id if not _missing(row_id) else source_key(source)
    row = prepare_rows([source], ["" if _missing(summary) else summary], [row_id])[0]
    return ParsedRow(row=row, category=None if _missing(category) else category, reference=reference, trace_id=trace_id)


def preflight(judge: Judge) -> None:
    """One cheap request before any row: the endpoint's model listing. A model it does not serve, a key it refuses
    or an endpoint that does not answer raises ``JudgeConfigError`` in seconds (``Judge(check_model=False)`` skips it)."""
    if not judge.check_model:
        return
    settings = judge.settings

    async def check() -> None:
        client = openai.AsyncOpenAI(api_key=settings.key, base_url=settings.base_url, timeout=settings.timeout_s, max_retries=0)
        try:
            await check_served_model(client, settings, reached=False)
        finally:
            await client.close()

    run_sync(check())


class Pipeline:
    """One judgement per row for one judge and one set of options, and the rows each MLflow run scored.

    ``session_per_run``: bill the judge's usage to each run separately (a row judged for an earlier run shows as a
    cache hit); ``evaluate_summaries`` judges before its run exists and turns it off.
    """

    def __init__(self, judge: Judge | None, *, coverage: bool, grounding: bool = True, max_source_tokens: int | None = None,
                 keys: InputKeys = InputKeys(), session_per_run: bool = True):
        self.shared = SharedJudgement(judge, coverage=coverage, grounding=grounding, max_source_tokens=max_source_tokens, progress=False)
        self.keys = keys
        self.session_per_run = session_per_run
        self._runs: OrderedDict[str | None, dict[tuple, ParsedRow]] = OrderedDict()
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._checked = judge is None
        self._config_error: JudgeConfigError | None = None
        _ALL.add(self)

    @property
    def judge(self) -> Judge | None:
        return self.shared.judge

    @property
    def coverage(self) -> bool:
        return self.shared.coverage

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedRow:
        return parse_row(inputs, outputs, expectations, keys=self.keys, trace_id=getattr(getattr(trace, "info", None), "trace_id", None))

    def check(self) -> None:
        """The preflight, once: a configuration error is raised now and for every later row, with no further call."""
        with self._check_lock:  # rows arriving together wait for the one check, then share its outcome
            if self._config_error is not None:
                raise self._config_error
            if self._checked:
                return
            try:
                preflight(self.judge)
            except JudgeConfigError as error:
                self._config_error = error
                raise
            self._checked = True

    def judgement(self, parsed: ParsedRow, run_id: str | None = None) -> RowJudgement:
        """The row's judgement (judged once, from any thread), remembered as scored by ``run_id``."""
        self.check()
        self._remember(parsed, run_id)
        try:
            with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
                return self.shared.judgement(parsed.row)
        except JudgeConfigError as error:
            with self._check_lock:
                self._config_error = error
            raise

    def judge_all(self, rows: Sequence[ParsedRow]) -> list[RowJudgement]:
        """Judge many rows in one batch (the judge's concurrency, one pass per round), before any is read."""
        self.check()
        with mlflow.tracing.context(enabled=False):
            return self.shared.judgements([p.row for p in rows])

    def _remember(self, parsed: ParsedRow, run_id: str | None) -> None:
        if parsed.trace_id is None:
            return  # a direct call, outside any evaluation: no run to report to
        with self._lock:
            if run_id not in self._runs:
                if self.session_per_run:
                    self.shared.begin_session(run_id)
                self._runs[run_id] = {}
                while len(self._runs) > _KEPT_RUNS:
                    self._runs.popitem(last=False)
            row = parsed.row
            self._runs[run_id].setdefault((canonical_id(row.id), parsed.trace_id, row.source_key, row.summary), parsed)

    def remember(self, rows: Sequence[ParsedRow], run_id: str) -> None:
        """Count these rows as scored by ``run_id`` (rows read back from a run's traces)."""
        for parsed in rows:
            self._remember(parsed, run_id)

    def has_rows(self, run_id: str) -> bool:
        with self._lock:
            return bool(self._runs.get(run_id))

    def result(self, run_id: str) -> SummarizationResult | None:
        """The result of the rows ``run_id`` scored (None if none), forgetting them."""
        with self._lock:
            pending = list(self._runs.pop(run_id, {}).values())
        if not pending:
            return None
        pending.sort(key=lambda p: (canonical_id(p.row.id), p.row.summary))
        rows, seen = [], {}
        for parsed in pending:  # the same id twice (two traces of one row): both count, the second as id#2
            count = seen[parsed.row.id] = seen.get(parsed.row.id, 0) + 1
            rows.append(parsed.row if count == 1 else parsed.row.model_copy(update={"id": f"{parsed.row.id}#{count}"}))
        categories = [p.category for p in pending]
        extra = {"category": categories} if any(c is not None for c in categories) else None
        references = [p.reference for p in pending]
        if any(r is None for r in references):
            if any(r is not None for r in references):
                log.warning("only %d of %d rows have a reference summary: ROUGE, BLEU and chrF are left out", sum(r is not None for r in references), len(rows))
            references = None
        return self.shared.result(rows, references=references, extra_columns=extra)

    def finish(self, run_id: str) -> SummarizationResult | None:
        """Log the result of the rows ``run_id`` scored to that run, once; later calls return what was logged."""
        return _LOGGED.finish(self, run_id)


class _LoggedRuns:
    """Each run's logged result, so a run is logged once however many judges or pipelines report to it."""

    def __init__(self) -> None:
        self._results: OrderedDict[str, tuple[Pipeline, SummarizationResult]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str) -> SummarizationResult | None:
        with self._lock:
            found = self._results.get(run_id)
        return found[1] if found else None

    def finish(self, pipeline: Pipeline, run_id: str) -> SummarizationResult | None:
        with self._lock:  # one run is logged by one pipeline at a time
            logged = self._results.get(run_id)
            if logged is not None and logged[0] is not pipeline:
                if pipeline.has_rows(run_id) and pipeline.judge is not None and logged[0].judge is not None:
                    log.warning("run %s already holds the results of judge %s; the rows judged by %s are not logged again",
                                run_id, logged[0].judge.model, pipeline.judge.model)
                pipeline.result(run_id)  # forget its rows
                return logged[1]
            result = pipeline.result(run_id)
            if result is None:
                return logged[1] if logged else None
            log_result(result, run_id=run_id, log_metrics=True)
            self._results[run_id] = (pipeline, result)
            while len(self._results) > _KEPT_RUNS:
                self._results.popitem(last=False)
            return result


_LOGGED = _LoggedRuns()


class _Pipelines:
    """The process's pipelines, one per judge settings: judges made alike share their judgements and their runs."""

    def __init__(self) -> None:
        self._pipelines: dict[str, Pipeline] = {}
        self._coverage: set[str] = set()
        self._lock = threading.Lock()

    def want_coverage(self, key: str) -> None:
        """A ``KeyPointCoverage`` exists for these settings: their judgements include key points from now on."""
        with self._lock:
            self._coverage.add(key)
            if key in self._pipelines and not self._pipelines[key].coverage:
                del self._pipelines[key]

    def get(self, key: str, make: Any) -> Pipeline:
        """The pipeline for ``key``, made by ``make(coverage)`` the first time."""
        with self._lock:
            if key not in self._pipelines:
                self._pipelines[key] = make(key in self._coverage)
            return self._pipelines[key]



PIPELINES = _Pipelines()
_ALL: weakref.WeakSet[Pipeline] = weakref.WeakSet()  # every pipeline alive, shared or bound to its judges


def logged_result(run_id: str) -> SummarizationResult | None:
    """The result this process logged to ``run_id``, if it did."""
    return _LOGGED.get(run_id)


def finish_run(run_id: str) -> SummarizationResult | None:
    """Log the results of ``run_id`` from whichever pipeline holds its rows (a judge's before the grounding check's)."""
    candidates = sorted(list(_ALL), key=lambda p: p.judge is None)
    for pipeline in candidates:
        if pipeline.has_rows(run_id):
            return pipeline.finish(run_id)
    return _LOGGED.get(run_id)


def root_span(trace: Any) -> Any:
    """A trace's root span (None when it has none)."""
    return next((span for span in trace.data.spans if span.parent_id is None), None)


def trace_rows(traces: Sequence[Any], pipeline: Pipeline) -> tuple[list[ParsedRow], list[str]]:
    """Each trace as a row (its root span's inputs and outputs, its expectations), and the ids of the traces that
    are not one."""
    rows, unusable = [], []
    for trace in traces:
        root = root_span(trace)
        expectations = {a.name: a.value for a in trace.info.assessments if getattr(a, "expectation", None) is not None}
        try:
            if root is None:
                raise ValueError("no root span")
            rows.append(pipeline.parse(root.inputs, root.outputs, expectations, trace))
        except ValueError:
            unusable.append(trace.info.trace_id)
    return rows, unusable
