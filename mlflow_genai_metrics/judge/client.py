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
import inspect
import threading
from collections.abc import Iterable
from typing import Any

from .answers import ResponseMode, answer_schema, response_format, with_schema_instruction
from .batch import BatchOptions
from .batch.sender import BatchSender, batch_settings
from .budget import Budget, worst_cost
from .cache import JudgeCache
from .conversation import conversation, needs_response_mode, play
from .declaration import declared
from .models import ReportedModels
from .modes import EndpointModes
from .records import JudgeReply, JudgeRequest, Usage
from .runner import run_sync
from .settings import JudgeSettings
from .transport import Transport


class _ReadOnly:
    """A read-only ``Judge`` attribute: the ``JudgeSettings`` field (or property) of the same name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, judge: Judge | None, owner: type | None = None) -> Any:
        return self if judge is None else getattr(judge.settings, self.name)

    def __set__(self, judge: Judge, value: object) -> None:
        raise AttributeError(f"Judge.{self.name} is fixed when the Judge is made: make another (or use with_limits)")


class Judge:
    """A judge model behind any OpenAI-compatible chat completions endpoint.

    >>> judge = Judge("gpt-4o-mini")                                   # OpenAI, key from OPENAI_API_KEY
    >>> judge = Judge("smollm2-135m", "http://127.0.0.1:8080/v1", "local")  # a llama.cpp server
    >>> reply = judge.ask(JudgeRequest(messages=[{"role": "user", "content": "..."}], answer_type=Verdict))
    >>> reply.answer if reply.ok else reply.error

    Its parameters are the settings ``JudgeSettings`` declares, listed below with their defaults (``$VARIABLE``: read
    from the environment, once, here). A setting out of range raises ``ValueError`` here, before any call, and an
    unknown one ``TypeError``. ``judge.settings`` holds them, each read back as an attribute that cannot be assigned
    (``judge.max_retries``). ``class MyJudge(Judge, settings_type=Mine)`` takes the settings of ``Mine``, a subclass.

    The cache keeps every HTTP-200 reply a request got (the repair turn included, valid or not) and validates it
    again when read: a rerun makes no call where the endpoint already answered. Before its first call a Judge lists
    the endpoint's models and raises ``JudgeConfigError`` when its model is not among them; ``reported_models``
    counts the model ids replies name (``model_mismatch``: another model's). The response mode the endpoint accepts
    is found by one probing request and kept in ``endpoint_modes``, shared by the ``with_limits`` and ``batched``
    copies; an unpickled Judge finds it for itself. ``max_calls`` and ``max_cost_usd`` bound what it spends,
    whatever the concurrency (``judge.budget``; see ``budget``). docs/judges.md says more.
    """

    settings_type: type[JudgeSettings] = JudgeSettings

    def __init_subclass__(cls, settings_type: type[JudgeSettings] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if settings_type is not None:
            cls.settings_type = settings_type
        _derive(cls)

    def __init__(self, *args: Any, **settings: Any) -> None:
        given = self.__signature__.bind(*args, **settings).arguments  # a setting not declared: TypeError, naming it
        batch = given.pop("batch", None)
        self._start(batch_settings(self.settings_type.resolve(**given), batch), EndpointModes())

    @classmethod
    def from_settings(cls, settings: JudgeSettings, *, modes: EndpointModes | None = None) -> Judge:
        """A Judge with these settings, remembering response modes in ``modes`` (default: its own)."""
        judge = object.__new__(cls)
        judge._start(settings, EndpointModes() if modes is None else modes)
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

    # -- copies: the settings travel; connections, limits in use, usage and the modes found do not ----------------

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}  # JudgeSettings leaves out a key read from the environment

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._start(state["settings"], EndpointModes())

    def with_limits(self, *, max_concurrency: int, max_requests_per_s: float | None) -> Judge:
        """The same judge (settings, key, cache directory, response modes found, budget) with other limits; it
        shares no connection, limiter or usage with this one, and spends from the same budget (a copy must not
        double it)."""
        return self._copy(self.settings.replaced(max_concurrency=max_concurrency, max_requests_per_s=max_requests_per_s))

    def batched(self, options: BatchOptions | None = None, **option_values: Any) -> Judge:
        """The same judge in batch mode (``BatchOptions``: ``poll_s``, ``files_dir`` and ``command`` for vLLM, ...):
        every request is answered through batch files (see ``batching``), into the same cache, from the same budget.
        ``judge.batched(poll_s=60)``."""
        return self._copy(batch_settings(self.settings, options or BatchOptions(**option_values)))

    def count_copy(self, copy: Judge) -> None:
        """Add what ``copy`` asked to this Judge's ``usage`` and ``reported_models``: a run that asks through a copy
        it makes and lets go (``batch=True``) counts on the Judge it was given (it made 24 calls while ``judge.usage``
        said 0)."""
        usage = copy.usage
        for model, count in copy.reported_models.items():
            self._reported.record(self.model, model, count)
        with self._usage_lock:
            self._usage.add(usage)

    def _copy(self, settings: JudgeSettings) -> Judge:
        judge = object.__new__(type(self))
        judge._start(settings, self.endpoint_modes, self.budget)
        return judge

    def __repr__(self) -> str:
        """The settings that differ from their defaults; the base URL without credentials, never the key."""
        shown = dict(self.settings.__repr_args__())
        changed = [f"{s.name}={shown[s.name]!r}" for s in declared(type(self.settings)) if shown.get(s.name, s.default) != s.default]
        return f"{type(self).__name__}({', '.join(changed)})"

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
        requests = list(requests)
        return run_sync(self.aask_many(requests, progress=progress, desc=desc), rows=len(requests))

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


def _derive(cls: type[Judge]) -> None:
    """``cls``'s parameters (its ``__signature__``), their list in its docstring and its read-only attributes, from
    the settings ``cls.settings_type`` declares."""
    settings = declared(cls.settings_type)
    kind = {True: inspect.Parameter.POSITIONAL_OR_KEYWORD, False: inspect.Parameter.KEYWORD_ONLY}
    cls.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(s.name, kind[s.positional], default=s.default, annotation=s.field.annotation) for s in settings])
    for name in [s.name for s in settings if s.field.repr] + ["shown_url", "endpoint_label", "cache_endpoint"]:
        setattr(cls, name, _ReadOnly(name))
    listed = "".join(f"\n    - ``{s.name}`` ({s.shown_default()}): {s.help}" for s in settings)
    cls.__doc__ = f"{cls.__doc__ or ''}\n    Settings:\n{listed}\n"


_derive(Judge)
