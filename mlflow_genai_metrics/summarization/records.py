"""The one judgement record per row that every metric reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..grounding.scoring import RowGrounding
from ..judge import JudgeError, Usage
from .order import OrderCheck

# What a judge call of a row was for: its claims (extraction, verification) or its source's key points (their
# extraction, the coverage check); of an answer (``rag``) also its relevance to the question and the expected
# answer's facts (their extraction, their check against the passages and the answer).
JudgePass = Literal["claims", "key_points", "relevance", "facts", "instruction"]


class RowInput(BaseModel):
    """One row to judge, validated: the id, the source text and the summary."""

    id: str | int
    source: str
    summary: str
    source_key: str  # hash of the source text: rows with the same text share key points

    @property
    def texts(self) -> tuple[str, ...]:
        """The row's texts a judge's example must not come from (``passes.run_examples``)."""
        return self.source, self.summary


class CheckedClaim(BaseModel):
    """One claim of a summary with its verdict; ``duplicates`` counts the repeats of it removed (same text but for
    case and spacing), so a fact stated twice is verified and counted once."""

    claim: str
    verdict: Literal["yes", "no", "idk"]
    reason: str
    duplicates: int = 0
    # The model-free second opinion (None when the grounding check is off): how much of the claim the source
    # supports, and whether the verdict disagrees sharply with it (``grounding.suspect``).
    lexical_support: float | None = None
    suspect: bool | None = None
    # Against numbered passages (``rag``; None for a summary): the passage that decides the verdict (1-based; None
    # for idk), the judge's quote from it, and whether the quote is in that passage (a yes or no whose quote is not
    # becomes idk, and ``judge_verdict`` keeps what the judge said).
    passage: int | None = None
    quote: str | None = None
    quote_found: bool | None = None
    judge_verdict: Literal["yes", "no", "idk"] | None = None
    # With the judge's ``stability`` above 1: the share of repetitions that gave the (majority) verdict; below 1 the
    # claim is unstable (``summarization.stability``). None when each verification was asked once.
    agreement: float | None = None

    @property
    def unstable(self) -> bool | None:
        return None if self.agreement is None else self.agreement < 1.0


class CoveredKeyPoint(BaseModel):
    key_point: str
    covered: bool
    reason: str


class RowError(BaseModel):
    """Why a row has no value: the pass that failed and the judge's typed error (kind, message, HTTP status, and a
    short excerpt of what the endpoint sent). ``str()`` reads ``"claim extraction failed: no_claims: ..."``."""

    model_config = ConfigDict(frozen=True)

    stage: str
    error: JudgeError

    @property
    def kind(self) -> str:
        return self.error.kind

    def __str__(self) -> str:
        return f"{self.stage} failed: {self.error}"


class TaskVerdict(BaseModel):
    """A yes/no a task asks of a row besides the claim engine's passes (a rewrite's ``instruction``: did it follow
    its instruction), with the judge's one-sentence reason."""

    model_config = ConfigDict(frozen=True)

    value: Literal["yes", "no"]
    reason: str


class RowJudgement(BaseModel):
    """Claims with verdicts, key points with coverage, what judging the row cost, and any error.

    ``key_points`` is None when coverage was not asked for. When ``error`` is set the row was not judged: its
    claims and key points are empty and no metric counts it (``judge_error_rate`` does). ``judged`` is False when
    no judge was asked at all (the grounding check alone). ``grounding`` is the model-free check of the row (None
    when it is off); it needs no judge, so a row the judge failed on still has it. ``usage_by_pass`` is ``usage``
    split by what the calls were for (``JudgePass``; a pass not asked is left out): the parts add up to ``usage``,
    so each judge's card can show what its own judgement cost.
    """

    id: str | int
    source_key: str
    claims: list[CheckedClaim] = Field(default_factory=list)
    # The order check (``summarization.order``): None when the row was not in its sample.
    order_check: OrderCheck | None = None
    key_points: list[CoveredKeyPoint] | None = None
    usage: Usage = Field(default_factory=Usage)
    usage_by_pass: dict[JudgePass, Usage] = Field(default_factory=dict)
    error: RowError | None = None
    judged: bool = True
    grounding: RowGrounding | None = None
    # A task's own yes/no passes, by name (a rewrite's ``instruction``); empty for summaries and answers.
    verdicts: dict[str, TaskVerdict] = Field(default_factory=dict)
