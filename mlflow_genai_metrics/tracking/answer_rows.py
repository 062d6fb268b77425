"""Answers from retrieved passages in MLflow's terms: where a row's question, passages and answer are (its
``inputs``/``outputs``, or the trace itself: the documents of its RETRIEVER spans), and ``AnswerRows``, the rows one
set of answer judges is handed in one evaluation, judged once each and settled into one run result.

A RAG application instrumented with MLflow tracing is judged as it runs: ``mlflow.genai.evaluate(data,
predict_fn=app, scorers=answer_scorers(judge))`` hands each scorer the question (``inputs``), the answer (``outputs``)
and the trace, whose RETRIEVER spans hold what was retrieved (MLflow's ``Document``s: ``page_content``), in the
order they ran. Passages given in ``inputs["passages"]`` are used as they are instead.

As for summaries (``scored_rows``): in plain ``mlflow.genai.evaluate`` the judges give their cards and MLflow
aggregates them (the full report is ``log_results`` afterwards); the judges of one set share a row's judgement (it
is asked once, by whichever comes first: they run in parallel), the latest ``SHARED_ROWS`` rows kept by the set.
For ``evaluate_answers`` the run's figures are those of the rows the judges were handed, and only when they add
up: every judge called once per row, every row on a trace, the rows exactly the run's evaluated traces, no id
twice. Otherwise the run gets no figures but an ``mgm.error`` tag with both counts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import mlflow
from mlflow.entities import SpanType

from ..judge import Judge, Preflight
from ..rag import AnswerInput, AnswersResult, prepare_answer_rows
from ..rag.api import build_answers_result, judge_answer_rows, refuse_what_answers_cannot_do
from ..rag.records import AnswerJudgement
from ..stats import StatisticsOptions
from ..summarization.ids import canonical_id
from ..summarization.options import JudgingOptions
from .genai import trace_id_of
from .run_logging import log_result
from .scored_rows import fail, run_row_ids

log = logging.getLogger(__name__)

# Where an expected answer sits in MLflow's ``expectations``: MLflow's own key first, then ours.
EXPECTED_KEYS = ("expected_response", "expected_answer")
_DOCUMENT_TEXT = ("page_content", "content", "text")  # a retrieved document's text, as MLflow and LangChain name it


@dataclass(frozen=True)
class AnswerKeys:
    """Where a row's texts are: the question in ``inputs[question]`` (or ``inputs`` itself, a string), the passages
    in ``inputs[passages]`` (else the trace's RETRIEVER spans), the id in ``inputs[id]``, the answer in ``outputs``
    (a string, or ``outputs[answer]``)."""

    question: str = "question"
    passages: str = "passages"
    id: str = "id"
    answer: str = "answer"


@dataclass(frozen=True)
class ParsedAnswer:
    """One row as the answer judges see it: the validated texts, the trace it is on, whether its id was given (else
    its question's hash) and where its passages came from ("inputs" or "trace")."""

    row: AnswerInput
    trace_id: str | None = None
    id_given: bool = True
    passages_from: str = "inputs"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def document_text(document: Any) -> Any:
    """A retrieved document's text: a string as it is; MLflow's ``Document`` (or its dict) by ``page_content``."""
    if isinstance(document, str):
        return document
    for name in _DOCUMENT_TEXT:
        value = document.get(name) if isinstance(document, dict) else getattr(document, name, None)
        if isinstance(value, str):
            return value
    return document  # refused, named, by prepare_answer_rows


def retrieved_passages(trace: Any) -> list[Any] | None:
    """The documents the trace's RETRIEVER spans returned, in the order the spans started (a retriever inside another
    is its parent's business, not counted again); None when the trace has no RETRIEVER span."""
    spans = [s for s in getattr(getattr(trace, "data", None), "spans", None) or [] if s.span_type == SpanType.RETRIEVER]
    if not spans:
        return None
    by_id = {s.span_id: s for s in getattr(trace.data, "spans", [])}

    def nested(span: Any) -> bool:
        parent = by_id.get(span.parent_id)
        while parent is not None:
            if parent.span_type == SpanType.RETRIEVER:
                return True
            parent = by_id.get(parent.parent_id)
        return False

    passages: list[Any] = []
    for span in sorted((s for s in spans if not nested(s)), key=lambda s: s.start_time_ns):
        outputs = span.outputs
        if isinstance(outputs, str):  # a span read back from a store may hold its outputs as JSON text
            try:
                outputs = json.loads(outputs)
            except ValueError:
                pass
        passages.extend(document_text(d) for d in (outputs if isinstance(outputs, list) else [] if outputs is None else [outputs]))
    return passages


def parse_answer(inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None, *, keys: AnswerKeys = AnswerKeys()) -> ParsedAnswer:
    """The row in MLflow's terms (``AnswerKeys``); the expected answer from ``expectations["expected_response"]``
    (or ``["expected_answer"]``). Raises ``ValueError`` naming what is wrong (and the trace)."""
    trace_id = trace_id_of(trace)
    where = f" (trace {trace_id})" if trace_id else ""
    if isinstance(inputs, str):
        question, row_id, given = inputs, None, None
    elif isinstance(inputs, dict) and isinstance(inputs.get(keys.question), str):
        question, row_id, given = inputs[keys.question], inputs.get(keys.id), inputs.get(keys.passages)
    else:
        found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"the question must be `inputs` (a string) or `inputs[{keys.question!r}]`; got {found}{where}")
    answer = outputs.get(keys.answer) if isinstance(outputs, dict) else outputs
    if not _missing(answer) and not isinstance(answer, str):
        raise ValueError(f"`outputs` must be the answer text (or {{{keys.answer!r}: text}}); got {type(outputs).__name__}{where}")
    passages_from = "inputs"
    if _missing(given):
        given, passages_from = retrieved_passages(trace), "trace"
        if given is None:
            raise ValueError(f"no passages for this row{where}: give them as inputs[{keys.passages!r}] (a list of texts), or "
                             "judge the trace of an application whose retriever is traced (a span of type RETRIEVER)")
    elif not isinstance(given, str):
        given = [document_text(d) for d in given]
    expected = None
    if isinstance(expectations, dict):
        expected = next((expectations[k] for k in EXPECTED_KEYS if isinstance(expectations.get(k), str)), None)
    id_given = not _missing(row_id)
    fallback = "q-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]
    try:
        row = prepare_answer_rows([question], [given], [None if _missing(answer) else answer],
                                  [row_id if id_given else fallback], [expected])[0]
    except ValueError as error:
        raise ValueError(f"{error}{where}") from None
    return ParsedAnswer(row=row, trace_id=trace_id, id_given=id_given, passages_from=passages_from)


def repeated_answer_ids(rows: Sequence[ParsedAnswer], *, id_key: str = "id") -> list[str]:
    """Each row whose id another row has already (nothing: every id is unique); a row without an id is known by its
    question's hash, so two rows asking one question need ids."""
    problems, seen = [], {}
    for position, parsed in enumerate(rows):
        label = f"the row of trace {parsed.trace_id}" if parsed.trace_id else f"row {position}"
        stored = canonical_id(parsed.row.id)
        if stored in seen:
            first = seen[stored]
            how = f"id {parsed.row.id!r}" if parsed.id_given else f"no id: its question is that of {first} (give each row inputs[{id_key!r}])"
            problems.append(f"{label} ({how}): the id repeats {first}'s; ids must be unique")
        else:
            seen[stored] = label
    return problems


def unique_answer_ids(rows: Sequence[ParsedAnswer], *, id_key: str = "id") -> None:
    problems = repeated_answer_ids(rows, id_key=id_key)
    if problems:
        raise ValueError("cannot judge these answers:\n  " + "\n  ".join(problems[:20]))


@dataclass(frozen=True)
class AnswerCall:
    """One scorer call: which scorer, the trace it came with (None: MLflow handed none), the row (None: it could not
    be read), whether the feedback had a value MLflow aggregates, and a configuration error, if any."""

    scorer: str
    trace_id: str | None
    row: ParsedAnswer | None
    valued: bool
    config_error: str | None = None


@dataclass(frozen=True)
class AnswerOutcome:
    run_id: str
    result: AnswersResult | None
    error: str | None
    valued: dict[str, int]


def _texts(row: AnswerInput) -> tuple[str, str, str | None]:
    return row.source_key, hashlib.sha256(row.answer.encode("utf-8")).hexdigest(), row.expected


SHARED_ROWS = 256  # rows a set of plain answer judges keeps, so its judges (run in parallel) ask each row once


class AnswerRows:
    """The rows a set of answer judges is handed: each judged once (whichever judge asks first; the others wait for
    it), every call recorded until the run is settled. Made with the judge objects, kept by them only."""

    def __init__(self, judge: Judge, *, keys: AnswerKeys = AnswerKeys(), max_source_tokens: int | None = None,
                 statistics: StatisticsOptions = StatisticsOptions(), all_metrics: bool = False, preflight: bool = True,
                 recording: bool = False):
        refuse_what_answers_cannot_do(judge)  # before any call: a run must not sign a check it did not make
        self.judge, self.keys, self.statistics, self.all_metrics = judge, keys, statistics, all_metrics
        self.recording = recording  # evaluate_answers: every call kept for settle; plain scorers keep none
        self.max_source_tokens = JudgingOptions(max_source_tokens=max_source_tokens).for_judge(judge).max_source_tokens
        self.preflight = Preflight(judge, needed=preflight)
        self._judged: dict[tuple[str, str, str | None], Future[AnswerJudgement]] = {}
        self._calls: list[AnswerCall] = []
        self._outcome: AnswerOutcome | None = None
        self._lock = threading.Lock()

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedAnswer:
        return parse_answer(inputs, outputs, expectations, trace, keys=self.keys)

    def judge_all(self, rows: Sequence[ParsedAnswer]) -> None:
        """Judge the rows not judged yet in one batch (the judge's concurrency), before MLflow hands them out."""
        self.preflight.check()
        mine: dict[tuple[str, str, str | None], tuple[AnswerInput, Future[AnswerJudgement]]] = {}
        with self._lock:
            for parsed in rows:
                key = _texts(parsed.row)
                if key not in self._judged:
                    self._judged[key] = Future()
                    mine[key] = (parsed.row, self._judged[key])
        self._fill(list(mine.values()))

    def judgement(self, parsed: ParsedAnswer) -> AnswerJudgement:
        """The row's judgement under its own id, from any thread (asked once for one set of texts)."""
        self.preflight.check()
        key = _texts(parsed.row)
        with self._lock:
            future = self._judged.get(key)
            asking = future is None
            if asking:
                future = self._judged[key] = Future()
        if asking:
            self._fill([(parsed.row, future)])
            if not self.recording:
                with self._lock:  # plain scorers: the set shares its latest rows, nothing more
                    while len(self._judged) > SHARED_ROWS:
                        del self._judged[next(iter(self._judged))]
        return future.result().model_copy(update={"id": parsed.row.id})

    def _fill(self, pending: list[tuple[AnswerInput, Future[AnswerJudgement]]]) -> None:
        if not pending:
            return
        try:
            with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
                judged = judge_answer_rows([row for row, _ in pending], self.judge, max_source_tokens=self.max_source_tokens, progress=False)
        except BaseException as error:
            for _, future in pending:
                future.set_exception(error)
            raise
        for (_, future), judgement in zip(pending, judged):
            future.set_result(judgement)

    # -- the run's result ------------------------------------------------------------------------------------------

    def record(self, call: AnswerCall) -> None:
        if not self.recording:
            return
        with self._lock:
            self._calls.append(call)
            self._outcome = None

    def pending(self) -> bool:
        with self._lock:
            return bool(self._calls)

    def settle(self, run_id: str, *, aggregated: tuple[str, int] | None = None, expected: tuple[int, int] | None = None) -> AnswerOutcome:
        """The run's result from the calls since the last settling, logged to ``run_id`` once; or, when they do not
        add up to the run's rows, no figures and the ``mgm.error`` tag (``aggregated``: a scorer's name and how many
        of its values MLflow aggregated; ``expected``: the rows of the data and of MLflow's ``result_df``)."""
        with self._lock:
            if self._outcome is not None and self._outcome.run_id == run_id:
                return self._outcome
            calls, self._calls = self._calls, []
        self.preflight.reset()
        found = self._problems(calls, run_id)
        valued = {name: sum(c.valued for c in calls if c.scorer == name) for name in {c.scorer for c in calls}}
        if aggregated is not None and valued.get(aggregated[0], 0) != aggregated[1]:
            found.append(f"{aggregated[0]} gave {valued.get(aggregated[0], 0)} values, MLflow aggregated {aggregated[1]}")
        handed = max(_per_scorer(calls).values(), default=0)
        if expected is not None and not handed == expected[0] == expected[1]:
            found.insert(0, f"data has {expected[0]} rows, the judges were handed {handed}, MLflow's result_df lists {expected[1]}")
        if found:
            outcome = AnswerOutcome(run_id, None, fail(run_id, "; ".join(found)), valued)
        else:
            rows = sorted(_rows(calls).values(), key=lambda p: (canonical_id(p.row.id), p.row.answer))
            judgements = [self.judgement(parsed) for parsed in rows]
            result = build_answers_result(judgements, judge=self.judge, max_source_tokens=self.max_source_tokens, statistics=self.statistics)
            log_result(result, run_id=run_id, log_metrics=True, all_metrics=self.all_metrics)
            outcome = AnswerOutcome(run_id, result, None, valued)
        with self._lock:
            self._outcome = outcome
        return outcome

    def _problems(self, calls: list[AnswerCall], run_id: str) -> list[str]:
        found = []
        rows = _rows(calls)
        unreadable = sum(c.row is None and c.config_error is None for c in calls)
        if unreadable:
            found.append(f"{unreadable} scorer calls had a row that could not be read (each card says why)")
        repeated = repeated_answer_ids(sorted(rows.values(), key=lambda p: (canonical_id(p.row.id), p.trace_id or "")), id_key=self.keys.id)
        if repeated:
            found.append(f"the rows' ids repeat ({'; '.join(repeated)})")
        config = next((c.config_error for c in calls if c.config_error), None)
        if config:
            found.append(f"the judge's configuration was refused: {config}")
        per_scorer = _per_scorer(calls)
        handed = max(per_scorer.values(), default=0)
        traced = {c.trace_id for c in calls if c.trace_id is not None}
        run_rows = run_row_ids(run_id)
        traceless = handed - len(traced)
        if traceless or traced != run_rows:
            missing = f" ({traceless} without a trace)" if traceless else ""
            found.append(f"the scorers were handed {handed} rows{missing}, the run lists {len(run_rows)} evaluated traces "
                         f"({len(traced - run_rows)} of the rows handed are not among them, {len(run_rows - traced)} were not scored)")
        if len(set(per_scorer.values())) > 1:
            found.append("the scorers were not called alike: " + ", ".join(f"{name} {count} times" for name, count in per_scorer.items()))
        return found


def _rows(calls: list[AnswerCall]) -> dict[str, ParsedAnswer]:
    return {c.trace_id: c.row for c in calls if c.row is not None and c.trace_id is not None}


def _per_scorer(calls: list[AnswerCall]) -> dict[str, int]:
    return {name: sum(c.scorer == name for c in calls) for name in sorted({c.scorer for c in calls})}
