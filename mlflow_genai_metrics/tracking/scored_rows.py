"""The rows one evaluation hands its scorers, and the one run result they make.

MLflow calls a scorer once per row, from worker threads where nothing says reliably which run the row is for:
``mlflow.active_run()`` is None there, MLflow's evaluation context is one object for the whole process, and a
trace's ``mlflow.sourceRun`` names the run started last in the process, or is missing when the store was too busy
to write it. So run results never read them. Each set of scorers (``ScoredRows``: the three ``summarization_scorers``
makes, or one scorer made on its own) keeps every call it got since MLflow last aggregated, with the trace the row
came on, and MLflow's aggregation hook, called after the last row in the thread that holds the evaluation's run
(``mlflow.active_run()``), makes the run's result from them (``settle``) and logs it once.

The scorers of one row meet on the trace MLflow hands each of them (``SharedRow``, kept on that object, so it lives
as long as the evaluation's rows): separately made judges share the row's judge calls (its claim passes asked once,
by whichever judge needs them first; the key-point passes by ``KeyPointCoverage`` alone), and the first hook finds,
through the rows, every set of scorers of its evaluation and logs one result for all of them.

A result is logged only when the rows add up: each scorer was called once per row, every row came with a trace,
the scorer's count of values is MLflow's, the rows are exactly the run's evaluated traces, and no two share an id
(a row without one is known by its source's hash). Otherwise the run gets no figures but an ``mgm.error`` tag with
both counts (or the repeated ids), and a warning: never a smaller n, never a renamed row.

One set of scorer objects serves one evaluation at a time: evaluations run at once need their own scorers.
"""

from __future__ import annotations

import logging
import math
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import mlflow
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient

from ..judge import Judge, Preflight, Usage
from ..summarization.api import build_result
from ..summarization.ids import canonical_id
from ..summarization.judging import judge_rows
from ..summarization.options import JudgingOptions, source_token_budget
from ..summarization.pipeline import judge_row_pipelines
from ..summarization.records import RowJudgement
from ..summarization.result import SummarizationResult
from .genai import InputKeys, ParsedRow, parse_row, repeated_ids, result_inputs, trace_id_of
from .run_logging import log_result

log = logging.getLogger(__name__)

ERROR_TAG = "mgm.error"  # why a run has no figures: the rows it was handed and the rows it has, both counted
CLAIMS, KEY_POINTS, GROUNDING = "claims", "key_points", "grounding"  # the parts of a row's judgement
_ON_TRACE = "_mgm_shared_row"  # the attribute of MLflow's trace object that holds its SharedRow


@dataclass(frozen=True)
class Call:
    """One scorer call: which scorer, the trace it came with (None: MLflow handed none), the row shared on it,
    whether the feedback had a value (MLflow aggregates only those), and a configuration error, if any."""

    scorer: str
    trace_id: str | None
    row: SharedRow | None
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
    """A set of scorers: what they need judged of each row, with which judge, and every call since the last
    aggregation. Made with the scorer objects and kept by them only (never by the process)."""

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
        self._outcome: Outcome | None = None
        self._lock = threading.Lock()
        self.preflight = Preflight(judge, needed=pipeline is None)  # evaluate_summaries checked the judge already

    def agrees_with(self, other: ScoredRows) -> bool:
        """Two sets can share a row's judgement: where the texts are, and (when both ask a judge) its settings."""
        same_keys = self.keys == other.keys and self.grounding == other.grounding
        if self.judge is None or other.judge is None:
            return same_keys
        return same_keys and self.max_source_tokens == other.max_source_tokens and self.judge.settings == other.judge.settings

    def parse(self, inputs: Any, outputs: Any, expectations: Any, trace: Any) -> ParsedRow:
        return parse_row(inputs, outputs, expectations, keys=self.keys, trace_id=trace_id_of(trace))

    def check(self) -> None:
        """The judge's preflight, once per evaluation; its configuration error is every later row's."""
        self.preflight.check()

    def record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)
            self._outcome = None  # a new evaluation's rows: the last outcome is not theirs

    def take(self) -> list[Call]:
        """The calls since the last aggregation, forgetting them (and the preflight: the next evaluation checks again)."""
        with self._lock:
            calls, self._calls = self._calls, []
        self.preflight.reset()
        return calls

    def pending(self) -> bool:
        """Whether calls came since the last aggregation (an evaluation MLflow did not aggregate, e.g. no value)."""
        with self._lock:
            return bool(self._calls)

    def outcome_for(self, run_id: str) -> Outcome | None:
        """The outcome an earlier hook of this evaluation settled for ``run_id`` (None when this one must)."""
        with self._lock:
            found = self._outcome
        return found if found is not None and found.run_id == run_id else None

    def settled(self, outcome: Outcome) -> None:
        with self._lock:
            self._outcome = outcome


class SharedRow:
    """One row of one evaluation as its scorers share it: its parsed texts, the sets of scorers that scored it, and
    each part of its judgement, asked once by whichever set needs it first."""

    def __init__(self, trace_id: str, parsed: ParsedRow):
        self.trace_id = trace_id
        self.parsed = parsed
        self.sets: list[ScoredRows] = []
        self._parts: dict[str, Future[RowJudgement]] = {}
        self._lock = threading.Lock()

    @classmethod
    def on(cls, trace: Any, parsed: ParsedRow, scored: ScoredRows) -> SharedRow | None:
        """The row MLflow's ``trace`` object carries (made by the first scorer of the row to arrive), joined by
        ``scored``; None when MLflow handed no trace."""
        trace_id = trace_id_of(trace)
        if trace_id is None or not hasattr(trace, "__dict__"):
            return None
        row = vars(trace).setdefault(_ON_TRACE, cls(trace_id, parsed))  # dict.setdefault: one row, whoever comes first
        row._join(scored, parsed)
        return row

    def _join(self, scored: ScoredRows, parsed: ParsedRow) -> None:
        with self._lock:
            if any(s is scored for s in self.sets):
                return
            other = next((s for s in self.sets if not s.agrees_with(scored)), None)
            if other is not None or parsed.row != self.parsed.row:
                raise ValueError(
                    "the scorers of one evaluation must read the row alike and share one judge's settings (and "
                    "max_source_tokens, source_key, id_key, category_key); make them with the same Judge"
                )
            self.sets.append(scored)

    def judgement(self, scored: ScoredRows) -> RowJudgement:
        """The row's judgement as far as ``scored`` needs it (the parts others asked are read, not asked again)."""
        needs = scored.needs
        mine: list[tuple[str, Future[RowJudgement]]] = []
        with self._lock:
            if {CLAIMS, KEY_POINTS} <= needs and not ({CLAIMS, KEY_POINTS} & self._parts.keys()):
                full: Future[RowJudgement] = Future()  # both parts in one pass, as judge_summaries asks them
                self._parts[CLAIMS] = self._parts[KEY_POINTS] = full
                mine.append(("full", full))
            for part in sorted(needs - self._parts.keys()):
                self._parts[part] = Future()
                mine.append((part, self._parts[part]))
            wanted = {part: self._parts[part] for part in needs}
        for kind, future in mine:
            try:
                future.set_result(self._ask(kind, scored))
            except BaseException as error:
                future.set_exception(error)
                raise
        return merged({part: future.result() for part, future in wanted.items()})

    def _ask(self, kind: str, scored: ScoredRows) -> RowJudgement:
        row, judge = self.parsed.row, scored.judge
        options = {"max_source_tokens": scored.max_source_tokens, "progress": False}
        with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
            if kind == GROUNDING:
                return judge_rows([row], None, JudgingOptions(coverage=False))[0]
            if kind == KEY_POINTS:
                claims = self._parts[CLAIMS].result()  # a row whose claims failed is not checked further
                if claims.error is not None:
                    return claims
                return judge_row_pipelines([row], judge, coverage=True, claims=False, **options)[0]
            asked = JudgingOptions(coverage=kind == "full", grounding=scored.grounding, max_source_tokens=scored.max_source_tokens)
            return judge_rows([row], judge, asked, progress=False)[0]

    def whole(self) -> RowJudgement:
        """Every part asked of the row, merged (once every scorer call of the evaluation has returned)."""
        with self._lock:
            parts = dict(self._parts)
        return merged({part: future.result() for part, future in parts.items()})


def merged(parts: dict[str, RowJudgement]) -> RowJudgement:
    """One record from a row's parts: claims, key points and the grounding check; the first error is the row's.
    The usage is both parts', each under its pass (the claims part's claim passes, the key points part's)."""
    claims, key_points, grounding = parts.get(CLAIMS), parts.get(KEY_POINTS), parts.get(GROUNDING)
    base = claims if claims is not None else grounding
    if key_points is not None and key_points is not claims and base.error is None:
        spent = {"usage": Usage.total([base.usage, key_points.usage]), "usage_by_pass": {**base.usage_by_pass, **key_points.usage_by_pass}}
        if key_points.error is not None:
            base = RowJudgement(id=base.id, source_key=base.source_key, error=key_points.error, grounding=base.grounding, **spent)
        else:
            base = base.model_copy(update={"key_points": key_points.key_points, **spent})
    if base.grounding is None and grounding is not None:
        base = base.model_copy(update={"grounding": grounding.grounding})
    return base


def run_row_ids(run_id: str) -> set[str]:
    """The traces MLflow lists as the evaluated rows of ``run_id`` (what its Traces tab shows of the evaluation)."""
    run = MlflowClient().get_run(run_id)
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, include_spans=False, return_type="list")
    return {t.info.trace_id for t in traces if TraceTagKey.EVAL_REQUEST_ID in t.info.tags}


def calls_per_scorer(calls: list[Call]) -> dict[str, int]:
    """How many times each scorer was called: the rows it was handed, traced or not."""
    return {name: sum(c.scorer == name for c in calls) for name in sorted({c.scorer for c in calls})}


def problems(calls: list[Call], rows: dict[str, SharedRow], run_rows: set[str]) -> list[str]:
    """Why these calls do not add up to the run's rows (nothing: they do). Each scorer is called once per row, so
    the rows handed are its calls, whether or not they came with a trace. Rows whose ids repeat are refused, as
    every other path refuses them, never renamed."""
    found = []
    ordered = sorted(rows.values(), key=lambda r: (canonical_id(r.parsed.row.id), r.parsed.row.summary, r.trace_id))
    repeated = repeated_ids([r.parsed for r in ordered], id_key=next((s.keys.id for r in ordered for s in r.sets), "id"))
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
        found.append(f"the scorers were handed {handed} rows{missing}, the run lists {len(run_rows)} evaluated traces "
                     f"({len(set(rows) - run_rows)} of the rows handed are not among them, {len(run_rows - set(rows))} "
                     "were not scored)")
    if len(set(per_scorer.values())) > 1:
        found.append("the scorers were not called alike: " + ", ".join(f"{name} {count} times" for name, count in per_scorer.items()))
    if traceless or set(rows) - run_rows:
        found.append("MLflow could not write every row's trace to its store; on a SQLite store, "
                     "MLFLOW_GENAI_EVAL_MAX_WORKERS=4 (or evaluate_summaries) keeps them")
    return found


def settle(first: ScoredRows, run_id: str, aggregated: tuple[str, int] | None = None, *, expected: tuple[int, int] | None = None) -> Outcome:
    """The run's result from the calls of ``first`` and of every set of scorers that shared a row with it, logged to
    ``run_id`` once; or, when they do not add up to the run's rows, no figures and the ``mgm.error`` tag.
    ``aggregated``: a scorer's name and how many of its values MLflow aggregated, which must be its values;
    ``expected``: the rows of the data and of MLflow's ``result_df`` (``evaluate_summaries``), which must be the
    rows the scorers were handed."""
    sets, calls = [first], first.take()
    index = 0
    while index < len(calls):  # every set that shared a row with one found so far
        row = calls[index].row
        for other in row.sets if row is not None else []:
            if not any(s is other for s in sets):
                sets.append(other)
                calls.extend(other.take())
        index += 1
    rows = {c.row.trace_id: c.row for c in calls if c.row is not None}
    valued = {name: sum(c.valued for c in calls if c.scorer == name) for name in {c.scorer for c in calls}}
    found = problems(calls, rows, run_row_ids(run_id))
    if aggregated is not None and valued.get(aggregated[0], 0) != aggregated[1]:
        found.append(f"{aggregated[0]} gave {valued.get(aggregated[0], 0)} values, MLflow aggregated {aggregated[1]}")
    handed = max(calls_per_scorer(calls).values(), default=0)
    if expected is not None and not handed == expected[0] == expected[1]:
        found.insert(0, f"data has {expected[0]} rows, the judges were handed {handed}, MLflow's result_df lists {expected[1]}")
    if found:
        outcome = Outcome(run_id, None, fail(run_id, "; ".join(found)), valued)
    else:
        parsed = [row.parsed for row in rows.values()]
        result = first.pipeline.result(parsed) if first.pipeline is not None else _result(sets, list(rows.values()))
        outcome = Outcome(run_id, result, None, valued)
        log_result(result, run_id=run_id, log_metrics=True, all_metrics=first.all_metrics)
    for scored in sets:
        scored.settled(outcome)
    return outcome


def fail(run_id: str, why: str) -> str:
    """Say on the run why it has no figures (the ``mgm.error`` tag) and in a warning; returns the sentence."""
    message = f"no results logged for run {run_id}: {why}"
    MlflowClient().set_tag(run_id, ERROR_TAG, message[:5000])
    log.warning(message)
    return message


def _result(sets: list[ScoredRows], rows: list[SharedRow]) -> SummarizationResult:
    judged = next((s for s in sets if s.judge is not None), None)
    rows = sorted(rows, key=lambda r: (canonical_id(r.parsed.row.id), r.parsed.row.summary))  # result_inputs' order
    inputs, references, extra = result_inputs([r.parsed for r in rows])
    judgements = [row.whole().model_copy(update={"id": given.id}) for row, given in zip(rows, inputs)]
    options = JudgingOptions(
        coverage=any(KEY_POINTS in s.needs for s in sets), grounding=sets[0].grounding,
        max_source_tokens=judged.max_source_tokens if judged else None,
    )
    return build_result(inputs, judgements, judge=judged.judge if judged else None, options=options, references=references, extra_columns=extra)


def aggregate(scored: ScoredRows, name: str, values: list[float]) -> Outcome | None:
    """MLflow's aggregation hook for scorer ``name`` of ``scored``: the run's outcome, settled by the first hook of
    the evaluation; None (and a warning) when no run is active or this scorer's values are not MLflow's."""
    run = mlflow.active_run()
    if run is None:
        log.warning("%s: no active MLflow run when MLflow aggregated: no run results logged", name)
        return None
    outcome = scored.outcome_for(run.info.run_id) or settle(scored, run.info.run_id, (name, len(values)))
    if outcome.error is None and outcome.valued.get(name, 0) != len(values):  # a later hook of the evaluation
        fail(run.info.run_id, f"{name} gave {outcome.valued.get(name, 0)} values, MLflow aggregated {len(values)}")
        return None
    return outcome if outcome.error is None else None


def hook_number(outcome: Outcome | None, read: Any) -> float:
    return float(read(outcome.result)) if outcome is not None and outcome.result is not None else math.nan
