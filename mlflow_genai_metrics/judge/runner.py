"""Synchronous calls run on one event loop in a daemon thread of this process.

``Judge.ask`` and ``Judge.ask_many`` hand their coroutine to it and wait, so the synchronous and the asynchronous
paths are one code path (one deadline per HTTP attempt, one connection pool per Judge), and a caller whose own loop
is running (Jupyter) is never asked to nest it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None

# How often a caller waiting on the loop wakes. A Ctrl-C (SIGINT) that the kernel hands to another thread of the
# process only sets a flag: the main thread runs its handler (KeyboardInterrupt) when it next runs Python code, which
# a wait that never wakes put off until the whole call was done.
WAKE_S = 0.2


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop, started on first use (and again in a forked child, whose thread is gone)."""
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mgm-judge-loop", daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def started_loop() -> asyncio.AbstractEventLoop | None:
    """The background loop if this process has started it, else None (nothing is started)."""
    with _lock:
        return _loop if _pid == os.getpid() else None


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the background loop and wait for it; an interrupt (Ctrl-C) cancels it."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:  # waiting here would block the loop that has to do the work
        coroutine.close()
        raise RuntimeError("a synchronous Judge method was called from the judge's own event loop; await the async one")
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        while not concurrent.futures.wait([future], timeout=WAKE_S).done:
            pass  # awake: a pending KeyboardInterrupt is raised here
        return future.result()
    except BaseException:
        future.cancel()
        raise
