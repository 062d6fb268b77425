"""How an answer's schema is put on the wire, and how a reply becomes a validated pydantic object.

Three response modes, tried in this order until an endpoint accepts one:

- ``json_schema``: ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, Ollama, llama.cpp's C++ server);
- ``json_object``: ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server, which answers 500 to the
  first but constrains its grammar to the schema given this way);
- ``text``: no ``response_format``; the schema is written into the prompt and the JSON is cut out of the reply.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .cache import canonical_json

ResponseMode = Literal["json_schema", "json_object", "text"]
MODES: tuple[ResponseMode, ...] = ("json_schema", "json_object", "text")

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class AnswerParseError(ValueError):
    """The reply is not valid JSON for the answer's schema; the message says what is wrong."""


@functools.cache  # building a schema costs more than the rest of a request's CPU: once per answer type
def answer_schema(answer_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to the endpoint: OpenAI's strict form where the openai package can make it. One dict
    per answer type, shared: read it, never change it."""
    try:
        from openai.lib._pydantic import to_strict_json_schema
    except ImportError:  # a future openai without the helper: plain pydantic schema, sent non-strict
        return answer_type.model_json_schema()
    return to_strict_json_schema(answer_type)


@functools.cache
def answer_schema_json(answer_type: type[BaseModel]) -> str:
    """``answer_schema`` as cache keys encode it (``cache.canonical_json``), once per answer type."""
    return canonical_json(answer_schema(answer_type))


def response_format(mode: ResponseMode, answer_type: type[BaseModel], schema: dict[str, Any]) -> dict | None:
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": answer_type.__name__, "schema": schema, "strict": True},
        }
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def with_schema_instruction(
    messages: list[dict[str, str]], mode: ResponseMode, schema: dict[str, Any]
) -> list[dict[str, str]]:
    """Outside ``json_schema`` mode the model only sees the schema if the prompt shows it.

    It goes into the last user message, not a system message, because some chat formats (Gemma's) drop
    system messages.
    """
    if mode == "json_schema":
        return messages
    instruction = (
        "\n\nAnswer with only a JSON object, no other text, that matches this JSON schema:\n"
        + json.dumps(schema, separators=(",", ":"))
    )
    out = [dict(m) for m in messages]
    for message in reversed(out):
        if message["role"] == "user":
            message["content"] += instruction
            break
    else:
        out.append({"role": "user", "content": instruction.strip()})
    return out


def _json_text(raw: str) -> str:
    """The JSON object inside a reply: as is, inside a Markdown fence, or between the outermost braces."""
    fenced = _FENCE.match(raw)
    if fenced:
        return fenced.group(1)
    stripped = raw.strip()
    if stripped.startswith("{"):
        return stripped
    start, end = raw.find("{"), raw.rfind("}")
    if start != -1 and end > start:
        return raw[start : end + 1]
    return stripped


class _RepeatedName(Exception):
    """An object of the reply names one field twice (its name is the message)."""


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise _RepeatedName(repr(next(name for name in names if names.count(name) > 1)))
    return dict(pairs)


def parse_answer(raw: str | None, answer_type: type[BaseModel]) -> BaseModel:
    """Validate a reply as ``answer_type``; raise ``AnswerParseError`` saying what is wrong."""
    if raw is None or not raw.strip():
        raise AnswerParseError("the reply was empty")
    text = _json_text(raw)
    try:
        json.loads(text, object_pairs_hook=_unique_names)
    except _RepeatedName as exc:  # {"verdict": "no", "verdict": "yes"}: which did the judge mean? Never guessed
        raise AnswerParseError(f"the reply gives {exc} twice in one object: give each field once") from None
    except (ValueError, RecursionError):
        pass  # not JSON (or nested too deep): the schema's validation below says so
    try:
        return answer_type.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()[:8]
        )
        raise AnswerParseError(f"the reply does not match the {answer_type.__name__} schema: {problems}") from exc
