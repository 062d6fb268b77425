"""One request's conversation with the judge, written once: the chat completions it needs, in order, and how their
replies become a ``JudgeReply``.

The conversation is a generator that yields each ``Call`` it needs and receives its ``CallResult`` (or has the
call's failure thrown in); the Judge's driver sends the calls. Each result first comes from a ``Tape``: the replies
the cache recorded for this request, replayed and validated again, then the replies the endpoint sends now. So a
rerun makes no call where the endpoint already answered, valid or not, and a transcript cut short by a transport
failure continues where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai

from .answers import MODES, AnswerParseError, answer_schema, parse_answer, response_format, with_schema_instruction
from .cache import Transcript, cache_key
from .errors import is_mode_rejection
from .records import JudgeError, JudgeReply, JudgeRequest, TextAnswer, Usage
from .replies import CallResult

if TYPE_CHECKING:
    from .client import Judge

__all__ = ["Call", "Conversation", "RequestState", "conversation"]

log = logging.getLogger(__name__)

REPAIR_PROMPT = (
    "Your previous reply could not be used: {problem}. Reply again with only the JSON object, matching the "
    "schema exactly, and nothing else."
)


@dataclass
class Call:
    """One chat completion the conversation needs sent."""

    messages: list[dict[str, str]]
    response_format: dict[str, Any] | None
    max_tokens: int | None
    probing: bool  # while probing, a mode rejection is not retried: it moves on to the next mode


@dataclass
class RequestState:
    usage: Usage = field(default_factory=Usage)


@dataclass
class Tape:
    """The HTTP-200 replies of one request: first those recorded in the cache, then those sent now."""

    recorded: list[CallResult] = field(default_factory=list)
    mode: str | None = None
    calls: list[CallResult] = field(default_factory=list)
    new: int = 0  # replies the endpoint sent now (not replayed)

    def transcript(self) -> Transcript:
        return Transcript(mode=self.mode, calls=self.calls)


Conversation = Generator[Call, CallResult, JudgeReply]


def _result(tape: Tape, call: Call) -> Generator[Call, CallResult, CallResult]:
    if len(tape.calls) < len(tape.recorded):
        result = tape.recorded[len(tape.calls)]
    else:
        result = yield call
        tape.new += 1
    tape.calls.append(result)
    return result


def reply_problem(result: CallResult) -> JudgeError | None:
    """A reply that ended badly whatever its content: cut off by max_tokens, refused or filtered."""
    if result.finish_reason == "length":
        return JudgeError(
            kind="truncated",
            message="the reply was cut off by max_tokens (finish_reason=length); raise max_tokens",
            raw=result.content,
        )
    if result.refusal or result.finish_reason == "content_filter":
        return JudgeError(kind="refused", message=result.refusal or "stopped by the content filter", raw=result.content)
    return None


def _reply(state: RequestState, result: CallResult, mode: str | None, **outcome: Any) -> JudgeReply:
    return JudgeReply(**outcome, raw=result.content, mode=mode, finish_reason=result.finish_reason,
                      model=result.model, usage=state.usage)


def _exchange(judge: Judge, request: JudgeRequest, tape: Tape, state: RequestState) -> Conversation:
    messages = [m.model_dump() for m in request.messages]
    max_tokens = request.max_tokens or judge.max_tokens
    if request.answer_type is TextAnswer:
        try:
            result = yield from _result(tape, Call(messages, None, max_tokens, probing=False))
        except openai.APIError as exc:
            return judge._failed(exc, state)
        if result.refusal or result.finish_reason == "content_filter":
            return _reply(state, result, None, error=reply_problem(result))
        # A text cut off by max_tokens is still the model's output: kept, and flagged by finish_reason.
        return _reply(state, result, None, answer=TextAnswer(text=(result.content or "").strip()))

    schema = answer_schema(request.answer_type)
    known = tape.mode if tape.recorded else judge.response_mode
    modes = (known,) if known else MODES
    for position, mode in enumerate(modes):
        probing = known is None and position < len(modes) - 1
        call = Call(with_schema_instruction(messages, mode, schema), response_format(mode, request.answer_type, schema),
                    max_tokens, probing)
        try:
            result = yield from _result(tape, call)
        except openai.APIStatusError as exc:
            if probing and is_mode_rejection(exc):
                log.info("%s rejected response mode %s (HTTP %s); trying the next", judge.shown_url, mode, exc.status_code)
                continue
            return judge._failed(exc, state)
        except openai.APIError as exc:
            return judge._failed(exc, state)
        if known is None and tape.new:
            judge._remember_mode(mode)
        tape.mode = mode
        break

    for repair in (False, True):
        problem = reply_problem(result)
        if problem is not None:
            return _reply(state, result, mode, error=problem)
        try:
            answer = parse_answer(result.content, request.answer_type)
        except AnswerParseError as exc:
            if repair:
                error = JudgeError(kind="invalid_answer", message=str(exc), attempts=2, raw=result.content)
                return _reply(state, result, mode, error=error)
            call.probing = False
            call.messages = call.messages + [
                {"role": "assistant", "content": result.content or ""},
                {"role": "user", "content": REPAIR_PROMPT.format(problem=exc)},
            ]
            try:
                result = yield from _result(tape, call)
            except openai.APIError as exc2:
                return judge._failed(exc2, state)
            continue
        return _reply(state, result, mode, answer=answer)
    raise AssertionError("unreachable")


def _replayed(exchange: Conversation) -> JudgeReply | None:
    """The reply of an exchange run on recorded replies alone; None when it needs a call the recording lacks."""
    try:
        next(exchange)
    except StopIteration as done:
        return done.value
    exchange.close()
    return None


def conversation(judge: Judge, request: JudgeRequest, state: RequestState) -> Conversation:
    """The whole request: the cache's transcript replayed (re-validated), the endpoint asked for what it lacks,
    and every new HTTP-200 reply stored."""
    cache = judge.cache
    if cache is None:
        return (yield from _exchange(judge, request, Tape(), state))
    key = cache_key(
        model=judge.model,
        base_url=judge.cache_endpoint,
        messages=[m.model_dump() for m in request.messages],
        answer_schema=answer_schema(request.answer_type),
        temperature=judge.temperature,
        seed=judge.seed,
        max_tokens=request.max_tokens or judge.max_tokens,
        prompt_version=request.prompt_version,
    )
    recorded = cache.get(key)
    tape = Tape()
    if recorded is not None:
        replayed = _replayed(_exchange(judge, request, Tape(recorded.calls, recorded.mode), state))
        if replayed is not None and not (replayed.error is not None and judge.reask_invalid):
            state.usage.cache_hits += 1
            replayed.cached = True
            return replayed
        if replayed is None:  # the recording stops short (a transport failure, a stricter schema): continue it
            tape = Tape(recorded.calls, recorded.mode)
    reply = yield from _exchange(judge, request, tape, state)
    if tape.new:
        cache.put(key, model=judge.model, prompt_version=request.prompt_version, transcript=tape.transcript(),
                  replace=recorded is not None)
    return reply
