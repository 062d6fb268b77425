"""What a summary scorer asks of a row, and the run result of one ``evaluate_summaries`` call.

Plain ``mlflow.genai.evaluate`` calls a scorer once per row, from worker threads where nothing says reliably which
run the row is for (``mlflow.active_run()`` is None there, and a trace's ``mlflow.sourceRun`` names the run started
last in the process, or is missing when the store was too busy to write it). So a scorer there only judges its row
and gives its card, and MLflow aggregates the cards' values itself (``claim_alignment/mean``, ...): it keeps no row,
hangs nothing on MLflow's objects and logs nothing from MLflow's aggregation hook. The full report of a plain run
(intervals, tables, signature, plots) is ``log_results(run_id, judges)`` afterwards, from the run's traces (the
judge's cache answers what was asked). A scorer on its own asks only what its card needs (``ClaimAlignment`` the
claim passes, ``KeyPointCoverage`` the key-point passes, ``Grounding`` no judge), so scorers made with different
Judges never wait for one another.

``evaluate_summaries`` judges every row first (a ``Pipeline``) and hands MLflow scorers bound to one ``ScoredRows``
made for that call: they read the pipeline's judgements, and every call is recorded with the trace it came on, so
after MLflow is done (its trace writers flushed) ``settle`` checks the rows handed against the data, MLflow's
``result_df`` and the run's evaluated traces, and logs the result once, or tags the run ``mgm.error`` naming what
is missing: never a smaller n, never a renamed row.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import mlflow
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient

from ..judge import Judge, Preflight
from ..rewrites.api import check_instructions
from ..summarization.ids import canonical_id
from ..summarization.judging import judge_rows
from ..summarization.options import JudgingOptions, source_token_budget
from ..summarization.pipeline import judge_row_pipelines
from ..summarization.records import RowJudgement
from ..summarization.result import SummarizationResult
from .genai import InputKeys, ParsedRow, parse_row, repeated_ids, trace_id_of
from .run_logging import log_result

log = logging.getLogger(__name__)

ERROR_TAG = "mgm.error"  # why a run has no figures: the rows it was handed and the rows it has, both counted
# What a scorer's card reads of a row: its claims, its source's key points, the grounding check, a rewrite's instruction check.
CLAIMS, KEY_POINTS, GROUNDING, INSTRUCTION = "claims", "key_points", "grounding", "instruction"


@dataclass(frozen=True)
class Call:
    """One scorer call of an ``evaluate_summaries`` evaluation: which scorer, the trace it came with (None: MLflow
    handed none), the row, whether the feedback had a value, and a configuration error, if any."""

    scorer: str
    trace_id: str | None
    row: ParsedRow | None
    valued: bool
    config_error: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What settling a run gave: its result, or why it has none; and each scorer's count of values."""

    run_id: str
    result: SummarizationResult | None
    error: str | None
    valued: dict[str, int] = field(default_factory=dict)


class ScoredRows:
    """How scorers read rows: where the texts are, with which judge and options; for ``evaluate_summaries`` also its
    ``pipeline`` (the judgements made before MLflow ran) and every call since, made for that call and kept by its
    scorers only."""

    def __init__(self, judge: Judge | None, *, needs: frozenset[str], keys: InputKeys = InputKeys(), grounding: bool = True,
                 max_source_tokens: int | None = None, pipeline: Any = None, all_metrics: bool = False):
        self.judge = judge
        self.needs = needs
        self.keys = keys
        self.grounding = grounding
        self.max_source_tokens = max_source_tokens if max_source_tokens is not None else source_token_budget(judge)
        self.pipeline = pipeline  # evaluate_summaries: judgements read from its batch, not asked row by row
        self.all_metrics = all_metrics  # log every figure as a run metric, not only the headline ones
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self.preflight = Preflight(judge, needed=pipeline is None)  # evaluate_summaries checked the judge already

    def parse(self, inputs: Any, outputs: Any, expectations: Any, trace: Any) -> ParsedRow:
        return parse_row(inputs, outputs, expectations, keys=self.keys, trace_id=trace_id_of(trace))

    def check(self) -> None:
        """The judge's preflight, once; its configuration error is every later row's."""
        self.preflight.check()

    def judgement(self, parsed: ParsedRow, needs: frozenset[str]) -> RowJudgement:
        """The row's judgement as far as ``needs`` goes: the pipeline's, or asked now (plain ``mlflow.genai.evaluate``)."""
        if self.pipeline is not None:
            return self.pipeline.judgement(parsed)
        self.check()
        row, options = parsed.row, {"max_source_tokens": self.max_source_tokens, "progress": False}
        with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
            if CLAIMS in needs:
                asked = JudgingOptions(coverage=False, grounding=self.grounding, max_source_tokens=self.max_source_tokens)
                return judge_rows([row], self.judge, asked, progress=False)[0]
            if KEY_POINTS in needs:
                return judge_row_pipelines([row], self.judge, coverage=True, claims=False, **options)[0]
            if INSTRUCTION in needs:
                return check_instructions(self.judge, [row], [parsed.instruction or ""], [RowJudgement(id=row.id, source_key=row.source_key)])[0]
            return judge_rows([row], None, JudgingOptions(coverage=False))[0]

    def record(self, call: Call) -> None:
        """Keep a call of an ``evaluate_summaries`` evaluation for ``settle`` (plain scorers keep nothing)."""
        if self.pipeline is None:
            return
        with self._lock:
            self._calls.append(call)

    def take(self) -> list[Call]:
        """The calls recorded, forgetting them."""
        with self._lock:
            calls, self._calls = self._calls, []
        return calls


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


def problems(calls: list[Call], rows: dict[str, ParsedRow], run_rows: set[str], id_key: str) -> list[str]:
    """Why these calls do not add up to the run's rows (nothing: they do). Each scorer is called once per row, so
    the rows handed are its calls, whether or not they came with a trace. Rows whose ids repeat are refused, as
    every other path refuses them, never renamed."""
    found = []
    ordered = sorted(rows.values(), key=lambda r: (canonical_id(r.row.id), r.row.summary, r.trace_id or ""))
    repeated = repeated_ids(ordered, id_key=id_key)
    if repeated:
        found.append(f"the rows' ids repeat ({'; '.join(repeated)})")
    config = next((c.config_error for c in calls if c.config_error), None)
    if config:
        found.append(f"the judge's configuration was refused: {config}")
    per_scorer = calls_per_scorer(calls)
    handed = max(per_scorer.values(), default=0)
    traceless = handed - len(rows)
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
                     "MLFLOW_GENAI_EVAL_MAX_WORKERS=4 (evaluate_summaries' default) keeps them")
    return found


def settle(scored: ScoredRows, run_id: str, *, expected: tuple[int, int] | None = None) -> Outcome:
    """The run's result from the calls ``scored`` recorded (``evaluate_summaries``), logged to ``run_id`` once; or,
    when they do not add up to the run's rows, no figures and the ``mgm.error`` tag. ``expected``: the rows of the
    data and of MLflow's ``result_df``, which must be the rows the scorers were handed."""
    calls = scored.take()
    rows = {c.trace_id: c.row for c in calls if c.row is not None and c.trace_id is not None}
    valued = {name: sum(c.valued for c in calls if c.scorer == name) for name in {c.scorer for c in calls}}
    found = problems(calls, rows, run_row_ids(run_id), scored.keys.id)
    handed = max(calls_per_scorer(calls).values(), default=0)
    if expected is not None and not handed == expected[0] == expected[1]:
        found.insert(0, f"data has {expected[0]} rows, the judges were handed {handed}, MLflow's result_df lists {expected[1]}")
    if found:
        return Outcome(run_id, None, fail(run_id, "; ".join(found)), valued)
    result = scored.pipeline.result(list(rows.values()))
    log_result(result, run_id=run_id, log_metrics=True, all_metrics=scored.all_metrics)
    return Outcome(run_id, result, None, valued)


def fail(run_id: str, why: str) -> str:
    """Say on the run why it has no figures (the ``mgm.error`` tag) and in a warning; returns the sentence."""
    message = f"no results logged for run {run_id}: {why}"
    MlflowClient().set_tag(run_id, ERROR_TAG, message[:5000])
    log.warning(message)
    return message
