"""A Judge's budget: at most ``max_calls`` HTTP calls and ``max_cost_usd`` of cost, whatever the concurrency.

Each HTTP attempt reserves its worst case before it is sent (one call, and the cost of its estimated prompt tokens
plus its ``max_tokens``, or ``COMPLETION_ALLOWANCE`` when it names none) and settles to what the endpoint reported
after. A reservation that would pass the budget waits while calls in flight may still settle below their worst
case, and fails with ``BudgetExhausted`` (the request's ``budget`` error) once what is spent leaves it no room. The
budget holds across every thread and event loop using one Judge, like the ``Limiter``; nothing polls.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from .records import Prices
from .tokens import estimate_prompt_tokens

__all__ = ["COMPLETION_ALLOWANCE", "Budget", "BudgetExhausted", "Reservation", "worst_cost"]

# The completion tokens a request that names no max_tokens is taken to need at most (every pass of the package names
# its own; set Judge(max_tokens=...) for a tighter hold).
COMPLETION_ALLOWANCE = 4096


def worst_cost(prices: Prices | None, messages: list[dict[str, str]], response_format: dict | None, max_tokens: int | None) -> float:
    """The most one call can cost: its estimated prompt and its ``max_tokens`` (or the stated allowance); 0 without
    prices (the budget then counts calls only)."""
    if prices is None:
        return 0.0
    return prices.cost(estimate_prompt_tokens(messages, response_format), max_tokens or COMPLETION_ALLOWANCE)


class BudgetExhausted(Exception):
    """This call would pass the budget: it is not sent."""


@dataclass(frozen=True)
class Reservation:
    """What one call holds of the budget until it settles."""

    cost_usd: float


class Budget:
    """``max_calls`` and ``max_cost_usd`` (None: no limit) for every call of one Judge, reserved before, settled after."""

    def __init__(self, max_calls: int | None = None, max_cost_usd: float | None = None) -> None:
        self.max_calls = max_calls
        self.max_cost_usd = max_cost_usd
        self._calls = 0  # settled
        self._cost = 0.0
        self._held_calls = 0  # reserved, not settled yet: in flight
        self._held_cost = 0.0
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
        ``BudgetExhausted`` when what is spent already leaves none."""
        while True:
            with self._lock:
                refusal = self._refusal(cost_usd, held=False)
                if refusal is not None:
                    raise BudgetExhausted(refusal)
                if self._refusal(cost_usd, held=True) is None:
                    self._held_calls += 1
                    self._held_cost += cost_usd
                    return Reservation(cost_usd)
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
            try:
                await waiter  # woken by the next settlement, to look again
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
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            try:
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
