"""Counting tokens without a tokenizer: what chunking, the budget's reservations and the cost estimate use.

No tokenizer is downloaded or bundled: the judge may be any model, each with its own. About 4 characters make a
token of English text with common tokenizers; 3.5 overestimates on purpose (an extra chunk, a budget reservation
a little too large), since an underestimate overflows a context window or a budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

CHARS_PER_TOKEN = 3.5
# What a chat template adds around each message (role name, start and end markers).
MESSAGE_OVERHEAD_TOKENS = 4
# The most prompt tokens a request can hold is bounded by its bytes (a token is at least one byte of text); twice
# that, plus what a provider may add unseen (a system prompt of its own, its template), is more than any tokenizer
# counts: a reply reporting more did not count this request's prompt.
PROMPT_TOKENS_MARGIN = 2
PROMPT_TOKENS_ALLOWANCE = 1024
# A reply to a request that names no max_tokens that reports more completion tokens than this did not count its
# own reply: no model writes a million tokens in one.
MOST_UNBOUNDED_COMPLETION_TOKENS = 1_000_000


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, overestimated for English (``len / CHARS_PER_TOKEN``, rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_prompt_tokens(messages: Iterable[Mapping[str, Any]], response_format: Mapping[str, Any] | None = None) -> int:
    """A chat completion's prompt tokens: every message's content and its template overhead, and the answer schema
    when it travels in ``response_format`` (OpenAI counts it as prompt)."""
    total = sum(estimate_tokens(str(message.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for message in messages)
    if response_format is not None:
        total += estimate_tokens(json.dumps(response_format, separators=(",", ":")))
    return total


def most_prompt_tokens(messages: Iterable[Mapping[str, Any]], response_format: Mapping[str, Any] | None = None) -> int:
    """The most prompt tokens a chat completion of these messages (and schema) can be counted honestly: its UTF-8
    bytes and template overhead, with ``PROMPT_TOKENS_MARGIN`` and ``PROMPT_TOKENS_ALLOWANCE`` to spare."""
    total = sum(len(str(message.get("content") or "").encode()) + MESSAGE_OVERHEAD_TOKENS for message in messages)
    if response_format is not None:
        total += len(json.dumps(response_format, separators=(",", ":")).encode())
    return PROMPT_TOKENS_MARGIN * total + PROMPT_TOKENS_ALLOWANCE
