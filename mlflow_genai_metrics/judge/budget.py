"""A Judge's budget: at most ``max_calls`` HTTP calls and ``max_cost_usd`` of cost, whatever the concurrency.

Each HTTP attempt reserves its worst case before it is sent (one call, and the cost of its estimated prompt tokens
plus its ``max_tokens``, or ``COMPLETION_ALLOWANCE`` when it names none) and settles to what the endpoint reported
after. A reservation that would pass the budget waits while calls in flight may still settle below their worst
case, and fails with ``BudgetExhausted`` (the request's ``budget`` error) once what is spent leaves it no room. The
budget holds across every thread and event loop using one Judge, like the ``Limiter``; nothing polls.

A reply whose token counts no request like its own could produce (more completion tokens than its ``max_tokens``,
more prompt tokens than its bytes allow: ``credible_usage``) is priced at its reservation, not at what it reports,
so spending passes the cap by no more than what one call's prompt may hold beyond its estimate.

Rows, not calls, are what a run needs finished: ``Budget.earmark`` sets aside what a row's calls will take before
its first call, and a row whose earmark does not fit waits while rows under way may leave room (so a short
budget finishes the rows it starts instead of starting every row). A row's calls draw from its earmark
(``drawing_from`` carries it in a context variable, which the tasks a row starts copy); what is left returns when
the row ends. Calls asked without an earmark (``Judge.ask`` on its own) reserve exactly as before. A row may also
name calls it can do without (the order check's, which only measure): they are set aside with the rest whenever
they fit, and left out, the row told so (``Earmark.optional``), only when nothing under way can leave room for them.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .records import Prices
from .replies import CallResult
from .tokens import MOST_UNBOUNDED_COMPLETION_TOKENS, estimate_prompt_tokens, most_prompt_tokens

# The completion tokens a request that names no max_tokens is taken to need at most (every pass of the package names
# its own; set Judge(max_tokens=...) for a tighter hold).
COMPLETION_ALLOWANCE = 4096


def worst_cost(prices: Prices | None, messages: list[dict[str, str]], response_format: dict | None, max_tokens: int | None) -> float:
    """The most one call can cost: its estimated prompt and its ``max_tokens`` (or the stated allowance); 0 without
    prices (the budget then counts calls only)."""
    if prices is None:
        return 0.0
    return prices.cost(estimate_prompt_tokens(messages, response_format), max_tokens or COMPLETION_ALLOWANCE)


def credible_usage(
    result: CallResult, messages: list[dict[str, str]], response_format: dict | None, max_tokens: int | None
) -> tuple[CallResult, bool]:
    """The token counts to count and price a reply at, and whether its own were implausible: more completion tokens
    than the request's ``max_tokens`` (``MOST_UNBOUNDED_COMPLETION_TOKENS`` when it names none) or more prompt
    tokens than ``most_prompt_tokens``, or one count without the other. An implausible reply counts as its
    reservation's worst case (the estimated prompt and ``max_tokens``; a missing count alone as its own worst case):
    a reply reporting 10^12 tokens is a broken count, not a two-million-dollar call."""
    most_completion = max_tokens or MOST_UNBOUNDED_COMPLETION_TOKENS
    if not result.prompt_tokens and not result.completion_tokens:  # no counts at all: settled at the reservation
        return result, False
    if not result.prompt_tokens or result.completion_unreported:
        # One count and not the other: the missing one was read as 0, and a reply billed 1,000 completion tokens a call
        # was priced at its prompt alone (a $0.10 budget spent $0.21). The missing one counts as its worst case. (A
        # prompt is never 0 tokens; a reply is, when empty: a stated 0 completion tokens is a count, priced as 0.)
        return result.model_copy(update={
            "prompt_tokens": result.prompt_tokens or estimate_prompt_tokens(messages, response_format),
            "completion_tokens": result.completion_tokens or max_tokens or COMPLETION_ALLOWANCE,
        }), True
    if result.completion_tokens <= most_completion and result.prompt_tokens <= most_prompt_tokens(messages, response_format):
        return result, False
    worst = result.model_copy(update={
        "prompt_tokens": estimate_prompt_tokens(messages, response_format),
        "completion_tokens": max_tokens or COMPLETION_ALLOWANCE,
        "cached_prompt_tokens": 0,
    })
    return worst, True


def settled_cost(held: Reservation, reply: CallResult | None, *, refused: bool, prices: Prices | None) -> float:
    """What a sent call costs its budget: the tokens ``reply`` reports (``credible_usage``'s); nothing when the endpoint
    ``refused`` it with an HTTP error status; else its reservation's worst case, since the endpoint may have processed
    it without saying (a timeout, a dropped connection, a reply without token counts or not a chat completion, a batch
    line that ran and cannot be read). Online and batch calls alike."""
    if reply is not None and (reply.prompt_tokens or reply.completion_tokens):
        return prices.cost(reply.prompt_tokens, reply.completion_tokens, reply.cached_prompt_tokens) if prices else 0.0
    return 0.0 if refused else held.cost_usd


class BudgetExhausted(Exception):
    """This call would pass the budget: it is not sent."""


@dataclass(frozen=True)
class Reservation:
    """What one call holds of the budget until it settles."""

    cost_usd: float


@dataclass(eq=False)
class Earmark:
    """What one row has set aside of a budget for its calls and not drawn yet."""

    budget: Budget
    calls: int
    cost_usd: float
    optional: bool = True  # the calls the row can do without are set aside too (False: the row goes without them)


# The earmark the calls of the running task (a row's) draw from; None outside a row. Tasks copy it when created.
_EARMARK: ContextVar[Earmark | None] = ContextVar("mgm_budget_earmark", default=None)


@contextmanager
def drawing_from(earmark: Earmark | None) -> Iterator[None]:
    """Within this block (and the tasks started in it) calls reserve from ``earmark`` first."""
    token = _EARMARK.set(earmark)
    try:
        yield
    finally:
        _EARMARK.reset(token)


class Budget:
    """``max_calls`` and ``max_cost_usd`` (None: no limit) for every call of one Judge, reserved before, settled after."""

    def __init__(self, max_calls: int | None = None, max_cost_usd: float | None = None) -> None:
        self.max_calls = max_calls
        self.max_cost_usd = max_cost_usd
        self._calls = 0  # settled
        self._cost = 0.0
        self._held_calls = 0  # reserved, not settled yet: in flight
        self._held_cost = 0.0
        self._marked_calls = 0  # earmarked by rows under way, not drawn yet
        self._marked_cost = 0.0
        self._rows = 0  # rows under way (earmarks open)
        self._refused = False  # has a call been refused? (then a row that may not fit is not tried)
        self._waiters: list[asyncio.Future[None]] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        """Calls sent and settled."""
        with self._lock:
            return self._calls

    @property
    def cost_usd(self) -> float:
        """Cost settled so far."""
        with self._lock:
            return self._cost

    def restrict(self, max_calls: int | None, max_cost_usd: float | None) -> None:
        """Lower the limits to at most ``max_calls`` and ``max_cost_usd`` (None: that one as it is); never raises
        them. A Spark task's copy of a Judge keeps to its partition's part of the budget so."""
        with self._lock:
            if max_calls is not None:
                self.max_calls = max_calls if self.max_calls is None else min(self.max_calls, max_calls)
            if max_cost_usd is not None:
                self.max_cost_usd = max_cost_usd if self.max_cost_usd is None else min(self.max_cost_usd, max_cost_usd)

    def shares(self, weights: Sequence[int]) -> list[tuple[int | None, float | None]]:
        """What is left of this budget (``max_calls``, ``max_cost_usd``; None where unlimited) split into parts in
        proportion to ``weights`` (a part's rows, say): the calls by largest remainder, so the parts add up to what
        is left and never more. Each part can be a Judge's budget of its own (Spark's partitions)."""
        total = sum(weights)
        fractions = [weight / total if total else 0.0 for weight in weights]
        with self._lock:
            calls_left = None if self.max_calls is None else max(self.max_calls - self._calls, 0)
            cost_left = None if self.max_cost_usd is None else max(self.max_cost_usd - self._cost, 0.0)
        calls: list[int | None] = [None] * len(weights)
        if calls_left is not None:
            exact = [calls_left * fraction for fraction in fractions]
            whole = [math.floor(share) for share in exact]
            leftover = calls_left - sum(whole) if total else 0
            for part in sorted(range(len(weights)), key=lambda part: exact[part] - whole[part], reverse=True)[:leftover]:
                whole[part] += 1
            calls = list(whole)
        # Rounded down a hair, so that the parts' float sum cannot pass what is left.
        costs = [None if cost_left is None else cost_left * fraction * (1 - 1e-12) for fraction in fractions]
        return list(zip(calls, costs))

    def _refusal(self, cost_usd: float, *, held: bool) -> str | None:
        """Why one more call of worst case ``cost_usd`` does not fit (with the calls in flight, if ``held``)."""
        calls = self._calls + (self._held_calls if held else 0)
        cost = self._cost + (self._held_cost if held else 0.0)
        if self.max_calls is not None and calls + 1 > self.max_calls:
            return f"max_calls={self.max_calls} reached: {self._calls} calls made"
        if self.max_cost_usd is not None and cost + cost_usd > self.max_cost_usd:
            return (f"max_cost_usd={self.max_cost_usd:g} would be passed: ${self._cost:.6f} spent, "
                    f"this call may cost up to ${cost_usd:.6f}")
        return None

    async def reserve(self, cost_usd: float) -> Reservation:
        """Hold one call of worst case ``cost_usd``; wait while calls in flight may leave room; raise
        ``BudgetExhausted`` when what is spent already leaves none. Within a row (``drawing_from``) the call is
        taken out of the row's earmark, as far as it goes."""
        earmark = _EARMARK.get()
        while True:
            with self._lock:
                refusal = self._refusal(cost_usd, held=False)
                if refusal is not None:
                    self._refused = True
                    raise BudgetExhausted(refusal)
                if self._refusal(cost_usd, held=True) is None:
                    self._held_calls += 1
                    self._held_cost += cost_usd
                    if earmark is not None and earmark.budget is self:
                        self._draw(earmark, cost_usd)
                    return Reservation(cost_usd)
                waiter = self._waiter()
            await self._wait(waiter)  # woken by the next settlement, to look again

    def _draw(self, earmark: Earmark, cost_usd: float) -> None:
        """One call of ``cost_usd`` leaves the earmark (what it lacks was free: see ``earmark``)."""
        calls, cost = min(earmark.calls, 1), min(earmark.cost_usd, cost_usd)
        earmark.calls -= calls
        earmark.cost_usd -= cost
        self._marked_calls -= calls
        self._marked_cost = max(self._marked_cost - cost, 0.0)

    async def earmark(self, calls: int, cost_usd: float, *, optional_calls: int = 0, optional_cost_usd: float = 0.0) -> Earmark:
        """Set aside ``calls`` calls of ``cost_usd`` in all for one row, and the ``optional_calls`` of
        ``optional_cost_usd`` it can do without, out of what no call holds and no other row has set aside; wait while
        rows under way or calls in flight may leave room. Once nothing can, the optional calls are left out
        (``Earmark.optional`` False), then a row whose calls do not fit raises ``BudgetExhausted``, and one whose
        cost (a worst case) does not fit is let through alone, holding all that is left, since its calls may cost
        less than their worst (unless a call was refused already: then it raises too)."""
        while True:
            with self._lock:
                marked = self._try_earmark(calls, cost_usd, optional_calls, optional_cost_usd)
                if marked is not None:
                    return marked
                waiter = self._waiter()
            await self._wait(waiter)

    def _fits(self, calls: int, cost_usd: float) -> tuple[bool, bool]:
        """Do ``calls`` and ``cost_usd`` fit beside what is spent, held and set aside? (call under the lock)"""
        taken_calls = self._calls + self._held_calls + self._marked_calls
        taken_cost = self._cost + self._held_cost + self._marked_cost
        return (self.max_calls is None or taken_calls + calls <= self.max_calls,
                self.max_cost_usd is None or taken_cost + cost_usd <= self.max_cost_usd)

    def _try_earmark(self, calls: int, cost_usd: float, optional_calls: int = 0, optional_cost_usd: float = 0.0) -> Earmark | None:
        """The row's earmark if it can start now (call under the lock); None to wait; raises when it never can."""
        calls_fit, cost_fits = self._fits(calls + optional_calls, cost_usd + optional_cost_usd)
        optional = True
        if calls_fit and cost_fits:
            calls, cost_usd = calls + optional_calls, cost_usd + optional_cost_usd
        else:
            if self._rows or self._held_calls:
                return None  # rows under way and calls in flight may leave room
            optional = not (optional_calls or optional_cost_usd)  # nothing will leave more: the row without them
            calls_fit, cost_fits = self._fits(calls, cost_usd)
        if not (calls_fit and cost_fits):
            if not calls_fit:
                raise BudgetExhausted(f"max_calls={self.max_calls} reached: {self._calls} calls made, this row needs {calls}")
            if self._refused:
                raise BudgetExhausted(f"max_cost_usd={self.max_cost_usd:g} would be passed: ${self._cost:.6f} spent, "
                                      f"this row may cost up to ${cost_usd:.6f}")
            cost_usd = max(self.max_cost_usd - self._cost, 0.0)  # type: ignore[operator]
        self._rows += 1
        self._marked_calls += calls
        self._marked_cost += cost_usd
        return Earmark(self, calls, cost_usd, optional)

    def close(self, earmark: Earmark) -> None:
        """The row ended: what its earmark still holds is free again."""
        with self._lock:
            self._rows -= 1
            self._marked_calls -= earmark.calls
            self._marked_cost = max(self._marked_cost - earmark.cost_usd, 0.0) if self._rows else 0.0
            earmark.calls, earmark.cost_usd = 0, 0.0
        self._wake_all()

    def _waiter(self) -> asyncio.Future[None]:
        """A future the next settlement or row end wakes (call under the lock)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    async def _wait(self, waiter: asyncio.Future[None]) -> None:
        try:
            await waiter
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def settle(self, reservation: Reservation, cost_usd: float) -> None:
        """The call ended: it counts as one call of ``cost_usd``, and what it held beyond is free again."""
        self._end(reservation, calls=1, cost_usd=cost_usd)

    def release(self, reservation: Reservation) -> None:
        """The call was never sent (cancelled first): it counts nothing."""
        self._end(reservation, calls=0, cost_usd=0.0)

    def _end(self, reservation: Reservation, *, calls: int, cost_usd: float) -> None:
        with self._lock:
            self._held_calls -= 1
            # Nothing in flight: exactly nothing held (no float residue from the subtractions).
            self._held_cost = max(self._held_cost - reservation.cost_usd, 0.0) if self._held_calls else 0.0
            self._calls += calls
            self._cost += cost_usd
        self._wake_all()

    def _wake_all(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            try:
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
