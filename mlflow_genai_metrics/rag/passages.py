"""Retrieved passages: grouped into chunks that fit the judge, and the check that a quoted piece of one is in it.

Passages keep the numbers they were retrieved with (1-based) in every chunk, so a verdict's passage number means
the same whichever chunk it came from. Passages are packed whole, in order, while a chunk fits ``max_tokens``; a
passage longer than that alone is cut (``summarization.chunking.split_source``) and each piece keeps its number.

A quote is found when, after both texts are normalised (Unicode compatibility forms, case folded, typographic
quotes, dashes and ellipses made plain, runs of white space made one space), each of its parts (the pieces
between ``...``) is in the passage, in order, and together they hold at least ``MIN_QUOTE_CHARACTERS`` letters or
digits: a quote of "the" finds nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..judge import estimate_tokens
from ..summarization.chunking import split_source

MIN_QUOTE_CHARACTERS = 8
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u201c": '"', "\u201d": '"',
                        "\u201e": '"', "\u2033": '"', "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
                        "\u2015": "-", "\u2212": "-", "\u2026": "..."})
_SPACE = re.compile(r"\s+")
_ELLIPSIS = re.compile(r"\.\.\.+|\[\.\.\.\]|\(\.\.\.\)")
_EDGE = " \"'`.,;:!?()[]{}"


@dataclass(frozen=True)
class PassageChunk:
    """Passages (or pieces of one) sent in one verification call, each with the number it was retrieved with."""

    numbers: tuple[int, ...]
    texts: tuple[str, ...]


def chunk_passages(passages: Sequence[str], max_tokens: int | None) -> list[PassageChunk]:
    """The passages in chunks of at most ``max_tokens`` (None: all in one); no passages give no chunk."""
    if not passages:
        return []
    if max_tokens is None:
        return [PassageChunk(tuple(range(1, len(passages) + 1)), tuple(passages))]
    pieces = [(number, piece) for number, text in enumerate(passages, start=1) for piece in split_source(text, max_tokens)]
    chunks: list[PassageChunk] = []
    numbers: list[int] = []
    texts: list[str] = []
    for number, piece in pieces:
        if texts and estimate_tokens("\n".join([*texts, piece])) > max_tokens:
            chunks.append(PassageChunk(tuple(numbers), tuple(texts)))
            numbers, texts = [], []
        numbers.append(number)
        texts.append(piece)
    chunks.append(PassageChunk(tuple(numbers), tuple(texts)))
    return chunks


def normalise_quote_text(text: str) -> str:
    """``text`` as quotes are compared: NFKC, case folded, plain quotes, dashes and ellipses, single spaces."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).translate(_PLAIN).casefold()).strip()


def quote_parts(quote: str) -> list[str]:
    """The quote's pieces between ellipses, normalised, with quotation marks and punctuation at their edges dropped."""
    parts = (part.strip(_EDGE) for part in _ELLIPSIS.split(normalise_quote_text(quote)))
    return [part for part in parts if part]


def quote_found(quote: str, passage: str) -> bool:
    """Is ``quote`` in ``passage`` (each part, in order, with enough letters and digits to mean something)?"""
    parts = quote_parts(quote)
    if sum(character.isalnum() for part in parts for character in part) < MIN_QUOTE_CHARACTERS:
        return False
    text, position = normalise_quote_text(passage), 0
    for part in parts:
        found = text.find(part, position)
        if found < 0:
            return False
        position = found + len(part)
    return True
