"""Statements the judge lists (a summary's claims, a source's key points): when two are the same one, and when a
summary says anything at all.

Two statements are the same when they differ only in case, spacing, punctuation or Unicode form (``statement_key``):
"The club won." and "the club  won" are one fact, and counted once, whether they are claims (verified once) or key
points (checked once, one place in coverage's denominator). A minus sign before a number is kept: "-5" is not "5".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from ..text import has_letter_or_digit

_SIGNED_NUMBER = re.compile(r"-(?=\d)")
# Every ASCII punctuation character (Unicode category P) to a space, as bytes: most statements are ASCII.
_ASCII_PUNCTUATION = bytes(32 if b < 128 and unicodedata.category(chr(b)).startswith("P") else b for b in range(256))


def has_words(summary: str) -> bool:
    """False for a summary with no letter or digit (blank, only punctuation): empty, decided without the judge."""
    return has_letter_or_digit(summary)


def statement_key(text: str) -> str:
    """What two statements share when they are the same one: NFKC form, case folded, punctuation dropped (a minus
    sign before a digit kept), spacing collapsed."""
    text = _SIGNED_NUMBER.sub("\u2212", unicodedata.normalize("NFKC", text)).casefold()
    # Translated in one pass (each distinct character's category looked up once, or an ASCII text's from a table):
    # this runs on every claim and key point of every row, a rerun's too.
    if text.isascii():
        return " ".join(text.encode("ascii").translate(_ASCII_PUNCTUATION).decode("ascii").split())
    punctuation = {ord(c): " " for c in set(text) if unicodedata.category(c).startswith("P")}
    return " ".join(text.translate(punctuation).split())


def distinct_statements(statements: Sequence[str]) -> tuple[list[str], list[int]]:
    """Statements without repeats (``statement_key``; the first text kept) and, per statement kept, how many
    copies were removed: a fact stated twice is one fact, not two."""
    kept: list[str] = []
    removed: list[int] = []
    position_of: dict[str, int] = {}
    for statement in statements:
        key = statement_key(statement)
        if key in position_of:
            removed[position_of[key]] += 1
        else:
            position_of[key] = len(kept)
            kept.append(statement)
            removed.append(0)
    return kept, removed
