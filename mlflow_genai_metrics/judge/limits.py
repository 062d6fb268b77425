"""What bounds a Judge's HTTP calls: how many at once (``Limiter``), how many started per second (``Pace``) and how
long each may take in total (``within_deadline``).

The limiter and the pace hold across every thread and event loop that use one Judge (MLflow's scorer threads each
run their own loop; the synchronous methods run on a background loop): ``asyncio.Semaphore`` belongs to one loop,
``threading.Semaphore`` would block it, and ``aiolimiter`` and the like belong to one loop too.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable
from typing import TypeVar

from .errors import DeadlineExceeded

T = TypeVar("T")


class Limiter:
    """At most ``slots`` holders at once, whichever thread or event loop they run on, served first come, first
    served. A waiter sleeps on a future of its own loop until a holder hands it the slot; nothing polls, so any
    number of coroutines may wait (``async with limiter: ...``).
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a limiter needs at least one slot, got {slots}")
        self.slots = slots
        self._free = slots
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        """Slots held now."""
        with self._lock:
            return self.slots - self._free

    async def acquire(self) -> None:
        """Wait for a slot and take it."""
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                still_waiting = waiter in self._waiters
                if still_waiting:
                    self._waiters.remove(waiter)
            if not still_waiting:  # the slot was handed over as the waiter was cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Give the slot back: to the longest waiter, else to the pool."""
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                loop = waiter.get_loop()
                try:
                    if loop is _running_loop():  # its own thread: no need to wake the loop through its self-pipe
                        loop.call_soon(_grant, waiter)
                    else:
                        loop.call_soon_threadsafe(_grant, waiter)
                    return
                except RuntimeError:  # its loop is closed: nobody is left to take the slot there
                    continue
            self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _grant(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # a cancelled waiter releases the slot itself
        waiter.set_result(None)


class Pace:
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


async def within_deadline(work: Awaitable[T], timeout_s: float) -> T:
    """``work``, or ``DeadlineExceeded`` after ``timeout_s`` in total: the HTTP client's own timeout bounds each read,
    and a server that trickles a byte at a time never lets one run out."""
    if sys.version_info >= (3, 11):  # a deadline on this task; wait_for would make a task per call
        try:
            async with asyncio.timeout(timeout_s):
                return await work
        except TimeoutError:
            raise DeadlineExceeded(timeout_s) from None
    try:  # pragma: no cover - Python 3.10
        return await asyncio.wait_for(work, timeout_s)
    except asyncio.TimeoutError:
        raise DeadlineExceeded(timeout_s) from None
