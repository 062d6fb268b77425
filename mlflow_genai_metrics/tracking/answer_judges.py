"""The answer judges as MLflow scorers, and ``evaluate_answers``: a RAG application's answers judged claim by claim
against what it retrieved, one card per judge per row, the run's results logged once.

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.tracking import answer_scorers, evaluate_answers

    judge = Judge("gpt-4o-mini")
    mlflow.genai.evaluate(data, predict_fn=rag_app, scorers=answer_scorers(judge))   # reads the RETRIEVER spans
    evaluation = evaluate_answers(data, predict_fn=rag_app, judges=answer_scorers(judge))
    evaluation.metrics["strict_alignment"], evaluation.metrics["context_utilisation"], evaluation.run_id

- ``AnswerFaithfulness`` (``answer_faithfulness``): Yes when every claim of the answer is supported by a passage
  whose quote was found in it; the rationale lists each claim with its verdict, reason, passage and quote;
- ``AnswerRelevance`` (``answer_relevance``): 1, 0.5 or 0 (the answer addresses the question, partly, not);
- ``ContextSufficiency`` (``context_sufficiency``): the share of the expected answer's facts (``expectations
  ["expected_response"]``) a quoted passage supports; a row without an expected answer has no value.

The judges of one set (``answer_scorers``) share each row's judgement (asked once, by whichever comes first). In
plain ``mlflow.genai.evaluate`` MLflow aggregates their cards; ``log_results(run_id, judges)`` logs the full report
afterwards. ``evaluate_answers`` logs it at once: the figures of ``rag.judge_answers`` over the rows handed in its
evaluation, with the run's tables, report and signature, so ``compare_runs``, ``mgm compare`` and the registry gate
read a RAG run as they read a summary run (``answer_rows``).
"""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import mlflow
from mlflow.entities import AssessmentSource, Feedback
from mlflow.genai.scorers import Scorer
from pydantic import PrivateAttr

from ..judge import Judge, JudgeConfigError
from ..rag import AnswersResult
from ..rag.api import build_answers_result, refuse_what_answers_cannot_do
from ..rag.cards import faithfulness_card, relevance_card, sufficiency_card
from ..rag.records import AnswerJudgement
from ..stats import StatisticsOptions
from ..summarization.cards import Card
from ..summarization.ids import canonical_id
from ..summarization.options import resolve
from ..summarization.records import JudgePass
from .answer_rows import AnswerCall, AnswerKeys, AnswerOutcome, AnswerRows, unique_answer_ids
from .evaluate import (
    _ONE_EVALUATION,
    EVALUATION_WORKERS,
    RunRowsMismatch,
    SummaryEvaluation,
    _records,
    _workers,
    refuse_a_run_with_results,
    run_trace_rows,
    said_on_the_run,
)
from .feedback import card_feedback, error_feedback, judge_cost, judge_source
from .genai import root_span, trace_id_of
from .judge_sets import one_setting
from .judges import YES_NO, JudgeSpec, Registrable, _aggregated, judge_and_spec
from .run_logging import log_result


class _AnswerScorer(Registrable, Scorer):
    """What every answer judge shares: its judge, where the texts are, the rows it was handed, one card per row, and
    the registrable form (``register()``, ``start()``: ``Registrable``)."""

    judge: JudgeSpec
    question_key: str = "question"
    passages_key: str = "passages"
    id_key: str = "id"
    answer_key: str = "answer"
    max_source_tokens: int | None = None
    judge_pass: ClassVar[JudgePass] = "relevance"  # the calls whose tokens and cost the card carries
    _live: Judge | None = PrivateAttr(default=None)
    _rows: AnswerRows | None = PrivateAttr(default=None)
    _rows_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _dumped: tuple[str, dict[str, Any]] | None = PrivateAttr(default=None)

    def __init__(self, judge: Judge | JudgeSpec | dict | None = None, /, **data: Any):
        live, spec = judge_and_spec(data.pop("judge") if "judge" in data else judge)
        if live is not None:
            refuse_what_answers_cannot_do(live)
        super().__init__(judge=spec, **data)
        self._live = live

    def live_judge(self) -> Judge:
        """The ``Judge`` this judge asks (the one it was made with, else one built from its settings)."""
        if self._live is None:
            self._live = self.judge.build()
        return self._live

    def keys(self) -> AnswerKeys:
        return AnswerKeys(self.question_key, self.passages_key, self.id_key, self.answer_key)

    def answer_rows(self) -> AnswerRows:
        """The rows this judge was handed: its own, or its set's (``answer_scorers``, ``evaluate_answers``)."""
        with self._rows_lock:
            if self._rows is None:
                self._rows = AnswerRows(self.live_judge(), keys=self.keys(), max_source_tokens=self.max_source_tokens)
            return self._rows

    def bound_to(self, rows: AnswerRows, **update: Any) -> _AnswerScorer:
        """A copy of this judge in the set ``rows`` (``update``: fields to change, e.g. ``aggregations=[]``)."""
        copy = self.model_copy(update=update)
        copy._rows, copy._rows_lock = rows, threading.Lock()
        return copy

    def source(self) -> AssessmentSource:
        return judge_source(self.judge.model)

    def card(self, judgement: AnswerJudgement) -> Card:
        raise NotImplementedError

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None) -> Feedback:
        rows = self.answer_rows()
        try:
            parsed = rows.parse(inputs, outputs, expectations, trace)
        except ValueError as error:
            rows.record(AnswerCall(self.name, trace_id_of(trace), None, valued=False))
            return error_feedback(self.name, str(error), self.source(), code="BAD_ROW")
        try:
            judgement = rows.judgement(parsed)
        except JudgeConfigError as error:
            rows.preflight.failed(error)  # every later row of the evaluation fails at once, with no call
            rows.record(AnswerCall(self.name, parsed.trace_id, parsed, valued=False, config_error=str(error)))
            return error_feedback(self.name, str(error), self.source(), code="JUDGE_CONFIG_ERROR")
        feedback = self.feedback(judgement)
        rows.record(AnswerCall(self.name, parsed.trace_id, parsed, valued=_aggregated(feedback.value)))
        return feedback

    def feedback(self, judgement: AnswerJudgement) -> Feedback:
        """This judge's one card for a judged row, with the tokens and cost of its own judge calls."""
        cost = judge_cost(judgement, self.judge_pass, priced=self.judge.prices is not None)
        return card_feedback(self.name, self.card(judgement), self.source(), cost)


class AnswerFaithfulness(_AnswerScorer):
    """Is the answer faithful to what was retrieved? "yes" when it makes claims and a passage supports every one, the
    quote the judge gives found in that passage; a contradicted claim, an unverifiable one or a quote that is not
    there makes it "no". The rationale lists every claim with its verdict, reason, passage and quote."""

    name: str = "answer_faithfulness"
    judge_kind: ClassVar[str] = "answer_faithfulness"
    feedback_value_type: ClassVar[Any] = YES_NO  # as the summary judges declare theirs (make_scorer_ensemble reads it)
    description: str | None = (
        "Splits the answer into claims and checks each against the retrieved passages, citing the passage and a quote "
        "(checked to be in it): yes when every claim is supported."
    )
    judge_pass: ClassVar[JudgePass] = "claims"

    def card(self, judgement: AnswerJudgement) -> Card:
        return faithfulness_card(judgement)



class AnswerRelevance(_AnswerScorer):
    """Does the answer address the question? 1 (yes), 0.5 (partly) or 0 (no), with the judge's reason."""

    name: str = "answer_relevance"
    judge_kind: ClassVar[str] = "answer_relevance"
    feedback_value_type: ClassVar[Any] = float
    description: str | None = "Whether the answer addresses the question: 1 yes, 0.5 partly, 0 no (judged, with a reason)."

    def card(self, judgement: AnswerJudgement) -> Card:
        return relevance_card(judgement)


class ContextSufficiency(_AnswerScorer):
    """Could a faithful answer have been given? The share of the expected answer's facts the passages support."""

    name: str = "context_sufficiency"
    judge_kind: ClassVar[str] = "context_sufficiency"
    feedback_value_type: ClassVar[Any] = float
    description: str | None = "The share of the expected answer's facts that the retrieved passages support (needs expectations)."
    judge_pass: ClassVar[JudgePass] = "facts"

    def card(self, judgement: AnswerJudgement) -> Card:
        return sufficiency_card(judgement)



def answer_scorers(judge: Judge, *, sufficiency: bool = True, relevance: bool = True, question_key: str = "question",
                   passages_key: str = "passages", id_key: str = "id", answer_key: str = "answer",
                   max_source_tokens: int | None = None) -> list[_AnswerScorer]:
    """The answer judges as one set: each row judged once for all of them, the run's results logged once.
    ``AnswerFaithfulness`` always; ``AnswerRelevance`` and ``ContextSufficiency`` unless turned off. The set serves
    one evaluation at a time (make one set per evaluation run at once)."""
    options = dict(question_key=question_key, passages_key=passages_key, id_key=id_key, answer_key=answer_key, max_source_tokens=max_source_tokens)
    judges: list[_AnswerScorer] = [AnswerFaithfulness(judge, **options)]
    if relevance:
        judges.append(AnswerRelevance(judge, **options))
    if sufficiency:
        judges.append(ContextSufficiency(judge, **options))
    rows = AnswerRows(judge, keys=judges[0].keys(), max_source_tokens=max_source_tokens)
    return [j.bound_to(rows) for j in judges]


def answer_rows_of(judges: Sequence[_AnswerScorer], *, statistics: StatisticsOptions = StatisticsOptions(),
                   all_metrics: bool = False) -> AnswerRows:
    """One set of rows for ``judges`` (they must share one judge's settings and where the texts are), made for the
    call that uses it: each row judged once for all of them."""
    one_setting(judges, "one judge's settings", lambda j: j.judge)
    keys = one_setting(judges, "where the texts are (question_key, passages_key, id_key, answer_key)", _AnswerScorer.keys)
    return AnswerRows(judges[0].live_judge(), keys=keys, max_source_tokens=one_setting(judges, "max_source_tokens", lambda j: j.max_source_tokens),
                      statistics=statistics, all_metrics=all_metrics, recording=True)


@dataclass(frozen=True)
class AnswerEvaluation(SummaryEvaluation):
    """An evaluation run of answers: its id, its result (``rag.AnswersResult``: tables, every aggregate with its
    interval, the signature) and MLflow's own ``EvaluationResult`` (``result_df``: one card per judge per row)."""

    result: AnswersResult  # type: ignore[assignment]


def _record_row(record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A row of ``data`` as MLflow hands it to a scorer: a trace's root span gives the inputs and outputs it lacks."""
    trace = record.get("trace")
    inputs, outputs = record.get("inputs"), record.get("outputs")
    if trace is not None and hasattr(trace, "data"):
        root = root_span(trace)
        if root is not None:
            inputs = root.inputs if inputs is None else inputs
            outputs = root.outputs if outputs is None else outputs
    return inputs, outputs, record.get("expectations"), trace


def evaluate_answers(
    data: Any, judges: Sequence[Any] | None = None, *, predict_fn: Any = None, model_id: str | None = None, all_metrics: bool = False,
    statistics: StatisticsOptions | None = None, **keywords: Any,
) -> AnswerEvaluation:
    """Judge the answers of ``data`` against their passages and log one MLflow evaluation run (the active run, else a
    new one).

    ``data``: what ``mlflow.genai.evaluate`` takes: rows ``{"inputs": {"question": ..., "passages": [...], "id": ...},
    "outputs": answer, "expectations": {"expected_response": ...}}``, the traces of an instrumented application
    (``mlflow.search_traces()``; the passages are its RETRIEVER spans' documents), or, with ``predict_fn`` (the
    application), rows of inputs alone. ``judges``: answer judges sharing one judge's settings (default:
    ``answer_scorers(Judge())``); other MLflow scorers are passed on as they are.

    Rows that can be read before the evaluation (given answers) are checked first: one that cannot be read, or ids
    that repeat, raise ``ValueError`` naming the row before any judge call or run; then the judge is checked, those
    rows judged in one batch, and ``mlflow.genai.evaluate`` runs with judges that read their judgements (rows the
    application answers are judged as they come). The run's figures are those of the rows handed in this evaluation,
    which must be the rows of ``data``, of MLflow's ``result_df`` and of the run's traces; else ``RunRowsMismatch``.
    """
    statistics = resolve("evaluate_answers", keywords, statistics=statistics, judging=False).statistics
    judges = list(judges) if judges is not None else answer_scorers(Judge())
    ours = [j for j in judges if isinstance(j, _AnswerScorer)]
    if not ours:
        raise ValueError("evaluate_answers needs at least one of AnswerFaithfulness, AnswerRelevance or ContextSufficiency in judges")
    rows = answer_rows_of(ours, statistics=statistics, all_metrics=all_metrics)
    keys = rows.keys
    records = _records(data)
    if not records:
        raise ValueError("data has no rows: nothing to evaluate")
    ready = []
    if predict_fn is None:
        for position, record in enumerate(records):
            try:
                ready.append(rows.parse(*_record_row(record)))
            except ValueError as error:
                raise ValueError(f"row {position} of data: {error}") from None
        unique_answer_ids(ready, id_key=keys.id)
        rows.judge_all(ready)
    else:
        rows.preflight.check()
    scorers = [j.bound_to(rows, aggregations=[]) if isinstance(j, _AnswerScorer) else j for j in judges]
    with _ONE_EVALUATION, _workers(EVALUATION_WORKERS):
        evaluation = mlflow.genai.evaluate(data=data, predict_fn=predict_fn, scorers=scorers, model_id=model_id)
    listed = len(evaluation.result_df) if evaluation.result_df is not None else 0
    outcome: AnswerOutcome = rows.settle(evaluation.run_id, expected=(len(records), listed))
    if outcome.result is None:
        raise RunRowsMismatch(outcome.error or "", evaluation.run_id)
    return AnswerEvaluation(run_id=evaluation.run_id, result=outcome.result, mlflow_result=evaluation)


def log_answer_results(run_id: str, judges: Sequence[_AnswerScorer], data: Any = None) -> AnswersResult:
    """``log_results`` for answer judges: the run's traces judged again by ``judges``' judge, the full report logged."""
    refuse_a_run_with_results(run_id)
    rows = answer_rows_of(judges)
    parsed = run_trace_rows(run_id, rows, "a question, passages and an answer", data)
    said_on_the_run(run_id, unique_answer_ids, parsed, id_key=rows.keys.id)
    rows.judge_all(parsed)
    ordered = sorted(parsed, key=lambda p: (canonical_id(p.row.id), p.row.answer))
    result = build_answers_result([rows.judgement(p) for p in ordered], judge=rows.judge, max_source_tokens=rows.max_source_tokens,
                                  statistics=rows.statistics)
    log_result(result, run_id=run_id, log_metrics=True)
    return result


ANSWER_KINDS = types.MappingProxyType({cls.judge_kind: cls for cls in (AnswerFaithfulness, AnswerRelevance, ContextSufficiency)})


def rebuilt_answer_judge(settings: dict[str, Any]) -> _AnswerScorer:
    """The answer judge ``settings()`` describe, made anew for each call of the registrable form (nothing kept for
    the process); no preflight: a wrong model is the call's ``JUDGE_CONFIG_ERROR``, from its first request."""
    fields = dict(settings)
    judge = ANSWER_KINDS[fields.pop("kind")](**fields)
    judge.answer_rows().preflight.skip()
    return judge


def answer_judge(inputs=None, outputs=None, expectations=None, trace=None, settings=None):
    """The registrable form of an answer judge: MLflow stores this body and the signature (whose ``settings``
    default names the judge), and runs them where the scorer is loaded."""
    from mlflow_genai_metrics.tracking.answer_judges import rebuilt_answer_judge

    return rebuilt_answer_judge(settings)(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace)


_AnswerScorer.registered_body = staticmethod(answer_judge)
