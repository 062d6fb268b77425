"""Sending one chat completion: the model check before the first, then, per call, retries (tenacity) around HTTP
attempts that each hold a slot of the Judge's one ``Limiter``, wait for the ``Pace`` and end by the total deadline
``timeout_s``; every attempt counted in the request's ``Usage``; failures sorted into this request's error
(``CallFailed``) or every request's (``JudgeConfigError``, raised).

A ``Transport`` knows calls, not requests or batches: ``send`` may be awaited by any number of coroutines on any
number of event loops at once, and the limiter alone decides how many HTTP calls are in flight. So rows can move
through their passes each at its own pace without the transport changing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import weakref
from dataclasses import dataclass
from typing import Any

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from .budget import Budget, BudgetExhausted, Reservation, credible_usage, settled_cost, worst_cost
from .errors import (
    config_error,
    is_config_error,
    is_mode_rejection,
    is_retryable,
    is_unreachable,
    retry_after_seconds,
    row_error_kind,
    unreachable_error,
)
from .http import close_soon, http_client
from .httpx_lib import Response as _HTTP_RESPONSE
from .limits import Limiter, Pace, within_deadline
from .models import check_served_model
from .records import JudgeError, Usage
from .replies import BadReply, CallResult, read_completion
from .runner import run_sync, started_loop
from .settings import JudgeSettings

logger = logging.getLogger(__name__)


@dataclass
class Call:
    """One chat completion to send."""

    messages: list[dict[str, str]]
    response_format: dict[str, Any] | None
    max_tokens: int | None
    probing: bool  # while probing, a mode rejection is not retried: it moves on to the next mode
    seed: int | None = None  # sent when set (``records.request_seed``: the judge's, or a repetition's)


class CallFailed(Exception):
    """A call that failed for its request alone, after its retries: the request's typed error.

    ``rejects_mode``: the endpoint said it does not accept this ``response_format`` (``is_mode_rejection``).
    """

    def __init__(self, error: JudgeError, *, rejects_mode: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.rejects_mode = rejects_mode


class Transport:
    """One Judge's way to its endpoint: connections (one client per event loop), the concurrency limiter, the pace,
    retries and the model check, for the ``settings`` given."""

    def __init__(self, settings: JudgeSettings, budget: Budget | None = None) -> None:
        self.settings = settings
        self.budget = budget  # max_calls / max_cost_usd: each attempt reserves its worst case, settles after
        # One bound for every call of the Judge: every pass, every request, sync and async, on any thread's loop.
        self.limiter = Limiter(settings.max_concurrency)
        self._pace = Pace(settings.max_requests_per_s)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()
        self._reached = False  # has any call to this endpoint succeeded? (an unreachable one fails fast)
        self._checked = False  # has the model been checked against the endpoint's listing? (once per Transport)
        self._check = Limiter(1)
        self._listed: list[str] | None = None

    async def send(self, call: Call, usage: Usage) -> CallResult:
        """Send ``call``, retrying what is worth retrying; count each attempt in ``usage`` (the request's).

        Raises ``CallFailed`` when the retries ran out or the failure is this request's alone, and
        ``JudgeConfigError`` when every request would fail the same way (HTTP 401, 403, 404, an unreachable endpoint).
        """
        client = self._client()
        await self._checked_model(client)
        try:
            try:  # the first attempt without the retry machinery: most calls need no other
                return await self._attempt(client, call, usage)
            except Exception as error:  # tenacity decides from here on, from this failure as its own first attempt
                first: Exception | None = error
            # (A run's garbage: a tenacity loop leaves ~50 objects in reference cycles per call, which only the cyclic
            # collector frees; a third of our collector's time on a fast endpoint, docs/benchmarks.md.)
            async for attempt in AsyncRetrying(**self._retry_settings(call, usage)):
                with attempt:
                    if first is not None:
                        failed, first = first, None
                        raise failed
                    return await self._attempt(client, call, usage)
        except openai.APIError as exc:
            raise self._failure(exc, usage) from None
        except BudgetExhausted as exc:
            error = JudgeError(kind="budget", message=f"not sent: the judge's budget is spent ({exc})", attempts=usage.calls)
            raise CallFailed(error, rejects_mode=False) from None
        raise AssertionError("unreachable")

    async def _attempt(self, client: openai.AsyncOpenAI, call: Call, usage: Usage) -> CallResult:
        """One HTTP attempt: a slot of the limiter, the pace, the total deadline."""
        async with self.limiter:
            held = (await self.budget.reserve(worst_cost(self.settings.prices, call.messages, call.response_format, call.max_tokens))
                    if self.budget is not None else None)
            outcome: CallResult | BaseException | None = None  # None: never sent
            try:
                wait = self._pace.reserve()
                if wait:  # no pace (the default): no turn of the loop to give up
                    await asyncio.sleep(wait)
                started = time.perf_counter()
                try:
                    # The documented way to post a body as is: chat.completions.create would walk every message
                    # through the openai package's type transform first, a fifth of a request's CPU for a body that
                    # is already plain JSON. Same endpoint, headers, errors and retries (ours) either way.
                    response = await within_deadline(
                        client.post("/chat/completions", body=self._completion_kwargs(call), cast_to=_HTTP_RESPONSE),
                        self.settings.timeout_s,
                    )
                    result = read_completion(response, self.settings.redact)
                    # Counted and priced at these tokens: the reply's, or its worst case when they are implausible.
                    outcome, implausible = credible_usage(result, call.messages, call.response_format, call.max_tokens)
                except BaseException as exc:
                    outcome = exc
                    self._account(usage, started, exc)
                    raise
            finally:
                self._settle(held, outcome)
        self._account(usage, started, outcome)
        usage.implausible_usage += implausible
        return result

    def _settle(self, held: Reservation | None, outcome: CallResult | BaseException | None) -> None:
        """Settle a reservation to what the call cost: the reported tokens; nothing for an HTTP error status (the
        endpoint refused it); the worst case where the endpoint may have processed it without saying (a timeout, a
        dropped connection, a reply without token counts); a call never sent gives its reservation back."""
        if held is None or self.budget is None:
            return
        if outcome is None:
            self.budget.release(held)
            return
        reply = outcome if isinstance(outcome, CallResult) else None
        self.budget.settle(held, settled_cost(held, reply, refused=isinstance(outcome, openai.APIStatusError), prices=self.settings.prices))

    def _failure(self, exc: openai.APIError, usage: Usage) -> CallFailed:
        settings = self.settings
        if is_config_error(exc):
            raise settings.redacted(
                config_error(exc, model=settings.model, base_url=settings.base_url, available=self._listed)
            ) from None
        if is_unreachable(exc) and not self._reached:
            raise settings.redacted(unreachable_error(exc, base_url=settings.base_url)) from None
        error = JudgeError(
            kind=row_error_kind(exc),
            message=settings.redact(str(exc)),
            status_code=getattr(exc, "status_code", None),
            attempts=max(usage.calls, 1),
            raw=exc.excerpt if isinstance(exc, BadReply) else None,
        )
        return CallFailed(error, rejects_mode=is_mode_rejection(exc))

    def _wait_s(self, retry_state: Any) -> float:
        """Exponential backoff with full jitter, never shorter than the server's Retry-After."""
        settings = self.settings
        backoff = min(settings.backoff_max_s, settings.backoff_initial_s * 2 ** (retry_state.attempt_number - 1))
        backoff = backoff / 2 + random.uniform(0, backoff / 2)
        retry_after = retry_after_seconds(retry_state.outcome.exception())
        if retry_after is not None:
            return min(max(retry_after, backoff), settings.max_retry_after_s)
        return backoff

    def _retry_settings(self, call: Call, usage: Usage) -> dict[str, Any]:
        def should_retry(exc: BaseException) -> bool:
            if is_unreachable(exc) and not self._reached:
                return False  # an endpoint that never answered: fail fast with one clear message, not after retries
            return is_retryable(exc) and not (call.probing and is_mode_rejection(exc))

        def count_retry(state: Any) -> None:
            usage.retries += 1
            # What the openai client logs of its own retries (at INFO): why, and when the next attempt goes.
            failed = state.outcome.exception()
            logger.info("retrying a call to %s in %.2f s after attempt %d failed (%s): %s", self.settings.shown_url,
                        state.next_action.sleep, state.attempt_number, row_error_kind(failed), self.settings.redact(str(failed)))

        return {
            "retry": retry_if_exception(should_retry),
            "stop": stop_after_attempt(self.settings.max_retries + 1),
            "wait": self._wait_s,
            "before_sleep": count_retry,
            "reraise": True,
        }

    def _completion_kwargs(self, call: Call) -> dict[str, Any]:
        settings = self.settings
        kwargs: dict[str, Any] = {"model": settings.model, "messages": call.messages, "temperature": settings.temperature}
        if call.seed is not None:
            kwargs["seed"] = call.seed
        if call.max_tokens is not None:
            kwargs["max_tokens"] = call.max_tokens
        if call.response_format is not None:
            kwargs["response_format"] = call.response_format
        return kwargs

    def _account(self, usage: Usage, started: float, result: CallResult | BaseException) -> None:
        failed = isinstance(result, BaseException)
        usage.count_call(time.perf_counter() - started, None if failed else result)
        # The endpoint answered, if not always with a completion.
        self._reached = self._reached or not failed or isinstance(result, BadReply)

    def _client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:  # an async client belongs to the event loop it was made on
            settings = self.settings
            http = http_client(settings.http_backend, base_url=settings.base_url, max_concurrency=settings.max_concurrency,
                               own_loop=loop is started_loop())
            client = openai.AsyncOpenAI(api_key=settings.key, base_url=settings.base_url, timeout=settings.timeout_s,
                                        max_retries=0, http_client=http)
            self._clients[loop] = client
            weakref.finalize(self, close_soon, loop, client, os.getpid())  # a Judge dropped without close(): its connections too
        return client

    async def _checked_model(self, client: openai.AsyncOpenAI) -> None:
        """Before the first call: is the model one the endpoint serves? Once, whatever thread or loop asks."""
        if self._checked or not self.settings.check_model:
            return
        async with self._check:
            if not self._checked:
                listing = await check_served_model(client, self.settings, reached=self._reached)
                self._reached = self._reached or listing.answered
                if listing.ids is not None:
                    self._listed = listing.ids
                self._checked = True

    def close(self) -> None:
        """Close the connections of the synchronous methods (those on the process's background loop)."""
        loop = started_loop()
        client = self._clients.pop(loop, None) if loop is not None else None
        if client is not None:
            run_sync(client.close())
