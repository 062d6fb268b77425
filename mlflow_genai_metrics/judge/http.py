"""The HTTP library under the Judge's openai client.

The openai package sends through httpx by default and offers aiohttp as its other backend
(``openai.DefaultAioHttpClient``, "for improved concurrency performance"). Measured here (docs/benchmarks.md: the
same 2,000 requests, 128 in flight) aiohttp costs about a third less CPU per request, which is what bounds a client
in front of a fast endpoint with many slots. So ``http_backend="auto"`` (the default) uses aiohttp on the Judge's
own event loop (every synchronous path: ``judge_summaries``, the CLI, the MLflow metrics), where the Judge closes
what it opened, and httpx on a caller's event loop (``await judge.aask``), which may end without telling it; and
httpx wherever the openai package offers no aiohttp backend, or for a base URL with credentials in it (aiohttp
refuses them beside the API key's header). ``"httpx"`` and ``"aiohttp"`` choose one everywhere.

The httpx client keeps as many connections alive as the Judge has slots: the openai package's default keeps 100,
so above 100 in flight every call past them would open and close a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from functools import cache
from typing import Any, Literal
from urllib.parse import urlparse

import openai

from .httpx_lib import httpx as _httpx

HttpBackend = Literal["auto", "aiohttp", "httpx"]


_KEEP_ALIVE = 100  # the openai package's default number of idle connections kept


@cache
def aiohttp_offered() -> bool:
    """Does the installed openai package offer its aiohttp backend (and is aiohttp installed)? Asked once."""
    make = getattr(openai, "DefaultAioHttpClient", None)
    if make is None:
        return False
    try:
        make().__class__  # noqa: B018 - constructing it is the test: without aiohttp it raises at once
    except (RuntimeError, ImportError):
        return False
    return True


def http_client(backend: HttpBackend, *, base_url: str, max_concurrency: int, own_loop: bool) -> Any:
    """The HTTP client for one openai client: aiohttp or httpx (see the module's docstring); ``own_loop``: it is
    made on the Judge's own event loop. A base URL with credentials in it gets httpx: aiohttp refuses them beside
    the API key's Authorization header."""
    parts = urlparse(base_url)
    if backend == "aiohttp" or (backend == "auto" and own_loop and not (parts.username or parts.password) and aiohttp_offered()):
        try:
            return openai.DefaultAioHttpClient()
        except RuntimeError as exc:
            raise RuntimeError(f"http_backend='aiohttp' needs the openai package's aiohttp backend: {exc}") from None
    limits = _httpx.Limits(max_connections=None, max_keepalive_connections=max(_KEEP_ALIVE, max_concurrency))
    return openai.DefaultAsyncHttpxClient(limits=limits)


def close_soon(loop: asyncio.AbstractEventLoop, client: openai.AsyncOpenAI, pid: int) -> None:
    """Close ``client`` on ``loop`` (its own, in process ``pid``) from any thread, without waiting: what a Judge
    dropped without ``close()`` leaves behind (aiohttp reports a session garbage-collected open as an error). In a
    forked child the loop's thread is gone: nothing to do."""
    if os.getpid() != pid or loop.is_closed() or not loop.is_running():
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        asyncio.run_coroutine_threadsafe(client.close(), loop)
