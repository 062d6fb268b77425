"""The records of an answer from passages: the row given, and its judgement.

An ``AnswerJudgement`` is a summary's ``RowJudgement`` (the answer's claims with their verdicts, usage, error), so
every claim metric, warning and table reads it as it reads a summary's, plus what only answers have: how many
passages were retrieved, whether the answer addresses the question, and the expected answer's facts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ..summarization.records import RowJudgement

Verdict = Literal["yes", "no", "idk"]


class AnswerInput(BaseModel):
    """One row to judge, validated: id, question, the retrieved passages in their order, the answer, and the expected
    answer (None when not given). ``source_key`` is a hash of the passages: rows pair across runs only when it matches."""

    id: str | int
    question: str
    passages: list[str]
    answer: str
    expected: str | None = None
    source_key: str

    @property
    def texts(self) -> tuple[str, ...]:
        """The row's texts a judge's example must not come from (``passes.run_examples``)."""
        return *self.passages, self.answer


class Cited(BaseModel):
    """A statement checked against passages: verdict, reason, the deciding passage (1-based) and quote, and whether
    the quote is in that passage (``judge_verdict``: what the judge said, when a missing quote made it idk)."""

    verdict: Verdict
    reason: str
    passage: int | None = None
    quote: str | None = None
    quote_found: bool | None = None
    judge_verdict: Verdict | None = None


class FactCheck(BaseModel):
    """One fact of the expected answer: is it in the passages (context sufficiency), is it in the answer."""

    fact: str
    in_passages: Cited
    in_answer: Cited


class AnswerRelevance(BaseModel):
    relevance: Literal["yes", "partly", "no"]
    reason: str


class AnswerJudgement(RowJudgement):
    """The answer's claims against its passages (``claims``, each with ``passage``, ``quote``, ``quote_found``),
    ``passage_count``, ``relevance`` and, with an expected answer, ``facts`` (None without one). With ``error`` set
    the row was not judged: nothing of it counts in any metric but ``judge_error_rate``."""

    passage_count: int = 0
    relevance: AnswerRelevance | None = None
    facts: list[FactCheck] | None = None
