"""The response mode each endpoint accepted: found by one probing request, then used by every other.

Lifetime and sharing: an ``EndpointModes`` remembers, per endpoint (base URL and model), the mode a call was
accepted in, for as long as it lives, and no longer: nothing is kept for the process. Each ``Judge`` the
constructor makes has one of its own, so probing costs one rejected call per Judge, not one per row;
``Judge.with_limits`` and ``Judge.batched`` hand their copies the same one. A pickled Judge carries none:
unpickled, it starts its own (a Spark worker finds the mode for itself), as does ``Judge.from_settings`` unless
given one (``modes=``).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .answers import ResponseMode
from .limits import Limiter

T = TypeVar("T")


class EndpointMode:
    """What is known of one endpoint's response mode, and the turn to probe for it while it is unknown."""

    def __init__(self) -> None:
        self._mode: ResponseMode | None = None
        self._probe = Limiter(1)  # held by the one request that probes; the others wait for its finding

    @property
    def mode(self) -> ResponseMode | None:
        """The mode a call to this endpoint was accepted in, once one was."""
        return self._mode

    def remember(self, mode: ResponseMode) -> None:
        """Record the mode a call was accepted in."""
        self._mode = mode

    async def probing(self, ask: Callable[[], Awaitable[T]]) -> T:
        """Run ``ask``: alone while the mode is unknown (so one request finds it), concurrently once it is known."""
        if self._mode is None:
            async with self._probe:
                if self._mode is None:
                    return await ask()
        return await ask()


class EndpointModes:
    """The ``EndpointMode`` of each endpoint, keyed by base URL and model; safe across threads and event loops."""

    def __init__(self) -> None:
        self._endpoints: dict[tuple[str, str], EndpointMode] = {}
        self._lock = threading.Lock()

    def endpoint(self, base_url: str, model: str) -> EndpointMode:
        """The entry for ``model`` at ``base_url`` (made on first use)."""
        with self._lock:
            entry = self._endpoints.get((base_url, model))
            if entry is None:
                entry = self._endpoints[(base_url, model)] = EndpointMode()
            return entry
