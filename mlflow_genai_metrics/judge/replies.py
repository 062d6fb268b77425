"""Reading an HTTP-200 reply: a chat completion becomes a ``CallResult``; anything else is a ``BadReply``.

The ``openai`` client builds its response objects without validating them, so a proxy's HTML page, an empty body
or the JSON ``null`` would surface later as ``AttributeError`` or ``JSONDecodeError``. The raw body is read here
instead, validated against the few fields the judge uses, and refused as a whole when any of them is wrong: a
reply whose token counts are negative is not summed, whatever its content says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

EXCERPT_CHARS = 200

_JSON_KINDS = {type(None): "null", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}

TokenCount = Annotated[int, Field(ge=0, strict=True)]


class CallResult(BaseModel):
    """What one chat completion answered: all the judge reads of it, and all the cache keeps of it."""

    content: str | None = None
    finish_reason: str | None = None
    refusal: str | None = None
    model: str | None = None  # the model id the endpoint reports having answered with
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the endpoint served from its prompt cache
    # The usage named the prompt's tokens and left the completion's out (0 above): not an empty reply's 0. Not stored.
    completion_unreported: bool = Field(default=False, exclude=True)


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _PromptDetails(BaseModel):
    cached_tokens: TokenCount | None = None


class _Usage(BaseModel):
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    prompt_tokens_details: _PromptDetails | None = None  # OpenAI's, vLLM's and llama.cpp's report of cached tokens

    @field_validator("prompt_tokens_details", mode="wrap")
    @classmethod
    def _details_or_none(cls, value: Any, handler: Any) -> _PromptDetails | None:
        # An optional detail: one of another shape is ignored (no cached tokens counted), not a bad reply.
        try:
            return handler(value)
        except ValidationError:
            return None


class _Completion(BaseModel):
    """The parts of OpenAI's ``ChatCompletion`` the judge reads; other fields (``id``, ``created``, ...) may be
    missing, as some OpenAI-compatible servers leave them out."""

    model_config = ConfigDict(extra="allow")

    choices: list[_Choice] = Field(min_length=1)
    model: str | None = None
    usage: _Usage | None = None


class BadReply(openai.APIResponseValidationError):
    """An HTTP-200 reply whose body is not a chat completion. Retried like a 5xx; recorded as ``bad_reply``."""

    def __init__(self, response: Any, *, reason: str, excerpt: str) -> None:
        shown = f"; the body begins: {excerpt!r}" if excerpt else "; the body was empty"
        super().__init__(response=response, body=None, message=f"the reply is not a chat completion: {reason}{shown}")
        self.reason = reason
        self.excerpt = excerpt


def without_secrets(result: CallResult, redact: Callable[[str], str]) -> CallResult:
    """``result`` with ``redact`` applied to every text it holds (content, refusal, model id): the one place a
    reply's text passes before it is parsed, cached and stored, so an echoed key reaches none of them."""
    texts = {name: getattr(result, name) for name in ("content", "refusal", "model")}
    cleaned = {name: redact(text) for name, text in texts.items() if text}
    changed = {name: text for name, text in cleaned.items() if text != texts[name]}
    return result.model_copy(update=changed) if changed else result


def excerpt(body: bytes, redact: Callable[[str], str]) -> str:
    """The first ``EXCERPT_CHARS`` characters of a body, credentials removed."""
    text = body[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    return redact(text)[:EXCERPT_CHARS]


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in error.errors()[:4]
    )


def read_completion(response: Any, redact: Callable[[str], str]) -> CallResult:
    """Validate an HTTP-200 ``httpx`` response as a chat completion; raise ``BadReply`` saying what is wrong."""
    body = response.content or b""

    def bad(reason: str) -> BadReply:
        return BadReply(response, reason=reason, excerpt=excerpt(body, redact))

    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if "json" not in media_type:
        raise bad(f"content type {media_type or '(none)'!r}, not JSON")
    if not body.strip():
        raise bad("the body is empty")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise bad(f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise bad(f"the body is the JSON {_JSON_KINDS.get(type(data), type(data).__name__)}, not an object")
    try:
        completion = _Completion.model_validate(data)
    except ValidationError as exc:
        raise bad(_problems(exc)) from None
    choice, usage = completion.choices[0], completion.usage or _Usage()
    cached = (usage.prompt_tokens_details or _PromptDetails()).cached_tokens or 0
    return CallResult(
        content=choice.message.content,
        finish_reason=choice.finish_reason,
        refusal=choice.message.refusal,
        model=completion.model,
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_prompt_tokens=min(cached, usage.prompt_tokens or 0),
        completion_unreported=usage.prompt_tokens is not None and usage.completion_tokens is None,
    )
