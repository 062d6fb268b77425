"""One request's conversation with the judge, written once: the chat completions it needs, in order, and how their
replies become a ``JudgeReply``.

The conversation is a generator that yields each ``Call`` it needs and receives its ``CallResult`` (or has the
call's ``CallFailed`` thrown in); ``play`` runs it, sending the calls through whatever it is given (the Judge's
``Transport``). Each result first comes from a ``Tape``: the replies the cache recorded for this request, replayed
and validated again, then the replies the endpoint sends now. So a rerun makes no call where the endpoint already
answered, valid or not, and a transcript cut short by a transport failure continues where it stopped.

The response mode: a structured answer is asked in the mode its endpoint is known to accept (``EndpointMode``), or,
while none is known, in each mode in turn until one is accepted, which is then remembered for the endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from .answers import MODES, AnswerParseError, answer_schema, answer_schema_json, parse_answer, response_format, with_schema_instruction
from .cache import JudgeCache, Transcript, cache_key
from .modes import EndpointMode
from .records import JudgeError, JudgeReply, JudgeRequest, TextAnswer, Usage, request_seed
from .replies import CallResult, without_secrets
from .settings import JudgeSettings
from .transport import Call, CallFailed

log = logging.getLogger(__name__)

REPAIR_PROMPT = (
    "Your previous reply could not be used: {problem}. Reply again with only the JSON object, matching the "
    "schema exactly, and nothing else."
)


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


def _result(tape: Tape, call: Call, settings: JudgeSettings) -> Generator[Call, CallResult, CallResult]:
    """The next reply, recorded or asked now, its text without the API key or the URL's credentials: what is
    parsed, cached and stored (a cache written before keys were redacted from replies is cleaned on replay too)."""
    if len(tape.calls) < len(tape.recorded):
        result = tape.recorded[len(tape.calls)]
    else:
        result = yield call
        tape.new += 1
    result = without_secrets(result, settings.redact_reply)
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


def _reply(usage: Usage, result: CallResult, mode: str | None, **outcome: Any) -> JudgeReply:
    return JudgeReply(**outcome, raw=result.content, mode=mode, finish_reason=result.finish_reason,
                      model=result.model, usage=usage)


def needs_response_mode(request: JudgeRequest) -> bool:
    """Does the request ask for a structured answer (sent in a response mode), not for free text?"""
    return request.answer_type is not TextAnswer


def _exchange(
    request: JudgeRequest, settings: JudgeSettings, endpoint: EndpointMode, tape: Tape, usage: Usage
) -> Conversation:
    messages = [m.model_dump() for m in request.messages]
    max_tokens = request.max_tokens or settings.max_tokens
    seed = request_seed(settings.seed, request.repetition)
    if not needs_response_mode(request):
        try:
            result = yield from _result(tape, Call(messages, None, max_tokens, probing=False, seed=seed), settings)
        except CallFailed as failed:
            return JudgeReply(error=failed.error, usage=usage)
        if result.refusal or result.finish_reason == "content_filter":
            return _reply(usage, result, None, error=reply_problem(result))
        # A text cut off by max_tokens is still the model's output: kept, and flagged by finish_reason.
        return _reply(usage, result, None, answer=TextAnswer(text=(result.content or "").strip()))

    schema = answer_schema(request.answer_type)
    known = tape.mode if tape.recorded else endpoint.mode
    modes = (known,) if known else MODES
    for position, mode in enumerate(modes):
        probing = known is None and position < len(modes) - 1
        call = Call(with_schema_instruction(messages, mode, schema), response_format(mode, request.answer_type, schema),
                    max_tokens, probing, seed)
        try:
            result = yield from _result(tape, call, settings)
        except CallFailed as failed:
            if probing and failed.rejects_mode:
                log.info("%s rejected response mode %s (HTTP %s); trying the next", settings.shown_url, mode,
                         failed.error.status_code)
                continue
            return JudgeReply(error=failed.error, usage=usage)
        if known is None and tape.new:
            endpoint.remember(mode)
        tape.mode = mode
        break

    for repair in (False, True):
        problem = reply_problem(result)
        if problem is not None:
            return _reply(usage, result, mode, error=problem)
        try:
            answer = parse_answer(result.content, request.answer_type)
        except AnswerParseError as exc:
            if repair:
                error = JudgeError(kind="invalid_answer", message=str(exc), attempts=2, raw=result.content)
                return _reply(usage, result, mode, error=error)
            call.probing = False
            call.messages = call.messages + [
                {"role": "assistant", "content": result.content or ""},
                {"role": "user", "content": REPAIR_PROMPT.format(problem=exc)},
            ]
            try:
                result = yield from _result(tape, call, settings)
            except CallFailed as failed:
                return JudgeReply(error=failed.error, usage=usage)
            continue
        return _reply(usage, result, mode, answer=answer)
    raise AssertionError("unreachable")


def _replayed(exchange: Conversation) -> JudgeReply | None:
    """The reply of an exchange run on recorded replies alone; None when it needs a call the recording lacks."""
    try:
        next(exchange)
    except StopIteration as done:
        return done.value
    exchange.close()
    return None


def conversation(
    request: JudgeRequest, *, settings: JudgeSettings, cache: JudgeCache | None, endpoint: EndpointMode, usage: Usage
) -> Conversation:
    """The whole request: the cache's transcript replayed (re-validated), the endpoint asked for what it lacks,
    and every new HTTP-200 reply stored. ``usage`` (the request's) counts the cache hit; the sender counts calls."""
    if cache is None:
        return (yield from _exchange(request, settings, endpoint, Tape(), usage))
    key = cache_key(
        model=settings.model,
        base_url=settings.cache_endpoint,
        messages=[m.model_dump() for m in request.messages],
        answer_schema=answer_schema_json(request.answer_type),
        temperature=settings.temperature,
        seed=request_seed(settings.seed, request.repetition),
        max_tokens=request.max_tokens or settings.max_tokens,
        prompt_version=request.prompt_version,
    )
    recorded = cache.get(key)
    tape = Tape()
    if recorded is not None:
        replayed = _replayed(_exchange(request, settings, endpoint, Tape(recorded.calls, recorded.mode), usage))
        if replayed is not None and not (replayed.error is not None and settings.reask_invalid):
            usage.cache_hits += 1
            replayed.cached = True
            return replayed
        if replayed is None:  # the recording stops short (a transport failure, a stricter schema): continue it
            tape = Tape(recorded.calls, recorded.mode)
    try:
        return (yield from _exchange(request, settings, endpoint, tape, usage))
    finally:  # also when the request stops midway (a configuration error, Ctrl-C): the replies paid for so far are kept
        if tape.new:
            cache.put(key, model=settings.model, prompt_version=request.prompt_version, transcript=tape.transcript(),
                      replace=recorded is not None)


async def play(conversation: Conversation, send: Callable[[Call], Awaitable[CallResult]]) -> JudgeReply:
    """Run ``conversation`` to its reply, sending each call it needs with ``send``; a ``CallFailed`` goes back
    into the conversation, which makes it the reply's error. Anything else ``send`` raises propagates."""
    outcome: CallResult | None = None
    failure: CallFailed | None = None
    try:
        while True:
            try:
                step = conversation.throw(failure) if failure is not None else conversation.send(outcome)  # type: ignore[arg-type]
            except StopIteration as stop:
                return stop.value
            try:
                outcome, failure = await send(step), None
            except CallFailed as exc:
                outcome, failure = None, exc
    finally:
        conversation.close()
