"""Batch mode: a Judge's calls answered through batch files instead of one HTTP call each.

``BatchSender.send`` takes the place of ``Transport.send`` when a conversation is played (``conversation.play``), so
the cache's replay, validation, the repair turn and ``cache.put`` are exactly the online path's: only the way a call
reaches the endpoint differs. A call waits in its event loop's queue; once no new call has come for several turns
of the loop and ``quiet_s``, every waiting call goes out as one batch (``runners``), and each waiting
conversation gets its line's outcome and moves on. Calls that depend on earlier answers (verification after the
claims, a ``no_claims`` re-ask, a repair turn) come while the loop is busy with those answers, and make the next
batch. A batch sent too early costs one more batch, never another answer: each call gets its own line's result.

Resuming: every submitted batch is recorded beside the cache (``BatchStore``) by the calls it holds, so a run
started again polls the batch its calls are already in; a rerun after it ended finds every answer in the cache.
An expired batch's undone lines are asked again in a new batch (``max_resubmits`` times, then ``batch_expired``);
a failed or cancelled batch is a ``batch_failed`` error for its requests alone. The budget holds as online: each
call reserves its worst case (at the batch prices) when queued and settles to its reported usage.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..budget import Budget, BudgetExhausted, Reservation, credible_usage, settled_cost, worst_cost
from ..modes import EndpointMode
from ..records import JudgeError, Prices, Usage
from ..replies import CallResult
from ..settings import JudgeSettings
from ..transport import Call, CallFailed
from .files import BatchLine, LineOutcome, batch_line
from .options import BatchOptions
from .runners import BatchEnded, BatchGone, BatchRead, runner_for
from .store import BatchStore

log = logging.getLogger(__name__)

QUIET_TURNS = 20  # turns of the event loop with no new call before the calls waiting are submitted


def batch_settings(settings: JudgeSettings, options: BatchOptions | bool | None) -> JudgeSettings:
    """``settings`` in batch mode with ``options`` (True: the defaults; None or False: online, as they are).

    In batch mode ``max_concurrency`` is how many requests may wait for one batch: ``options.max_lines``."""
    if options is None or options is False:
        return settings
    options = BatchOptions() if options is True else options
    return settings.replaced(batch=options, max_concurrency=options.max_lines)


def _failed(kind: str, message: str) -> CallFailed:
    return CallFailed(JudgeError(kind=kind, message=message), rejects_mode=False)  # type: ignore[arg-type]


@dataclass
class _Line:
    """One line waiting for, or in, a batch, and the conversations waiting for its outcome."""

    line: BatchLine
    outcome: asyncio.Future[LineOutcome]
    waiters: int = 0


@dataclass
class _LoopQueue:
    """The calls of one event loop: waiting to be submitted, and in batches running."""

    waiting: dict[str, _Line] = field(default_factory=dict)
    running: dict[str, _Line] = field(default_factory=dict)
    jobs: dict[asyncio.Task[None], list[_Line]] = field(default_factory=dict)
    arrivals: int = 0
    flusher: asyncio.Task[None] | None = None


class BatchSender:
    """A Judge's way to its endpoint in batch mode (``settings.batch``): ``send`` has ``Transport.send``'s contract."""

    def __init__(self, settings: JudgeSettings, budget: Budget | None, store: BatchStore | None, known: EndpointMode) -> None:
        self.settings, self.budget, self.store = settings, budget, store
        self.options = settings.batch or BatchOptions()
        self.prices: Prices | None = settings.prices.batch() if settings.prices is not None else None
        self.runner = runner_for(settings)
        # Batch mode never probes: the endpoint's mode if known now, else the one the options name.
        self.endpoint = EndpointMode()
        self.endpoint.remember(known.mode or self.options.response_mode)
        self.submitted: list[str] = []  # ids of the batches this sender submitted, in order
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, settings: JudgeSettings, budget: Budget | None, known: EndpointMode) -> BatchSender | None:
        """The sender of a Judge with these settings: None online; in batch mode, one recording its batches in the
        cache folder (none without a cache: no resuming)."""
        if settings.batch is None:
            return None
        return cls(settings, budget, BatchStore(settings.cache_dir) if settings.cache_dir is not None else None, known)

    # -- one call ------------------------------------------------------------------------------------------------------

    async def send(self, call: Call, usage: Usage) -> CallResult:
        """Queue ``call`` for the next batch and wait for its line's outcome; count it in ``usage`` (the request's).
        Raises ``CallFailed`` for a line that failed, as the transport does for a call."""
        line = batch_line(self.settings, call)
        held = await self._reserve(call, usage)
        started = time.perf_counter()
        try:
            outcome, first = await self._wait(line)
        except BaseException:
            if held is not None and self.budget is not None:
                self.budget.release(held)
            raise
        if not first or _unanswered(outcome):
            # The same call asked twice at once is one line: the first asker pays for it. A line no batch ran (its
            # window expired, in every resubmission; its batch failed validation or was cancelled) was never
            # answered: it is no call and costs nothing.
            if held is not None and self.budget is not None:
                self.budget.release(held)
        else:
            self._account(usage, started, call, outcome, held)
        if isinstance(outcome, CallFailed):
            raise outcome
        return outcome

    async def _reserve(self, call: Call, usage: Usage) -> Reservation | None:
        if self.budget is None:
            return None
        try:
            return await self.budget.reserve(worst_cost(self.prices, call.messages, call.response_format, call.max_tokens))
        except BudgetExhausted as exc:
            raise _failed("budget", f"not sent: the judge's budget is spent ({exc})") from None

    def _account(self, usage: Usage, started: float, call: Call, outcome: LineOutcome, held: Reservation | None) -> None:
        reply, implausible = (None, False) if isinstance(outcome, CallFailed) else credible_usage(
            outcome, call.messages, call.response_format, call.max_tokens)
        usage.count_call(time.perf_counter() - started, reply)
        usage.batched_calls += 1
        usage.implausible_usage += implausible
        if held is not None and self.budget is not None:
            # As online: a line refused with an HTTP error status costs nothing; one that ran without saying what
            # it cost (no usage, not a chat completion, no readable line) costs its worst case, never nothing.
            refused = isinstance(outcome, CallFailed) and outcome.error.status_code is not None
            self.budget.settle(held, settled_cost(held, reply, refused=refused, prices=self.prices))

    # -- the queue of an event loop --------------------------------------------------------------------------------------

    def _queue(self) -> _LoopQueue:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _LoopQueue()
        return queue

    async def _wait(self, line: BatchLine) -> tuple[LineOutcome, bool]:
        queue = self._queue()
        entry = queue.running.get(line.custom_id) or queue.waiting.get(line.custom_id)
        first = entry is None
        if entry is None:
            entry = queue.waiting[line.custom_id] = _Line(line, asyncio.get_running_loop().create_future())
            queue.arrivals += 1
            if queue.flusher is None or queue.flusher.done():
                queue.flusher = asyncio.ensure_future(self._flush_when_quiet(queue))
        entry.waiters += 1
        try:
            return await asyncio.shield(entry.outcome), first
        except asyncio.CancelledError:
            entry.waiters -= 1
            self._abandon(queue, entry)
            raise

    def _abandon(self, queue: _LoopQueue, entry: _Line) -> None:
        """Nobody waits for ``entry`` any more: it is not submitted, and a batch nobody waits for is not polled (it
        stays recorded: a run started again polls it)."""
        if entry.waiters:
            return
        if queue.waiting.get(entry.line.custom_id) is entry:
            del queue.waiting[entry.line.custom_id]
        for job, lines in list(queue.jobs.items()):
            if entry in lines and not any(other.waiters for other in lines):
                job.cancel()

    async def _flush_when_quiet(self, queue: _LoopQueue) -> None:
        while queue.waiting:
            seen = queue.arrivals
            for _ in range(QUIET_TURNS):
                await asyncio.sleep(0)
            if self.options.quiet_s:
                await asyncio.sleep(self.options.quiet_s)
            if queue.arrivals != seen:
                continue
            lines = list(queue.waiting.values())[: self.options.max_lines]
            for entry in lines:
                del queue.waiting[entry.line.custom_id]
                queue.running[entry.line.custom_id] = entry
            job = asyncio.ensure_future(self._run_job(queue, lines))
            queue.jobs[job] = lines

    async def _run_job(self, queue: _LoopQueue, lines: list[_Line]) -> None:
        def deliver(outcomes: dict[str, LineOutcome]) -> None:
            for entry in lines:  # each batch's answers as soon as it is read, whatever batches are still running
                outcome = outcomes.get(entry.line.custom_id)
                if outcome is not None and not entry.outcome.done():
                    entry.outcome.set_result(outcome)

        try:
            outcomes = await self.complete([entry.line for entry in lines], deliver)
        except BaseException as exc:
            for entry in lines:
                if not entry.outcome.done():
                    if isinstance(exc, asyncio.CancelledError):
                        entry.outcome.cancel()
                    else:
                        entry.outcome.set_exception(exc)
                        entry.outcome.add_done_callback(lambda f: f.exception())  # read: no "never retrieved" warning
            if not isinstance(exc, Exception):
                raise
        else:
            for entry in lines:
                outcome = outcomes.get(entry.line.custom_id) or _failed("batch_failed", "no batch gave a result for this request")
                if not entry.outcome.done():
                    entry.outcome.set_result(outcome)
        finally:
            for entry in lines:
                if not entry.outcome.done():  # whatever happened, nobody is left waiting forever
                    entry.outcome.cancel()
                if queue.running.get(entry.line.custom_id) is entry:
                    del queue.running[entry.line.custom_id]
            queue.jobs.pop(asyncio.current_task(), None)  # type: ignore[arg-type]

    # -- one set of lines, through as many batches as it takes -------------------------------------------------------------

    async def complete(self, lines: list[BatchLine],
                       deliver: Callable[[dict[str, LineOutcome]], None] | None = None) -> dict[str, LineOutcome]:
        """Every line's outcome: from a batch already submitted with it (resumed), else from a new one; lines an
        expired batch left undone go in a new batch, ``max_resubmits`` times at most. ``deliver`` is given each
        batch's final outcomes as soon as that batch is read: a batch resumed beside a new one marks itself read
        (``BatchStore.end``) when it ends, so its answers must reach their callers (and the cache) then, not when
        the slowest batch of the round ends (a run interrupted meanwhile paid for them again)."""
        todo = {line.custom_id: line for line in lines}
        outcomes: dict[str, LineOutcome] = {}
        expired_rounds = 0

        async def one_batch(batch_id: str | None, group: list[BatchLine]) -> dict[str, LineOutcome]:
            result = await self._one_batch(batch_id, group)
            if deliver is not None:
                deliver({custom_id: outcome for custom_id, outcome in result.items() if custom_id in todo and not _expired(outcome)})
            return result

        while todo:
            recorded = self.store.submitted(todo) if self.store is not None else {}
            groups: dict[str | None, list[BatchLine]] = defaultdict(list)
            for custom_id, line in todo.items():
                groups[recorded.get(custom_id)].append(line)
            results = await asyncio.gather(*(one_batch(batch_id, group) for batch_id, group in groups.items()))
            for result in results:
                outcomes.update((custom_id, outcome) for custom_id, outcome in result.items() if custom_id in todo)
            undone = {custom_id: line for custom_id, line in todo.items() if custom_id not in outcomes or _expired(outcomes[custom_id])}
            expired_rounds += bool(undone and None in groups)  # a resumed batch's leftovers cost no resubmission
            if expired_rounds > self.options.max_resubmits:
                for custom_id in undone:
                    outcomes.setdefault(custom_id, _failed("batch_expired", "no batch answered this request"))
                break
            for custom_id in undone:
                outcomes.pop(custom_id, None)
            todo = undone
        return outcomes

    async def _one_batch(self, batch_id: str | None, lines: list[BatchLine]) -> dict[str, LineOutcome]:
        """Submit ``lines`` (unless ``batch_id`` already holds them) and wait for the batch's outcomes."""
        if batch_id is None:
            batch_id = await self.runner.submit(lines)
            self.submitted.append(batch_id)
            if self.store is not None:
                self.store.record(batch_id, [line.custom_id for line in lines])
        else:
            log.info("polling batch %s, submitted by an earlier run, for %d requests", batch_id, len(lines))
        try:
            read = await self.runner.wait(batch_id)
        except BatchGone:
            read, missing = BatchRead({}), None  # asked again in a new batch
        except BatchEnded as ended:  # refused (validation), or cancelled: only what it ran before is answered
            read, missing = ended.ran, _failed("batch_failed", str(ended))
            missing.unanswered = True  # type: ignore[attr-defined]
        else:
            if read.expired:  # the window ended before these lines ran (the error file need not list them)
                missing = _failed("batch_expired", f"batch {batch_id} expired before running this request")
            else:
                missing = _failed("batch_failed", f"batch {batch_id} ended with no result for this request" + (
                    f" ({len(read.unreadable)} line(s) of its output could not be read; the first: {read.unreadable[0]})"
                    if read.unreadable else ""))
        if read.unreadable:
            log.warning("batch %s: %d line(s) of its output are not batch results, the first: %s", batch_id,
                        len(read.unreadable), read.unreadable[0])
        outcomes = dict(read.outcomes)
        if missing is not None:
            for line in lines:
                outcomes.setdefault(line.custom_id, missing)
        if self.store is not None:
            self.store.end(batch_id)
        return outcomes

    def close(self) -> None:
        self.runner.close()
        if self.store is not None:
            self.store.close()


def _expired(outcome: LineOutcome) -> bool:
    return isinstance(outcome, CallFailed) and outcome.error.kind == "batch_expired"


def _unanswered(outcome: LineOutcome) -> bool:
    """A line no batch ran: expired, or in a batch that ended without running (``BatchEnded``)."""
    return _expired(outcome) or getattr(outcome, "unanswered", False)
