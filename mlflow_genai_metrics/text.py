"""Generic text utilities, with no model and nothing downloaded: sentences split by a rule, the longest common
subsequence of two token lists, and the check that a column holds texts.

The reference metrics (``reference``), the grounding check (``grounding``) and the judge's offline estimates
(``summarization``) all use them; this module imports nothing from the package.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+")
_CONTENT_WORD = re.compile(r"[a-z0-9]{4,}")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")  # a letter or digit of any script


def normalised(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): "é" typed as one character or as "e" and an accent is one text.
    Every comparison of texts (pairing runs' rows, leaving a row's own examples out) goes through here."""
    return unicodedata.normalize("NFC", text)


def content_words(text: str) -> set[str]:
    """The words of four or more letters or digits, lower-cased: what two texts are compared on by word overlap."""
    return set(_CONTENT_WORD.findall(text.lower()))


def split_sentences(text: str) -> list[str]:
    """Sentences by rule: existing line breaks, then ``.``, ``!`` or ``?`` (and closing quotes) before a space."""
    sentences = []
    for line in text.split("\n"):
        sentences.extend(s.strip() for s in _SENTENCE_BREAK.split(line) if s.strip())
    return sentences


def has_letter_or_digit(text: str) -> bool:
    """Whether ``text`` holds a letter or digit of any script (not only spaces, punctuation or symbols)."""
    return _LETTER_OR_DIGIT.search(text) is not None


def stated_sentences(text: str) -> list[str]:
    """``split_sentences`` less the ones with no letter or digit ("...", a dash): what a judge lists as claims or key
    points (the claim passes refuse an item without one)."""
    return [sentence for sentence in split_sentences(text) if has_letter_or_digit(sentence)]


def _lcs_columns(a: Sequence[str], b: Sequence[str]) -> list[int]:
    """The LCS table of a and b, bit-parallel (Allison-Dix / Hyyro): column j is an integer whose zero bits among
    the lowest i count LCS(a[:i], b[:j]). One big-integer step per token of b instead of len(a) Python steps."""
    positions: dict[str, int] = {}
    for index, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << index)
    full = (1 << len(a)) - 1
    column = full
    columns = [column]
    for token in b:
        matches = column & positions.get(token, 0)
        column = ((column + matches) | (column - matches)) & full
        columns.append(column)
    return columns


def _table_value(columns: list[int], i: int, j: int) -> int:
    return i - (columns[j] & ((1 << i) - 1)).bit_count()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    if not a or not b:
        return 0
    return _table_value(_lcs_columns(a, b), len(a), len(b))


def lcs_indices(ref: Sequence[str], can: Sequence[str]) -> list[int]:
    """Positions in ``ref`` of one LCS, read back exactly as rouge-score's ``_backtrack_norec`` reads its table."""
    if not ref or not can:
        return []
    columns = _lcs_columns(ref, can)
    i, j, found = len(ref), len(can), []
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            found.append(i - 1)
            i, j = i - 1, j - 1
        elif _table_value(columns, i, j - 1) > _table_value(columns, i - 1, j):
            j -= 1
        else:
            i -= 1
    found.reverse()
    return found


def texts(values: Any, name: str, allow_sentence_lists: bool = False) -> list[Any]:
    """``values`` as a list, each a text (or, with ``allow_sentence_lists``, a list of sentence texts); raises
    ``TypeError`` for one string given as the whole sequence and ``ValueError`` naming up to 20 rows that are not
    text (``name`` says what the values are, e.g. ``"reference"``)."""
    if isinstance(values, str):
        raise TypeError(f"{name} must be a sequence of texts, not one string")
    items = list(values)
    problems = []
    for position, item in enumerate(items):
        ok = isinstance(item, str) or (allow_sentence_lists and isinstance(item, (list, tuple)) and all(isinstance(s, str) for s in item))
        if not ok:
            problems.append(f"row {position}: {name} is {type(item).__name__}, not text")
    if problems:
        raise ValueError("cannot score these rows:\n  " + "\n  ".join(problems[:20]))
    return items
