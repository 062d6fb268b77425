"""Sources longer than the judge's context: split them into chunks, verify against each, combine the verdicts.

The rule that combines a claim's verdicts over the chunks of one source:
- supported (yes) in any chunk -> yes;
- else contradicted (no) in any chunk -> no;
- else idk.
A fact stated once is enough to support a claim; a contradiction counts only if no part of the article supports
the claim (one chunk may lack the context that another supplies). The reason kept is the deciding chunk's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..judge import CHARS_PER_TOKEN, estimate_tokens  # one token estimate: chunks, the budget and the cost estimate

# The smallest chunk budget accepted from a user: below a couple of sentences a chunk loses the context a claim needs.
MIN_CHUNK_TOKENS = 32
# A sentence ends at . ! ? before a space, or at a full-width 。！？ (Chinese and Japanese put no space after them).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*")


def _pack(units: list[str], joiner: str, max_tokens: int) -> list[str]:
    """Greedily join consecutive units while the joined text fits in ``max_tokens``."""
    packed: list[str] = []
    current: list[str] = []
    for unit in units:
        if current and estimate_tokens(joiner.join(current + [unit])) > max_tokens:
            packed.append(joiner.join(current))
            current = []
        current.append(unit)
    if current:
        packed.append(joiner.join(current))
    return packed


def _pieces(text: str, max_tokens: int) -> list[str]:
    """Paragraphs, or sentences of paragraphs too long, or word runs of sentences too long."""
    pieces: list[str] = []
    for paragraph in (p.strip() for p in text.split("\n")):
        if not paragraph:
            continue
        if estimate_tokens(paragraph) <= max_tokens:
            pieces.append(paragraph)
            continue
        for sentence in filter(None, _SENTENCE_END.split(paragraph)):  # none empty after a final 。
            if estimate_tokens(sentence) <= max_tokens:
                pieces.append(sentence)
            else:
                pieces.extend(_pack(_words(sentence, max_tokens), " ", max_tokens))
    return pieces


def _words(sentence: str, max_tokens: int) -> list[str]:
    """The sentence's words, a word too long for a chunk (a script written without spaces) cut into runs that fit."""
    size = max(1, math.floor(max_tokens * CHARS_PER_TOKEN))
    return [word[start : start + size] for word in sentence.split() for start in range(0, len(word), size)]


def split_source(text: str, max_tokens: int) -> list[str]:
    """The source itself when it fits in ``max_tokens``, else consecutive chunks that each fit, cut at paragraph,
    then sentence, then word boundaries."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if estimate_tokens(text) <= max_tokens:
        return [text]
    return _pack(_pieces(text, max_tokens), "\n", max_tokens)


def combine_verdicts(per_chunk: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(verdict, reason) over the chunks of one source -> one (verdict, reason), by the rule above."""
    for wanted in ("yes", "no"):
        for verdict, reason in per_chunk:
            if verdict == wanted:
                return verdict, reason
    return "idk", per_chunk[0][1] if per_chunk else ""
