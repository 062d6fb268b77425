"""Sorting endpoint failures: retry, record against the row, or stop and tell the user what to fix."""

from __future__ import annotations

import datetime
import email.utils
import re
import time
from urllib.parse import parse_qsl, unquote, urlsplit

import openai

from .httpx_lib import placeholder_request
from .records import ErrorKind

_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_SECRET_NAME = re.compile(r"key|token|secret|passw|sig|auth", re.IGNORECASE)
_QUERY_VALUE = re.compile(r"([?&]([^=&#\s]+)=)([^&#\s]+)")
# What an endpoint's error says when it refuses the response mode asked (not our prompts' words: "JSON schema").
_MODE_WORDS = re.compile(r"response_format|response format|json_schema|json_object|structured output|guided_", re.IGNORECASE)


class JudgeConfigError(RuntimeError):
    """The endpoint refuses every request as configured (HTTP 401, 403, 404). Retrying cannot help.

    Raised, not recorded per row: every row would fail the same way. Answers already received are in the
    cache, so fixing the setting and rerunning loses nothing.
    """

    def __init__(self, message: str, *, status_code: int | None = None, served: str | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.served = served  # the models the endpoint lists, when the error is that it does not list the one asked


class DeadlineExceeded(openai.APITimeoutError):
    """An HTTP attempt ran past ``timeout_s`` in total (however steadily the server kept sending)."""

    def __init__(self, timeout_s: float) -> None:
        # No request object at hand once the attempt is cancelled; openai's error reads one (3.60 on copies it).
        openai.APIConnectionError.__init__(self, message=f"no complete reply within timeout_s={timeout_s:g}",
                                           request=placeholder_request("/chat/completions"))


def redact(text: str, secret: str | None) -> str:
    """Remove the API key (and any prefix of it a server echoes back) from a message."""
    if not secret or len(secret) < 4:
        return text
    text = text.replace(secret, "***")
    # Servers echo keys partly ("Incorrect API key provided: sk-abc...wxyz"); hide any run of 8+ of its chars.
    for width in range(len(secret) - 1, 7, -1):
        for start in range(0, len(secret) - width + 1):
            piece = secret[start : start + width]
            if piece in text:
                text = text.replace(piece, "***")
    return text


_JSON_ESCAPE = re.compile(r"\\(\\|/|u([0-9a-fA-F]{4}))")


def json_unescaped(text: str) -> str:
    """``text`` with the JSON escapes that mean the same once parsed undone (``\\/`` -> ``/``, ``\\u0041`` -> ``A``):
    what a key written with them becomes when the answer is read. An escaped backslash, quote, control character or
    surrogate stays escaped, so a JSON text stays the same JSON."""
    def plain(match: re.Match[str]) -> str:
        if match.group(1) == "/":
            return "/"
        if match.group(2) is None:  # an escaped backslash: kept, and what follows it is not an escape
            return match.group(0)
        char = chr(int(match.group(2), 16))
        return match.group(0) if char in '"\\' or ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF else char

    return _JSON_ESCAPE.sub(plain, text)


def redact_url(text: str) -> str:
    """Hide the credentials a URL can carry, wherever one appears in ``text``: ``user:password@`` becomes ``***@``,
    the value of a query parameter named like a key, token, secret, password or signature becomes ``***``."""
    text = _USERINFO.sub("***@", text)
    return _QUERY_VALUE.sub(lambda m: m.group(1) + "***" if _SECRET_NAME.search(m.group(2)) else m.group(0), text)


def url_secrets(url: str) -> list[str]:
    """The secrets in a URL (its password and secret-named query values, as written and decoded), for ``redact``."""
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [value for name, value in parse_qsl(parts.query) if _SECRET_NAME.search(name)]
    return sorted({form for secret in found for form in (secret, unquote(secret))}, key=len, reverse=True)


def is_retryable(exc: BaseException) -> bool:
    """429, 408, 409, 5xx, timeouts, dropped connections and bodies that are not a chat completion are worth
    another try."""
    if isinstance(exc, (openai.APIConnectionError, openai.APIResponseValidationError)):  # incl. APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException, now: float | None = None) -> float | None:
    """The server's ``Retry-After`` (seconds, an HTTP date as RFC 9110 allows, or ``retry-after-ms``), when it sent
    one; a date is read against ``now`` (default: the clock), a date past as 0."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    seconds = headers.get("retry-after")
    if seconds is not None:
        try:
            return max(float(seconds), 0.0)
        except ValueError:
            pass
        try:  # an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT"): it was ignored, and every retry spent while still limited
            when = email.utils.parsedate_to_datetime(seconds)
        except (TypeError, ValueError):
            return None  # neither: our own backoff
        if when.tzinfo is None:  # RFC 9110's dates are GMT
            when = when.replace(tzinfo=datetime.timezone.utc)
        return max(when.timestamp() - (time.time() if now is None else now), 0.0)
    return None


def _cause_kinds(exc: BaseException) -> list[set[str]]:
    """The class names (with their bases) of each exception ``exc`` was raised from, nearest first."""
    kinds = []
    cause = exc.__cause__
    while cause is not None:
        kinds.append({kind.__name__ for kind in type(cause).__mro__})
        cause = cause.__cause__
    return kinds


def is_unreachable(exc: BaseException) -> bool:
    """The connection could not be made at all (refused, unknown host), as opposed to one dropped mid-reply.

    Under httpx that is a ``ConnectError``; under aiohttp a ``ClientConnectorError``, which the openai package's
    aiohttp backend hands on as a connect *timeout*, so the timeout class alone cannot tell."""
    if not isinstance(exc, openai.APIConnectionError):
        return False
    return any(kinds & {"ConnectError", "ClientConnectorError"} for kinds in _cause_kinds(exc))


def _dropped(exc: BaseException) -> bool:
    """A connection aiohttp saw fail without any timeout (refused, reset, closed by the server) that the openai
    package's aiohttp backend hands on as a timeout."""
    return any("ClientConnectionError" in kinds and "TimeoutError" not in kinds for kinds in _cause_kinds(exc))


def unreachable_error(exc: BaseException, *, base_url: str) -> JudgeConfigError:
    return JudgeConfigError(
        f"cannot reach the judge at {base_url} ({exc.__cause__ or exc}): no call to it has succeeded yet. Is the server "
        "running, and are MGM_JUDGE_BASE_URL / base_url right? (Nothing was retried row by row.)"
    )


def is_mode_rejection(exc: BaseException) -> bool:
    """An answer that says "this endpoint does not accept this response_format": HTTP 400, 422, 500 or 501 whose
    error names the response format. OpenAI and vLLM answer 400 ("'response_format' of type 'json_schema' is not
    supported with this model", a validation error at ``response_format``), llama-cpp-python 500 (its validation
    error at ``('body', 'response_format', 'type')``), TGI 422 ("response_format: unknown variant"). A bare 5xx
    says nothing of the kind: it is a transient failure, retried as any other, so that one HTTP 500 on the first
    request does not switch the process to a weaker mode (and change the signature)."""
    if not (isinstance(exc, openai.APIStatusError) and exc.status_code in (400, 422, 500, 501)):
        return False
    return _MODE_WORDS.search(f"{exc.message} {exc.body}") is not None


def row_error_kind(exc: BaseException) -> ErrorKind:
    if isinstance(exc, openai.APITimeoutError) and not _dropped(exc):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIResponseValidationError):
        return "bad_reply"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429:
            return "rate_limited"
        if exc.status_code >= 500:
            return "server_error"
        return "bad_request"
    return "connection"


def config_error(exc: openai.APIStatusError, *, model: str, base_url: str, available: list[str] | None) -> JudgeConfigError:
    """A message that says what to fix for 401, 403 and 404."""
    status = exc.status_code
    if status == 401 and urlsplit(base_url).username:
        what = (
            f"The judge endpoint {base_url} rejected the credentials written in its base URL (HTTP 401): they are what "
            "was sent (no API key travels with them). Correct them in the base URL, or give the key alone with a base "
            "URL without credentials."
        )
    elif status == 401:
        what = (
            f"The judge endpoint {base_url} rejected the API key (HTTP 401). Set OPENAI_API_KEY (or pass "
            "api_key=) to a valid key for this endpoint; a local server accepts any non-empty string."
        )
    elif status == 403:
        what = (
            f"The judge endpoint {base_url} refused access to model {model!r} (HTTP 403). Check that this key's "
            "project or organisation may use the model, or choose another with MGM_JUDGE_MODEL."
        )
    else:
        known = f" The endpoint serves: {', '.join(available)}." if available else ""
        what = (
            f"Not found at {base_url} (HTTP 404): either model {model!r} is unknown there or the base URL is wrong "
            f"(an OpenAI-compatible server's base URL usually ends in /v1).{known} Set MGM_JUDGE_MODEL / "
            "MGM_JUDGE_BASE_URL or pass model= / base_url=."
        )
    return JudgeConfigError(what, status_code=status)


def is_config_error(exc: BaseException) -> bool:
    return isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403, 404)
