"""Typed records at the judge's boundary: what is asked, what comes back, what it cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from .replies import CallResult

AnswerT = TypeVar("AnswerT", bound=BaseModel)

OPENAI_BATCH_DISCOUNT = 0.5  # OpenAI's Batch API halves input and output prices

ErrorKind = Literal[
    "rate_limited",  # 429 after every retry
    "server_error",  # 5xx after every retry
    "timeout",  # no reply within timeout_s, after every retry
    "connection",  # connection refused or dropped, after every retry
    "bad_request",  # 400/413/422 for this request (too long for the context window, ...)
    "invalid_answer",  # reply was not valid JSON for the schema, even after one repair
    "truncated",  # reply cut off by max_tokens (finish_reason == "length")
    "refused",  # the model refused or a content filter stopped it
    "bad_reply",  # HTTP 200 whose body is not a chat completion (HTML, empty, null, wrong shape), after every retry
    "no_claims",  # the judge returned no claim for a summary that has words, even when asked again
    "budget",  # not sent: the Judge's max_calls or max_cost_usd would have been passed
    "batch_expired",  # batch mode: the batch's completion window ran out before this request, in every resubmission
    "application",  # not the judge's: the application evaluated (``predict_fn``) raised on the row, so nothing was asked
    "batch_failed",  # batch mode: the batch holding this request failed validation or was cancelled
]


class Message(BaseModel):
    """One chat message sent to the judge."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


def request_seed(seed: int | None, repetition: int) -> int | None:
    """The seed a request is sent with: the judge's own for the request itself, the judge's (0 when it has none)
    plus ``repetition`` for a repetition. A repetition is thus the very request a judge seeded that way sends, and
    shares its cache entry, as two identical requests should."""
    return seed if repetition == 0 else (seed or 0) + repetition


class JudgeRequest(BaseModel, Generic[AnswerT]):
    """One question for the judge: the messages and the pydantic type the answer must validate as.

    ``prompt_version`` (e.g. ``"claims:v1-3f2a"``) is part of the cache key, so changing a prompt never
    returns an answer produced by the old one. ``purpose`` only labels usage and logs. ``repetition`` (0: the
    request itself) asks the same question again as a distinct request: it is sent with its own seed
    (``request_seed``), so it is cached apart and, at a temperature above 0, sampled afresh (verdict stability).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    messages: tuple[Message, ...]
    answer_type: type[AnswerT]
    prompt_version: str = ""
    purpose: str = "judge"
    max_tokens: int | None = Field(default=None, gt=0)
    repetition: int = Field(default=0, ge=0)

    def repeated(self, repetition: int) -> JudgeRequest[AnswerT]:
        """This request asked for the ``repetition``-th time (0: itself)."""
        return self if repetition == self.repetition else self.model_copy(update={"repetition": repetition})

    @model_validator(mode="before")
    @classmethod
    def _coerce_messages(cls, data: object) -> object:
        # Accept plain {"role", "content"} dicts, as every OpenAI user writes them.
        if isinstance(data, dict) and "messages" in data:
            data = dict(data)
            data["messages"] = tuple(
                Message(**m) if isinstance(m, Mapping) else m for m in data["messages"]
            )
        return data


class Prices(BaseModel):
    """Prices in USD per million tokens, for turning token counts into cost: ``Prices(input=0.15, output=0.60)``, and
    with ``cached_input`` (``Prices(input=0.15, output=0.60, cached_input=0.075)``) the price of the prompt tokens the
    endpoint served from its prompt cache (``Usage.cached_prompt_tokens``); without it they cost ``input``.
    ``batch_discount`` is the share of every price the Batch API takes off (None: OpenAI's, a half); calls answered
    through a batch are priced with ``batch()``."""

    model_config = ConfigDict(frozen=True)

    input_per_million: float = Field(ge=0, validation_alias=AliasChoices("input_per_million", "input"))
    output_per_million: float = Field(ge=0, validation_alias=AliasChoices("output_per_million", "output"))
    cached_input_per_million: float | None = Field(
        default=None, ge=0, validation_alias=AliasChoices("cached_input_per_million", "cached_input")
    )
    batch_discount: float | None = Field(default=None, ge=0, le=1)

    def batch(self) -> Prices:
        """The prices of calls answered through a batch: every price less ``batch_discount`` (default a half, as
        OpenAI's Batch API charges)."""
        keep = 1.0 - (OPENAI_BATCH_DISCOUNT if self.batch_discount is None else self.batch_discount)
        cached = self.cached_input_per_million
        return Prices(input=self.input_per_million * keep, output=self.output_per_million * keep,
                      cached_input=None if cached is None else cached * keep, batch_discount=0.0)

    @classmethod
    def coerce(
        cls, value: Prices | Mapping[str, float] | tuple[float, float] | tuple[float, float, float] | str | None
    ) -> Prices | None:
        """Accept ``Prices``, ``{"input": .., "output": ..[, "cached_input": ..]}``, ``(input, output[, cached_input])``
        or the command line's ``"input,output[,cached_input]"``."""
        if value is None or isinstance(value, Prices):
            return value
        if isinstance(value, str):
            parts = value.split(",")
            if len(parts) not in (2, 3):
                raise ValueError(f"prices {value!r}: write INPUT,OUTPUT[,CACHED_INPUT] in USD per million tokens, e.g. 0.15,0.60")
            try:
                value = tuple(float(part) for part in parts)
            except ValueError:
                raise ValueError(f"prices {value!r}: each price must be a number (USD per million tokens)") from None
        if isinstance(value, Mapping):
            return cls.model_validate(dict(value))
        return cls.model_validate(dict(zip(("input", "output", "cached_input"), value, strict=False)))

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
        """USD for these tokens; ``cached_prompt_tokens`` (part of ``prompt_tokens``) at the cached-input price."""
        cached = min(cached_prompt_tokens, prompt_tokens) if self.cached_input_per_million is not None else 0
        return (
            (prompt_tokens - cached) * self.input_per_million
            + cached * (self.cached_input_per_million or 0.0)
            + completion_tokens * self.output_per_million
        ) / 1e6


USAGE_SUMS = (  # the counts and totals of a Usage that add up
    "requests", "calls", "failed_calls", "retries", "cache_hits", "prompt_tokens", "completion_tokens",
    "cached_prompt_tokens", "batched_calls", "implausible_usage", "latency_s",
)


class Usage(BaseModel):
    """What judging cost.

    ``requests`` counts questions asked of the judge (answered from the cache or not); ``calls`` counts every
    HTTP chat completion sent, failed ones, retries and repair calls included.
    """

    requests: int = 0
    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the endpoint reported serving from its prompt cache
    batched_calls: int = 0  # of calls, those answered through a batch (batch mode), priced at the batch prices
    # Of calls, those whose reply reported more tokens than the request could produce (more completion tokens than
    # its max_tokens, more prompt tokens than its bytes): counted and priced at their worst case, not as reported.
    implausible_usage: int = 0
    latency_s: float = 0.0
    call_latencies_s: list[float] = Field(default_factory=list)
    cost_usd: float | None = None
    reported_models: dict[str, int] = Field(default_factory=dict)  # model id a reply named -> replies naming it
    response_modes: dict[str, int] = Field(default_factory=dict)  # response mode a reply came in -> replies

    def count_call(self, elapsed_s: float, reply: CallResult | None) -> None:
        """One HTTP call, which took ``elapsed_s``: the tokens ``reply`` reported, or a failed call (``None``)."""
        # Straight into the instance dict, as ``add``: this runs on every call.
        mine = self.__dict__
        mine["calls"] += 1
        mine["latency_s"] += elapsed_s
        self.call_latencies_s.append(elapsed_s)
        if reply is None:
            mine["failed_calls"] += 1
            return
        mine["prompt_tokens"] += reply.prompt_tokens
        mine["completion_tokens"] += reply.completion_tokens
        mine["cached_prompt_tokens"] += reply.cached_prompt_tokens

    def add(self, other: Usage) -> Usage:
        """Add ``other`` into this record, in place (a running total grows without copying its history)."""
        # Straight into the instance dicts: pydantic's __setattr__ costs more than the sums, on every request.
        mine, theirs = self.__dict__, other.__dict__
        for name in USAGE_SUMS:
            mine[name] += theirs[name]
        self.call_latencies_s.extend(other.call_latencies_s)
        for model, count in other.reported_models.items():
            self.reported_models[model] = self.reported_models.get(model, 0) + count
        for mode, count in other.response_modes.items():
            self.response_modes[mode] = self.response_modes.get(mode, 0) + count
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
        return self

    def __add__(self, other: Usage) -> Usage:
        return self.model_copy(deep=True).add(other)

    @classmethod
    def total(cls, usages: list[Usage]) -> Usage:
        total = cls()
        for usage in usages:
            total.add(usage)
        return total

    @property
    def cache_hit_rate(self) -> float | None:
        """Share of answers served from the cache; None when nothing was asked."""
        return self.cache_hits / self.requests if self.requests else None


class TextAnswer(BaseModel):
    """Ask for free text instead of JSON (e.g. a candidate model writing a summary): no response format, no
    schema; the reply's text is the answer, and ``JudgeReply.finish_reason`` says if it was cut off."""

    text: str


class JudgeError(BaseModel):
    """Why a request has no answer. Returned in place of an answer, never raised, never scored as 0."""

    model_config = ConfigDict(frozen=True)

    kind: ErrorKind
    message: str
    status_code: int | None = None
    attempts: int = 1
    raw: str | None = None

    def __str__(self) -> str:
        status = f" (HTTP {self.status_code})" if self.status_code else ""
        return f"{self.kind}{status}: {self.message}"


class JudgeReply(BaseModel, Generic[AnswerT]):
    """The outcome of one request: exactly one of ``answer`` and ``error`` is set."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    answer: AnswerT | None = None
    error: JudgeError | None = None
    raw: str | None = None
    cached: bool = False
    mode: str | None = None
    finish_reason: str | None = None
    model: str | None = None  # the model id the endpoint reported in its reply
    model_mismatch: bool = False  # that id names another model than the one asked for (not a dated snapshot of it)
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="after")
    def _one_of_answer_or_error(self) -> JudgeReply:
        if (self.answer is None) == (self.error is None):
            raise ValueError("a JudgeReply carries exactly one of answer and error")
        return self

    @property
    def ok(self) -> bool:
        return self.error is None
