"""A Ctrl-C while a synchronous call waits on the judge's loop stops it, even when Python drops the
KeyboardInterrupt: a signal's handler runs wherever the main thread is, and one raised inside a finalizer or a
garbage-collector callback is printed and dropped ("Exception ignored in ..."). A killed ``mgm evaluate`` once
finished its run and exited 0 that way (tests/test_reliability.py)."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest

from mlflow_genai_metrics.judge.runner import run_sync


@pytest.fixture(autouse=True)
def python_handler():
    """Python's own SIGINT handler for the test (a Spark session of the same worker puts its own in)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_whose_exception_was_dropped_still_stops_the_wait():
    def interrupt_dropped() -> None:
        time.sleep(0.3)
        handler = signal.getsignal(signal.SIGINT)
        try:
            handler(signal.SIGINT, None)  # the handler runs, and its exception is lost (here: in this thread)
        except KeyboardInterrupt:
            pass

    helper = threading.Thread(target=interrupt_dropped)
    helper.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_sync(asyncio.sleep(5))
    helper.join()
    assert time.monotonic() - started < 4  # the sleep alone takes 5 s; 0.3 s and a wake are expected
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler is back


def test_a_wait_that_is_not_interrupted_returns_its_result_and_puts_the_handler_back():
    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 42

    assert run_sync(answer()) == 42 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
