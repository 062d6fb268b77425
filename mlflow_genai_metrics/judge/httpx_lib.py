"""The HTTP library under the openai client (httpx2 from openai 3 on, httpx before), named once for the judge.

``placeholder_request`` is the request of an error that had no HTTP request of its own (a line of a batch's output
file; an attempt cancelled at its total deadline): openai's errors read their request (from openai 3.60 on they copy
it to drop credential headers), so one is always given.
"""

from __future__ import annotations

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - openai before 3
    import httpx  # type: ignore[no-redef]

Response = httpx.Response


def placeholder_request(url: str) -> httpx.Request:
    """A request carrying no credentials, for an error raised about ``url`` without one."""
    return httpx.Request("POST", url)


__all__ = ["Response", "httpx", "placeholder_request"]
