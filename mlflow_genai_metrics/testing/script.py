"""What a script of the ``ScriptedJudgeServer`` sees and sends back: the request, a reply or a fault to inject,
and the log entry the server keeps for each request. Plain records: they import without the server's
dependencies (the ``testing`` extra)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

FaultKind = Literal["rate_limit", "status", "disconnect", "raw"]


def count_tokens(text: str) -> int:
    """The scripted server's token count: whitespace-separated words."""
    return len(text.split())


@dataclass(frozen=True)
class Reply:
    """A successful chat completion. ``finish_reason="length"`` emulates a reply cut off by max_tokens;
    ``delay_s`` longer than the client's timeout emulates a reply that comes too late; ``trickle_s`` sends the body
    one byte every ``trickle_s`` seconds (no single read ever waits long, the whole reply takes long); ``model`` is
    the model id the reply reports (by default the one requested)."""

    content: str
    finish_reason: str = "stop"
    delay_s: float = 0.0
    trickle_s: float = 0.0
    model: str | None = None


@dataclass(frozen=True)
class Fault:
    """A failure to inject instead of a reply."""

    kind: FaultKind
    status: int = 500
    message: str = "injected fault"
    retry_after_s: float | None = None
    body: bytes = b""
    content_type: str | None = "application/json"
    code: str | None = None  # the error's ``code`` (OpenAI's, e.g. ``model_not_found``)

    @classmethod
    def rate_limit(cls, retry_after_s: float | None = 1.0) -> Fault:
        return cls("rate_limit", status=429, message="Rate limit reached", retry_after_s=retry_after_s)

    @classmethod
    def server_error(cls, status: int = 500, message: str = "internal server error") -> Fault:
        return cls("status", status=status, message=message)

    @classmethod
    def http(cls, status: int, message: str) -> Fault:
        return cls("status", status=status, message=message)

    @classmethod
    def raw(cls, body: bytes | str, content_type: str | None = "application/json", status: int = 200) -> Fault:
        """Send exactly this body: a proxy's HTML page, an empty body, ``null``, JSON of the wrong shape
        (``content_type=None`` sends no content type)."""
        return cls("raw", status=status, body=body.encode() if isinstance(body, str) else body, content_type=content_type)

    @classmethod
    def disconnect(cls) -> Fault:
        """Send the headers and half a body, then close the connection."""
        return cls("disconnect")


@dataclass(frozen=True)
class ScriptedRequest:
    """What the script sees of one request."""

    body: dict[str, Any]
    index: int  # 0-based arrival order over the server's life
    attempt: int  # how many earlier requests had exactly these messages and response_format

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def last_user_message(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return str(message.get("content", ""))
        return ""

    @property
    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)

    @property
    def response_format_type(self) -> str | None:
        fmt = self.body.get("response_format")
        return fmt.get("type") if isinstance(fmt, dict) else None

    @property
    def is_repair(self) -> bool:
        """True when the client is re-asking after an invalid answer (an assistant turn is in the history)."""
        return any(m.get("role") == "assistant" for m in self.messages)


@dataclass
class LoggedRequest:
    index: int
    body: dict[str, Any]
    purpose: str
    status: int
    response_format: str | None
    prompt_tokens: int
    completion_tokens: int
    arrived: float
    finished: float = 0.0
    cached_tokens: int = 0  # of prompt_tokens, those the server's emulated prompt cache held (``prefix_cache_block``)
    batch_id: str | None = None  # the batch the request came in (None: a chat completion of its own)
    client_port: int | None = None  # the caller's side of the connection it came on: one port per connection


Script = Callable[[ScriptedRequest], "Reply | Fault"]
