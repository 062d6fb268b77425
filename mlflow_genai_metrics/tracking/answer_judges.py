"""The answer judges as MLflow scorers (the answers task's cards): ``AnswerFaithfulness``, ``AnswerRelevance`` and
``ContextSufficiency``; ``answer_scorers`` makes them as one set.

    judges = answer_scorers(Judge("gpt-4o-mini"))
    mlflow.genai.evaluate(data, predict_fn=app, scorers=judges)   # the cards; log_results(run_id, judges) after
    evaluate_answers(data, judges)                                 # the cards and the run's full report at once

They are ``judges._TaskScorer``s reading rows as ``answers.AnswerPipeline`` does: the question from ``inputs``, the
answer from ``outputs``, the passages from ``inputs["passages"]`` or the trace's RETRIEVER spans. In plain
``mlflow.genai.evaluate`` each judge asks its own pass of a row and nothing else (``AnswerFaithfulness`` the claims,
``AnswerRelevance`` the relevance, ``ContextSufficiency`` the facts), so a row costs the calls it would in one batch
and nothing is kept on the judges between calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..judge import Judge
from ..rag.cards import faithfulness_card, relevance_card, sufficiency_card
from ..rag.pipeline import PARTS
from ..rag.records import AnswerJudgement
from ..stats import StatisticsOptions
from ..summarization.cards import Card
from ..summarization.method import method_of
from ..summarization.records import JudgePass
from .answers import AnswerKeys, AnswerPipeline
from .evaluate import Evaluation, task_door
from .judges import YES_NO, _Judged, one_setting
from .spec import one_judge


class _AnswerScorer(_Judged):
    """What every answer judge shares: where the texts are, and the pipeline a plain row is judged in (one for the
    row, asking this judge's pass alone)."""

    question_key: str = "question"
    passages_key: str = "passages"
    id_key: str = "id"
    answer_key: str = "answer"
    judge_pass: ClassVar[JudgePass] = "relevance"  # the one pass of a row this judge asks in plain evaluate
    inputs_suffice: ClassVar[bool] = False  # the passages may be the application's trace's

    def keys(self) -> AnswerKeys:
        return AnswerKeys(self.question_key, self.passages_key, self.id_key, self.answer_key)

    def plain_pipeline(self) -> AnswerPipeline:
        return AnswerPipeline(self.live_judge(), keys=self.keys(), max_source_tokens=self.max_source_tokens, preflight=self.own_preflight(),
                              method=self.method(), parts=frozenset({self.judge_pass}))

    @classmethod
    def set_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions, ter: bool = False,
                     parts: frozenset[str] = PARTS) -> AnswerPipeline:
        """One pipeline for ``judges`` (they must share one judge's settings and where the texts are), asking a row's
        ``parts`` (``rag.pipeline.PARTS``: all)."""
        if ter:
            raise ValueError("ter: answers have no reference summaries to score TER against")
        one_setting(judges, "one judge's settings", lambda j: j.judge)
        keys = one_setting(judges, "where the texts are (question_key, passages_key, id_key, answer_key)", _AnswerScorer.keys)
        return AnswerPipeline(one_judge(judges), keys=keys, statistics=statistics, parts=parts,
                              max_source_tokens=one_setting(judges, "max_source_tokens", lambda j: j.max_source_tokens),
                              method=one_setting(judges, "one method (stability, order_check, examples)", lambda j: j.method()))

    @classmethod
    def report_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions) -> AnswerPipeline:
        """The passes ``judges`` ask (the relevance only for an ``AnswerRelevance``, the expected answer's facts only
        for a ``ContextSufficiency``), and the claims always: an answers result has no figure without them."""
        return cls.set_pipeline(judges, statistics=statistics, parts=frozenset({"claims", *(j.judge_pass for j in judges)}))


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
                   max_source_tokens: int | None = None, **method: Any) -> list[_AnswerScorer]:
    """The answer judges as one set (one judge, one place for the texts, one method). ``AnswerFaithfulness`` always;
    ``AnswerRelevance`` and ``ContextSufficiency`` unless turned off; ``method``: ``stability``, ``order_check``,
    ``examples``, as for summaries."""
    options = dict(question_key=question_key, passages_key=passages_key, id_key=id_key, answer_key=answer_key,
                   max_source_tokens=max_source_tokens, **dict(method_of("answer_scorers", method)))
    judges: list[_AnswerScorer] = [AnswerFaithfulness(judge, **options)]
    if relevance:
        judges.append(AnswerRelevance(judge, **options))
    if sufficiency:
        judges.append(ContextSufficiency(judge, **options))
    return judges


def evaluate_answers(data: Any, judges: Sequence[Any] | None = None, **keywords: Any) -> Evaluation:
    """``evaluate`` for answers: ``data``'s rows are ``{"inputs": {"question": ..., "passages": [...], "id": ...},
    "outputs": answer, "expectations": {"expected_response": ...}}``, the traces of an instrumented application
    (``mlflow.search_traces()``; the passages are its RETRIEVER spans' documents), or, with ``predict_fn`` (the
    application), rows of inputs alone. ``judges`` default ``answer_scorers(Judge())``."""
    return task_door("evaluate_answers", data, judges, lambda: answer_scorers(Judge()), keywords)
