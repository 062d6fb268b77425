"""Retrieved passages: grouped into chunks that fit the judge, and the check that a quoted piece of one is in it.

Passages keep the numbers they were retrieved with (1-based) in every chunk, so a verdict's passage number means
the same whichever chunk it came from. Passages are packed whole, in order, while a chunk fits ``max_tokens``; a
passage longer than that alone is cut (``summarization.chunking.split_source``) and each piece keeps its number.

A quote is found when, after both texts are normalised (Unicode compatibility forms, case folded, typographic
quotes, dashes and ellipses made plain, runs of white space made one space), it is one contiguous span of the
passage (ellipses and punctuation at its two ends aside), of at least ``MIN_QUOTE_WORDS`` words and
``MIN_QUOTE_CHARACTERS`` letters or digits: pieces stitched with "..." are no quote, and "the" finds nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ..judge import estimate_tokens
from ..summarization.chunking import split_source

MIN_QUOTE_CHARACTERS = 8
MIN_QUOTE_WORDS = 3
# A word: a run of letters or digits, but each character of a script written without spaces (Chinese, Japanese
# kana, Korean) on its own.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(f"[{_UNSPACED}]|[^\\W_{_UNSPACED}]+")
_UNSPACED_CHARACTER = re.compile(f"[{_UNSPACED}]")
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u201c": '"', "\u201d": '"',
                        "\u201e": '"', "\u2033": '"', "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
                        "\u2015": "-", "\u2212": "-", "\u2026": "..."})
_SPACE = re.compile(r"\s+")
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


def quote_core(quote: str) -> str:
    """The quote as it is looked for: normalised, without the ellipses, quotation marks and punctuation at its two
    ends ("...the council approved the budget." looks for "the council approved the budget")."""
    return normalise_quote_text(quote).strip(_EDGE)


def quote_found(quote: str, passage: str) -> bool:
    """Is ``quote`` one contiguous span of ``passage``'s words (both normalised), long enough to identify a place in it?
    Pieces stitched with "..." are not a span ("exports now make up ... 31%" against "40% of sales, up from 31%"
    quoted nothing the passage says), and a quote of fewer than ``MIN_QUOTE_WORDS`` words or
    ``MIN_QUOTE_CHARACTERS`` letters and digits identifies nothing."""
    core = quote_core(quote)
    if len(_WORD.findall(core)) < MIN_QUOTE_WORDS or sum(character.isalnum() for character in core) < MIN_QUOTE_CHARACTERS:
        return False
    text = normalise_quote_text(passage)
    start = text.find(core)
    while start >= 0:  # a span of whole words: "is 33" is not in "is 330 metres", nor "330 met"
        end = start + len(core)
        if not (start and _cuts_a_word(text[start - 1], core[0])) and not (end < len(text) and _cuts_a_word(core[-1], text[end])):
            return True
        start = text.find(core, start + 1)
    return False


def _cuts_a_word(before: str, after: str) -> bool:
    """Does a span's edge between these two characters fall inside a word (letters or digits on both sides, neither
    of a script written without spaces, whose every character is a word of its own)?"""
    return all(c.isalnum() and not _UNSPACED_CHARACTER.match(c) for c in (before, after))
