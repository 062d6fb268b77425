"""``Judge``: ask an OpenAI-compatible chat model a question, get back a validated pydantic object.

The facade that composes the judge's parts, each in a module of its own that imports none above it:

- ``settings``: the arguments and the environment, read once and validated (``JudgeSettings``);
- ``conversation``: one request's chat completions, cache replay, validation and the repair turn;
- ``modes``: the response mode each endpoint accepted, found by one probing request (``EndpointModes``);
- ``transport``: one call, with the model check, retries, the concurrency limiter, the pace and the deadline;
- ``models``: the endpoint's model listing and the model ids replies report;
- ``runner``: the background event loop the synchronous methods run on.

One request flows: cache lookup -> chat completion(s) -> validation (one repair) -> cache write -> ``JudgeReply``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from .answers import ResponseMode, answer_schema, response_format, with_schema_instruction
from .batch import BatchOptions
from .batch.sender import BatchSender, batch_settings
from .budget import Budget, worst_cost
from .cache import JudgeCache
from .conversation import conversation, needs_response_mode, play
from .http import HttpBackend
from .models import ReportedModels
from .modes import EndpointModes
from .records import JudgeReply, JudgeRequest, Prices, Usage
from .runner import run_sync
from .settings import DEFAULT_BASE_URL, DEFAULT_CACHE, JudgeSettings
from .transport import Transport

__all__ = ["DEFAULT_BASE_URL", "Judge"]

T = TypeVar("T")


class _Setting(Generic[T]):
    """A read-only ``Judge`` attribute: the ``JudgeSettings`` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, judge: Judge | None, owner: type | None = None) -> T:
        if judge is None:
            return self  # type: ignore[return-value]
        return getattr(judge.settings, self.name)

    def __set__(self, judge: Judge, value: object) -> None:
        raise AttributeError(f"Judge.{self.name} is fixed when the Judge is made: make another (or use with_limits)")


class Judge:
    """A judge model behind any OpenAI-compatible chat completions endpoint.

    >>> judge = Judge("gpt-4o-mini")                                   # OpenAI, key from OPENAI_API_KEY
    >>> judge = Judge("smollm2-135m", "http://127.0.0.1:8080/v1", "local")  # a llama.cpp server
    >>> reply = judge.ask(JudgeRequest(messages=[{"role": "user", "content": "..."}], answer_type=Verdict))
    >>> reply.answer if reply.ok else reply.error

    Arguments left out come from the environment, read once here: ``MGM_JUDGE_MODEL``, ``MGM_JUDGE_BASE_URL`` (else
    ``OPENAI_BASE_URL``, else OpenAI), ``OPENAI_API_KEY`` (a loopback server needs none). ``cache_dir=None`` turns
    the cache off; by default it is ``$MGM_CACHE_DIR`` or the user cache dir. ``prices`` (USD per million tokens,
    ``{"input": 0.15, "output": 0.6}``) turns tokens into cost. ``max_concurrency`` bounds the HTTP calls in
    flight and ``max_requests_per_s`` (default: no limit) the calls started per second, each across every thread
    and event loop using this Judge, retries included. ``context_window`` (the model's, in tokens; left out, read
    from ``MGM_JUDGE_CONTEXT`` for the model ``MGM_JUDGE_MODEL`` names), when known, lets the metrics split sources
    too long for it. ``timeout_s`` bounds each HTTP attempt in total. Settings out of
    range raise ``ValueError`` here, before any call; ``judge.settings`` holds them all (``JudgeSettings``).

    The cache keeps every HTTP-200 reply a request got (the repair turn included, valid or not) and validates it
    again when read, so a rerun makes no call where the endpoint already answered, and an invalid answer comes back
    as the same error; only transport failures are asked again. ``reask_invalid=True`` asks again the cached
    requests whose replies gave no answer (``invalid_answer``, ``truncated``, ``refused``) and keeps the new replies.

    Before its first HTTP call a Judge lists the endpoint's models (``/models``) and raises ``JudgeConfigError``,
    naming the models served, when its model is not among them (``check_model=False`` skips this; an endpoint without
    a listing is not checked). Each reply's ``model`` is the id the endpoint reported; ``model_mismatch`` marks one
    from another model than asked for (a dated snapshot such as ``gpt-4o-mini-2024-07-18`` is the same model), and
    ``reported_models`` counts them.

    The response mode an endpoint accepts is found once per endpoint and process and shared by every Judge of the
    process (see ``modes``); ``with_limits`` copies share it, and a pickled Judge finds it again where it lands.

    ``max_calls`` and ``max_cost_usd`` (the latter needs ``prices``) bound what this Judge spends, whatever the
    concurrency: each HTTP attempt reserves its worst case before it is sent and settles to its reported usage
    after (see ``budget``); a request that would pass the budget is not sent and gets a ``budget`` error, and a
    rerun with a larger budget pays only for what the cache lacks. ``judge.budget`` shows what is spent.

    ``batch=True`` (or ``BatchOptions(...)``; ``judge.batched(...)`` makes such a copy) answers every request through
    batch files, OpenAI's Batches API or a command such as vLLM's ``run_batch``, into the same cache (see ``batching``).

    ``http_backend`` chooses the HTTP library under the openai client: ``"auto"`` (aiohttp on the Judge's own event
    loop, which every synchronous path uses, for a third less CPU per call; httpx on a caller's loop), ``"httpx"`` or
    ``"aiohttp"`` (see ``http``). It changes no answer, so no signature or cache key carries it.
    """

    model = _Setting[str]()
    base_url = _Setting[str]()
    temperature = _Setting[float]()
    seed = _Setting[int | None]()
    max_concurrency = _Setting[int]()
    max_requests_per_s = _Setting[float | None]()
    timeout_s = _Setting[float]()
    max_retries = _Setting[int]()
    max_tokens = _Setting[int | None]()  # the default for requests that name none; pinned by the signature
    context_window = _Setting[int | None]()
    prices = _Setting[Prices | None]()
    backoff_initial_s = _Setting[float]()
    backoff_max_s = _Setting[float]()
    max_retry_after_s = _Setting[float]()
    progress = _Setting[bool | None]()
    reask_invalid = _Setting[bool]()
    check_model = _Setting[bool]()
    max_calls = _Setting[int | None]()
    max_cost_usd = _Setting[float | None]()
    batch = _Setting[BatchOptions | None]()  # batch mode's options; None online
    http_backend = _Setting[HttpBackend]()
    shown_url = _Setting[str]()
    endpoint_label = _Setting[str]()
    cache_endpoint = _Setting[str]()

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
        cache_dir: str | os.PathLike[str] | None | object = DEFAULT_CACHE,
        prices: Prices | dict[str, float] | tuple[float, float] | None = None,
        max_tokens: int | None = None,
        context_window: int | None = None,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_retry_after_s: float = 300.0,
        progress: bool | None = None,
        reask_invalid: bool = False,
        check_model: bool = True,
        max_calls: int | None = None,
        max_cost_usd: float | None = None,
        batch: BatchOptions | bool | None = None,
        http_backend: HttpBackend = "auto",
    ):
        settings = JudgeSettings.resolve(
            model, base_url, api_key, cache_dir=cache_dir, temperature=temperature, seed=seed,
            max_concurrency=max_concurrency, max_requests_per_s=max_requests_per_s, timeout_s=timeout_s,
            max_retries=max_retries, prices=prices, max_tokens=max_tokens, context_window=context_window,
            backoff_initial_s=backoff_initial_s, backoff_max_s=backoff_max_s, max_retry_after_s=max_retry_after_s,
            progress=progress, reask_invalid=reask_invalid, check_model=check_model, max_calls=max_calls,
            max_cost_usd=max_cost_usd, http_backend=http_backend,
        )
        self._start(batch_settings(settings, batch), EndpointModes.of_process())

    @classmethod
    def from_settings(cls, settings: JudgeSettings, *, modes: EndpointModes | None = None) -> Judge:
        """A Judge with these settings, remembering response modes in ``modes`` (default: the process's registry)."""
        judge = object.__new__(cls)
        judge._start(settings, EndpointModes.of_process() if modes is None else modes)
        return judge

    def _start(self, settings: JudgeSettings, modes: EndpointModes, budget: Budget | None = None) -> None:
        self.settings = settings
        self.cache: JudgeCache | None = JudgeCache(settings.cache_dir) if settings.cache_dir is not None else None
        self.endpoint_modes = modes
        self._endpoint = modes.endpoint(settings.base_url, settings.model)
        if budget is None and (settings.max_calls is not None or settings.max_cost_usd is not None):
            budget = Budget(settings.max_calls, settings.max_cost_usd)
        self.budget: Budget | None = budget  # what the calls so far spent of max_calls / max_cost_usd
        self._transport = Transport(settings, budget)
        self._batch = BatchSender.of(settings, budget, self._endpoint)  # batch mode: calls go in batch files
        self._usage = Usage()
        self._usage_lock = threading.Lock()
        self._reported = ReportedModels()

    # -- copies: the settings travel; connections, limits in use, usage and the registry of modes do not -----------

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}  # JudgeSettings leaves out a key read from the environment

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._start(state["settings"], EndpointModes.of_process())

    def with_limits(self, *, max_concurrency: int, max_requests_per_s: float | None) -> Judge:
        """The same judge (settings, key, cache directory, registry of response modes, budget) with other limits; it
        shares no connection, limiter or usage with this one, and spends from the same budget (a copy must not
        double it)."""
        settings = self.settings.with_limits(max_concurrency=max_concurrency, max_requests_per_s=max_requests_per_s)
        judge = object.__new__(type(self))
        judge._start(settings, self.endpoint_modes, self.budget)
        return judge

    def batched(self, options: BatchOptions | None = None, **option_values: Any) -> Judge:
        """The same judge in batch mode (``BatchOptions``: ``poll_s``, ``files_dir`` and ``command`` for vLLM, ...):
        every request is answered through batch files (see ``batching``), into the same cache, from the same budget.
        ``judge.batched(poll_s=60)``."""
        options = options or BatchOptions(**option_values)
        judge = object.__new__(type(self))
        judge._start(batch_settings(self.settings, options), self.endpoint_modes, self.budget)
        return judge

    def __repr__(self) -> str:
        cache = str(self.cache.directory) if self.cache else None
        return (
            f"Judge(model={self.model!r}, base_url={self.shown_url!r}, temperature={self.temperature}, "
            f"seed={self.seed}, max_concurrency={self.max_concurrency}, cache_dir={cache!r})"
        )

    # -- what produced the numbers ----------------------------------------------------------------------------------

    @property
    def response_mode(self) -> ResponseMode | None:
        """The response mode this endpoint accepted, once a call has found it."""
        return self._endpoint.mode

    @property
    def reported_models(self) -> dict[str, int]:
        """The model ids the endpoint's replies named (cached replies included), with how many replies named each."""
        return self._reported.counts()

    @property
    def usage(self) -> Usage:
        """Everything this Judge has asked so far, summed."""
        with self._usage_lock:
            return self._usage.model_copy(deep=True)

    def _finish(self, reply: JudgeReply) -> JudgeReply:
        usage = reply.usage
        if reply.model is not None:
            reply.model_mismatch = self._reported.record(self.model, reply.model)
            usage.reported_models[reply.model] = usage.reported_models.get(reply.model, 0) + 1
        if reply.mode is not None:  # the mode changes the prompt: the signature pins the one the replies came in
            usage.response_modes[reply.mode] = usage.response_modes.get(reply.mode, 0) + 1
        usage.requests = 1
        prices = self._batch.prices if self._batch is not None else self.prices  # a batch's calls cost less
        if prices is not None:
            usage.cost_usd = prices.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens)
        with self._usage_lock:
            self._usage.add(usage)
        return reply

    def count_cached(self, requests: int, reported_models: dict[str, int], response_modes: dict[str, int]) -> Usage:
        """Count ``requests`` answered from a record derived from this Judge's cache without reading their
        transcripts (``reported_models`` and ``response_modes``: what their replies named, summed): exactly what
        replaying them would count, as cache hits, in this Judge's totals and reported models. Their usage."""
        usage = Usage(requests=requests, cache_hits=requests, reported_models=dict(reported_models),
                      response_modes=dict(response_modes), cost_usd=0.0 if self.prices is not None and requests else None)
        for model, count in reported_models.items():
            self._reported.record(self.model, model, count)
        with self._usage_lock:
            self._usage.add(usage)
        return usage

    def worst_cost(self, request: JudgeRequest) -> float:
        """The most the first call of ``request`` can cost, as its budget reservation holds it (0 without prices), at
        the prices its calls are paid at (a batch's in batch mode): the pipeline sets a row's aside with it. Before
        the endpoint's response mode is known, it is taken as the one whose prompt is the longest (``json_object``:
        the schema in the prompt and in ``response_format``)."""
        prices = self._batch.prices if self._batch is not None else self.prices
        messages = [m.model_dump() for m in request.messages]
        shape = None
        if needs_response_mode(request):
            mode = (self._batch.endpoint if self._batch is not None else self._endpoint).mode or "json_object"
            schema = answer_schema(request.answer_type)
            messages = with_schema_instruction(messages, mode, schema)
            shape = response_format(mode, request.answer_type, schema)
        return worst_cost(prices, messages, shape, request.max_tokens or self.max_tokens)

    # -- asking ------------------------------------------------------------------------------------------------------

    async def aask(self, request: JudgeRequest) -> JudgeReply:
        """Ask one question on the running event loop (see ``ask``). Safe to await from any number of coroutines,
        threads and loops at once: the HTTP calls in flight stay within ``max_concurrency``."""
        usage = Usage()
        endpoint, send = (self._batch.endpoint, self._batch.send) if self._batch is not None else (self._endpoint, self._transport.send)

        async def ask() -> JudgeReply:
            talk = conversation(request, settings=self.settings, cache=self.cache, endpoint=endpoint, usage=usage)
            return await play(talk, lambda call: send(call, usage))

        if needs_response_mode(request):
            return self._finish(await endpoint.probing(ask))
        return self._finish(await ask())

    def ask(self, request: JudgeRequest) -> JudgeReply:
        """Ask one question synchronously (safe in a notebook whose event loop is running). Failures come back as
        ``reply.error``; only a configuration error (HTTP 401/403/404) raises ``JudgeConfigError``."""
        return run_sync(self.aask(request))

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
        self._transport.close()
        if self._batch is not None:
            self._batch.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
