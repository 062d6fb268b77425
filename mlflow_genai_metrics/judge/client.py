"""``Judge``: ask an OpenAI-compatible chat model a question, get back a validated pydantic object.

One request flows: cache lookup -> chat completion(s) -> validation (one repair) -> cache write -> ``JudgeReply``.
The flow is written once, as a generator (``conversation.conversation``) that yields the chat completions it needs
and receives their results; one async driver (``openai.AsyncOpenAI``) runs it, and the synchronous methods run that
driver on a background event loop (``runner``). Retries (tenacity), the concurrency bound and the deadline of
``timeout_s`` live in the driver's single HTTP call.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from .answers import ResponseMode
from .cache import JudgeCache, default_cache_dir
from .conversation import Call, Conversation, RequestState
from .conversation import conversation as conversation_of
from .errors import (
    DeadlineExceeded,
    JudgeConfigError,
    config_error,
    is_config_error,
    is_mode_rejection,
    is_retryable,
    is_unreachable,
    redact,
    redact_url,
    retry_after_seconds,
    row_error_kind,
    unreachable_error,
    url_secrets,
)
from .models import ReportedModels, check_served_model
from .records import JudgeError, JudgeReply, JudgeRequest, Prices, Usage
from .replies import BadReply, CallResult, read_completion
from .runner import run_sync, started_loop

__all__ = ["DEFAULT_BASE_URL", "Judge"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_DEFAULT_CACHE = object()  # sentinel: "use the default cache dir"; None means no cache

# Which response mode each (base_url, model) accepted, shared by every Judge in this process, so probing
# costs one rejected call per endpoint, not one per row or per Judge.
_ENDPOINT_MODES: dict[tuple[str, str], ResponseMode] = {}
_ENDPOINT_MODES_LOCK = threading.Lock()


def _is_loopback(base_url: str) -> bool:
    host = urlparse(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Pace:
    """At most ``rate`` HTTP attempts started per second, across every thread and event loop of one Judge: each
    attempt reserves the next free start time and waits for it (no bursts above the rate)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Seconds to wait before starting."""
        if not self.interval:
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        return start - now


class Judge:
    """A judge model behind any OpenAI-compatible chat completions endpoint.

    >>> judge = Judge("gpt-4o-mini")                                   # OpenAI, key from OPENAI_API_KEY
    >>> judge = Judge("smollm2-135m", "http://127.0.0.1:8080/v1", "local")  # a llama.cpp server
    >>> reply = judge.ask(JudgeRequest(messages=[{"role": "user", "content": "..."}], answer_type=Verdict))
    >>> reply.answer if reply.ok else reply.error

    Arguments left out come from the environment: ``MGM_JUDGE_MODEL``, ``MGM_JUDGE_BASE_URL`` (else
    ``OPENAI_BASE_URL``, else OpenAI), ``OPENAI_API_KEY`` (a loopback server needs none). ``cache_dir=None`` turns
    the cache off; by default it is ``$MGM_CACHE_DIR`` or the user cache dir. ``prices`` (USD per million tokens,
    ``{"input": 0.15, "output": 0.6}``) turns tokens into cost. ``max_concurrency`` bounds the HTTP calls in
    flight and ``max_requests_per_s`` (default: no limit) the calls started per second, each across every thread
    and event loop using this Judge, retries included. ``context_window`` (the model's, in tokens), when given,
    lets the metrics split sources too long for it. ``timeout_s`` bounds each HTTP attempt in total.

    The cache keeps every HTTP-200 reply a request got (the repair turn included, valid or not) and validates it
    again when read, so a rerun makes no call where the endpoint already answered, and an invalid answer comes back
    as the same error; only transport failures are asked again. ``reask_invalid=True`` asks again the cached
    requests whose replies gave no answer (``invalid_answer``, ``truncated``, ``refused``) and keeps the new replies.

    Before its first HTTP call a Judge lists the endpoint's models (``/models``) and raises ``JudgeConfigError``,
    naming the models served, when its model is not among them (``check_model=False`` skips this; an endpoint without
    a listing is not checked). Each reply's ``model`` is the id the endpoint reported; ``model_mismatch`` marks one
    from another model than asked for (a dated snapshot such as ``gpt-4o-mini-2024-07-18`` is the same model), and
    ``reported_models`` counts them.
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
        max_concurrency: int = 8,
        max_requests_per_s: float | None = None,
        timeout_s: float = 60,
        max_retries: int = 6,
        cache_dir: str | os.PathLike[str] | None | object = _DEFAULT_CACHE,
        prices: Prices | dict[str, float] | tuple[float, float] | None = None,
        max_tokens: int | None = None,
        context_window: int | None = None,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_retry_after_s: float = 300.0,
        progress: bool | None = None,
        reask_invalid: bool = False,
        check_model: bool = True,
    ):
        model = model or os.environ.get("MGM_JUDGE_MODEL")
        if not model:
            raise ValueError(
                "No judge model given: pass Judge(model=...) or set MGM_JUDGE_MODEL "
                "(e.g. gpt-4o-mini, or the model id a local server reports at /v1/models)."
            )
        self.model = model
        self.base_url = (
            base_url or os.environ.get("MGM_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self._api_key_given = api_key is not None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or ""
        if not self._api_key:
            if not _is_loopback(self.base_url):
                raise ValueError(
                    f"No API key for the judge endpoint {redact_url(self.base_url)}: set OPENAI_API_KEY or pass api_key=. "
                    "(A server on 127.0.0.1 needs none.)"
                )
            self._api_key = "local"
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if max_requests_per_s is not None and not max_requests_per_s > 0:
            raise ValueError(f"max_requests_per_s must be positive (or None: no limit), got {max_requests_per_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.temperature = float(temperature)
        self.seed = seed
        self.max_concurrency = int(max_concurrency)
        self.max_requests_per_s = None if max_requests_per_s is None else float(max_requests_per_s)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.max_tokens = max_tokens
        self.context_window = context_window
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.progress = progress
        self.reask_invalid = bool(reask_invalid)
        self.check_model = bool(check_model)
        self.prices = Prices.coerce(prices)
        if cache_dir is _DEFAULT_CACHE:
            cache_dir = default_cache_dir()
        self.cache: JudgeCache | None = JudgeCache(cache_dir) if cache_dir is not None else None
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._usage = Usage()
        self._usage_lock = threading.Lock()
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()
        # One bound for every caller of this Judge: sync calls, and async calls on any thread's event loop
        # (MLflow's scorer threads each run their own loop).
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._pace = _Pace(self.max_requests_per_s)
        self._probe_lock = threading.Lock()  # while an endpoint's response mode is unknown, one request finds it
        self._reached = False  # has any call to this endpoint succeeded? (an unreachable one fails fast)
        self._checked = False  # has the model been checked against the endpoint's listing? (once per Judge)
        self._check_lock = threading.Lock()
        self._listed_models: list[str] | None = None
        self._reported = ReportedModels()

    # -- pickling: settings travel, connections and the API key read from the environment do not --------

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_") or k in ("_api_key_given",)}
        state["_api_key"] = self._api_key if self._api_key_given else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        api_key = state.pop("_api_key")
        self.__dict__.update(state)
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or ("local" if _is_loopback(self.base_url) else "")
        self._init_runtime()

    def with_limits(self, *, max_concurrency: int, max_requests_per_s: float | None) -> Judge:
        """The same judge (settings, key, cache directory) with other limits; it shares no connection with this one."""
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        clone = object.__new__(Judge)
        clone.__setstate__({**self.__getstate__(), "max_concurrency": int(max_concurrency),
                            "max_requests_per_s": None if max_requests_per_s is None else float(max_requests_per_s)})
        return clone

    def __repr__(self) -> str:
        cache = str(self.cache.directory) if self.cache else None
        return (
            f"Judge(model={self.model!r}, base_url={self.shown_url!r}, temperature={self.temperature}, "
            f"seed={self.seed}, max_concurrency={self.max_concurrency}, cache_dir={cache!r})"
        )

    # -- what produced the numbers ----------------------------------------------------------------------

    @property
    def endpoint_label(self) -> str:
        """The endpoint as the signature shows it: the host, with loopback servers all called ``localhost``."""
        if _is_loopback(self.base_url):
            return "localhost"
        return urlparse(self.base_url).hostname or self.shown_url

    @property
    def cache_endpoint(self) -> str:
        """The endpoint as cache keys see it: a loopback server's port changes from run to run (``LocalModelServer``
        picks a free one), the model behind the same model id does not; nor do credentials in the URL."""
        if _is_loopback(self.base_url):
            return "localhost" + (urlparse(self.base_url).path or "")
        return self.shown_url

    @property
    def signature(self) -> str:
        """The judge's part of a run signature: ``judge:<model>|base:<host>|temp:<t>|seed:<seed>``."""
        seed = "none" if self.seed is None else self.seed
        return f"judge:{self.model}|base:{self.endpoint_label}|temp:{self.temperature:g}|seed:{seed}"

    @property
    def shown_url(self) -> str:
        """The base URL as messages, logs and ``repr`` show it: credentials in it replaced by ``***``."""
        return redact_url(self.base_url)

    @property
    def response_mode(self) -> ResponseMode | None:
        """The response mode this endpoint accepted, once a call has found it."""
        return _ENDPOINT_MODES.get((self.base_url, self.model))

    def _remember_mode(self, mode: ResponseMode) -> None:
        with _ENDPOINT_MODES_LOCK:
            _ENDPOINT_MODES[(self.base_url, self.model)] = mode

    @property
    def reported_models(self) -> dict[str, int]:
        """The model ids the endpoint's replies named (cached replies included), with how many replies named each."""
        return self._reported.counts()

    @property
    def usage(self) -> Usage:
        """Everything this Judge has asked so far, summed."""
        with self._usage_lock:
            return self._usage.model_copy(deep=True)

    def _record_usage(self, usage: Usage) -> None:
        with self._usage_lock:
            self._usage.add(usage)

    def _failed(self, exc: openai.APIError, state: RequestState) -> JudgeReply:
        if is_config_error(exc):
            raise self._redacted(config_error(exc, model=self.model, base_url=self.base_url, available=self._listed_models))
        if is_unreachable(exc) and not self._reached:
            raise self._redacted(unreachable_error(exc, base_url=self.base_url))
        error = JudgeError(
            kind=row_error_kind(exc),
            message=self._redact(str(exc)),
            status_code=getattr(exc, "status_code", None),
            attempts=max(state.usage.calls, 1),
            raw=exc.excerpt if isinstance(exc, BadReply) else None,
        )
        return JudgeReply(error=error, usage=state.usage)

    def _redacted(self, error: JudgeConfigError) -> JudgeConfigError:
        return JudgeConfigError(self._redact(str(error)), status_code=error.status_code)

    def _redact(self, text: str) -> str:
        """``text`` without the API key or the credentials of the base URL."""
        text = redact_url(text.replace(self.base_url, self.shown_url))
        for secret in (self._api_key, *url_secrets(self.base_url)):
            text = redact(text, secret)
        return text

    # -- one HTTP call, with retries ------------------------------------------------------------------

    def _wait_s(self, retry_state: Any) -> float:
        """Exponential backoff with full jitter, never shorter than the server's Retry-After."""
        attempt = retry_state.attempt_number
        backoff = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1))
        backoff = backoff / 2 + random.uniform(0, backoff / 2)
        retry_after = retry_after_seconds(retry_state.outcome.exception())
        if retry_after is not None:
            return min(max(retry_after, backoff), self.max_retry_after_s)
        return backoff

    def _retry_settings(self, call: Call, state: RequestState) -> dict[str, Any]:
        def should_retry(exc: BaseException) -> bool:
            if is_unreachable(exc) and not self._reached:
                return False  # an endpoint that never answered: fail fast with one clear message, not after retries
            return is_retryable(exc) and not (call.probing and is_mode_rejection(exc))

        def count_retry(_: Any) -> None:
            state.usage.retries += 1

        return {
            "retry": retry_if_exception(should_retry),
            "stop": stop_after_attempt(self.max_retries + 1),
            "wait": self._wait_s,
            "before_sleep": count_retry,
            "reraise": True,
        }

    def _completion_kwargs(self, call: Call) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": call.messages, "temperature": self.temperature}
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if call.max_tokens is not None:
            kwargs["max_tokens"] = call.max_tokens
        if call.response_format is not None:
            kwargs["response_format"] = call.response_format
        return kwargs

    def _account(self, state: RequestState, started: float, result: CallResult | BaseException) -> None:
        elapsed = time.perf_counter() - started
        usage = state.usage
        usage.calls += 1
        usage.latency_s += elapsed
        usage.call_latencies_s.append(elapsed)
        if isinstance(result, BaseException):
            usage.failed_calls += 1
            self._reached = self._reached or isinstance(result, BadReply)  # it answered, if not with a completion
            return
        self._reached = True
        usage.prompt_tokens += result.prompt_tokens
        usage.completion_tokens += result.completion_tokens

    def _async_client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:  # an async client belongs to the event loop it was made on
            client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
            )
            self._async_clients[loop] = client
        return client

    @staticmethod
    async def _acquire(lock: threading.Semaphore | threading.Lock) -> None:
        # Threading primitives, so they hold across event loops; polled, so no loop is ever blocked.
        while not lock.acquire(blocking=False):
            await asyncio.sleep(0.002)

    async def _within_deadline(self, work: Any) -> Any:
        """``timeout_s`` bounds a whole HTTP attempt: the client's own timeout bounds each read, and a server that
        trickles a byte at a time never lets one run out."""
        try:
            return await asyncio.wait_for(work, self.timeout_s)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(self.timeout_s) from None

    async def _checked_model(self, client: openai.AsyncOpenAI) -> None:
        """Before this Judge's first call: is the model one the endpoint serves? Once, whatever thread or loop asks."""
        if self._checked or not self.check_model:
            return
        await self._acquire(self._check_lock)
        try:
            if not self._checked:
                await check_served_model(self, client)
                self._checked = True
        finally:
            self._check_lock.release()

    async def _send_async(self, call: Call, state: RequestState) -> CallResult:
        client = self._async_client()
        await self._checked_model(client)
        async for attempt in AsyncRetrying(**self._retry_settings(call, state)):
            with attempt:
                await self._acquire(self._slots)
                try:
                    await asyncio.sleep(self._pace.reserve())
                    started = time.perf_counter()
                    try:
                        raw = await self._within_deadline(
                            client.chat.completions.with_raw_response.create(**self._completion_kwargs(call))
                        )
                        result = read_completion(raw.http_response, self._redact)
                    except BaseException as exc:
                        self._account(state, started, exc)
                        raise
                finally:
                    self._slots.release()
                self._account(state, started, result)
                return result
        raise AssertionError("unreachable")

    # -- drivers ------------------------------------------------------------------------------------

    def _finish(self, reply: JudgeReply) -> JudgeReply:
        usage = reply.usage
        if reply.model is not None:
            reply.model_mismatch = self._reported.record(self.model, reply.model)
            usage.reported_models[reply.model] = usage.reported_models.get(reply.model, 0) + 1
        usage.requests = 1
        if self.prices is not None:
            usage.cost_usd = self.prices.cost(usage.prompt_tokens, usage.completion_tokens)
        self._record_usage(usage)
        return reply

    def ask(self, request: JudgeRequest) -> JudgeReply:
        """Ask one question synchronously (safe in a notebook whose event loop is running). Failures come back as
        ``reply.error``; only a configuration error (HTTP 401/403/404) raises ``JudgeConfigError``."""
        return run_sync(self.aask(request))

    @staticmethod
    def _advance(
        conversation: Conversation,
        outcome: CallResult | None,
        failure: openai.APIError | None,
    ) -> Call | JudgeReply:
        """Hand the conversation the last call's result (or failure); get its next call, or its reply."""
        try:
            return conversation.throw(failure) if failure is not None else conversation.send(outcome)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value

    async def aask(self, request: JudgeRequest) -> JudgeReply:
        """Ask one question on the running event loop (see ``ask``)."""
        state = RequestState()
        if self.response_mode is None:
            await self._acquire(self._probe_lock)  # one request finds the endpoint's mode; the others then use it
            try:
                if self.response_mode is None:
                    return self._finish(await self._run_async(request, state))
            finally:
                self._probe_lock.release()
        return self._finish(await self._run_async(request, state))

    async def _run_async(self, request: JudgeRequest, state: RequestState) -> JudgeReply:
        conversation = conversation_of(self, request, state)
        step = self._advance(conversation, None, None)
        while isinstance(step, Call):
            try:
                outcome, failure = await self._send_async(step, state), None
            except openai.APIError as exc:
                outcome, failure = None, exc
            step = self._advance(conversation, outcome, failure)
        return step

    async def aask_many(
        self, requests: Iterable[JudgeRequest], *, progress: bool | None = None, desc: str = "judging"
    ) -> list[JudgeReply]:
        """Ask many questions concurrently (at most ``max_concurrency`` HTTP calls in flight).

        Returns one reply per request, in order. A request whose retries ran out carries its error; the
        others are unaffected. Only ``JudgeConfigError`` stops the batch (answers so far are cached).
        """
        from tqdm.auto import tqdm

        pending = list(requests)
        replies: list[JudgeReply | None] = [None] * len(pending)
        show = self.progress if progress is None else progress
        bar = tqdm(total=len(pending), desc=desc, unit="req", disable=None if show is None else not show, leave=False)
        next_index = iter(range(len(pending)))

        async def worker() -> None:
            for index in next_index:
                replies[index] = await self.aask(pending[index])
                bar.update(1)

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.max_concurrency, len(pending)) or 1)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            bar.close()
        assert all(r is not None for r in replies)
        return replies  # type: ignore[return-value]

    def ask_many(
        self, requests: Iterable[JudgeRequest], *, progress: bool | None = None, desc: str = "judging"
    ) -> list[JudgeReply]:
        """Synchronous ``aask_many``; safe to call from a notebook whose event loop is already running."""
        return run_sync(self.aask_many(list(requests), progress=progress, desc=desc))

    def close(self) -> None:
        """Close this Judge's connections (those of the synchronous methods) and its cache."""
        loop = started_loop()
        client = self._async_clients.pop(loop, None) if loop is not None else None
        if client is not None:
            run_sync(client.close())
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
