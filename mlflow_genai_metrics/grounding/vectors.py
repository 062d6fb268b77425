"""Static word vectors for the grounding check: words that mean the same are near, with no model run.

``word-vectors-v1.npz`` beside this module holds one int8 vector per WordPiece token of all-MiniLM-L6-v2's
vocabulary (letters and digits), distilled from that model by ``scripts/build_word_vectors.py`` (each token alone
through the model, mean-pooled, reduced by PCA; its ``meta`` records the source, the weights' SHA-256 and the
method). A word's vector is the mean of its tokens' (BERT's greedy longest-match split, lower case, accents
stripped), at unit length; a word the vocabulary cannot spell has none. Reading the file takes about 0.1 s, once per
process; a word costs a dictionary lookup after its first use.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

VECTORS_FILE = Path(__file__).resolve().with_name("word-vectors-v1.npz")


@dataclass(frozen=True)
class WordVectors:
    """The table: token -> row, unit vectors (float32), and the file's metadata."""

    rows: dict[str, int]
    vectors: np.ndarray
    meta: dict[str, Any]
    tag: str

    def pieces(self, word: str) -> list[int] | None:
        """Rows of the word's WordPiece tokens, or None when the vocabulary cannot spell it."""
        return wordpiece(word, self.rows)

    @property
    def dims(self) -> int:
        return self.vectors.shape[1]


# BERT's tokenizer reads a word longer than this as unknown (its max_input_chars_per_word): the greedy split below
# is cubic in a word's length, and one "hahaha..." of 100,000 letters never returned.
MAX_WORD_CHARS = 100


def wordpiece(word: str, ids: Mapping[str, int]) -> list[int] | None:
    """BERT's greedy longest-match WordPiece split of ``word`` (continuations spelt ``##...``) as the ids ``ids``
    gives its pieces, or None when they cannot spell it or it is longer than ``MAX_WORD_CHARS``, as BERT's tokenizer
    does. The table's rows at run time; the model's vocabulary ids when ``scripts/build_word_vectors.py`` builds the
    table."""
    if len(word) > MAX_WORD_CHARS:
        return None
    found, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            row = ids.get(word[start:end] if start == 0 else "##" + word[start:end])
            if row is not None:
                found.append(row)
                break
            end -= 1
        if end == start:
            return None
        start = end
    return found


def vectors_tag(path: str | Path = VECTORS_FILE) -> str:
    """``words:<version>-<first 4 hex digits of the file's SHA-256>``: part of the grounding model's tag."""
    data = Path(path).read_bytes()
    return f"words:v1-{hashlib.sha256(data).hexdigest()[:4]}"


@lru_cache(maxsize=2)
def _load(path: str) -> WordVectors:
    with np.load(path, allow_pickle=False) as data:
        tokens, quantised, scales = data["tokens"], data["vectors"], data["scales"]
        meta = json.loads(str(data["meta"]))
    vectors = quantised.astype(np.float32) * scales[:, None].astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors.flags.writeable = False
    return WordVectors(dict(zip(tokens.tolist(), range(len(tokens)))), vectors, meta, vectors_tag(path))  # a third of the time of str() per token


def load_vectors(path: str | Path = VECTORS_FILE) -> WordVectors:
    """The table in ``path`` (default: the shipped one), read once per process."""
    # The shipped table's path is resolved once here: resolving it per word cost a sixth of the check's time.
    return _load(str(path if path is VECTORS_FILE else Path(path).resolve()))


def _plain(word: str) -> str:
    if word.isascii():  # no accent to strip
        return word.lower()
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")


_MEMO: dict[str, np.ndarray | None] = {}  # word -> its vector or None: a plain dict, read in one C-level pass
_MEMO_LIMIT = 1 << 16
_UNSEEN = object()


def word_vector(word: str) -> np.ndarray | None:
    """The word's unit vector (float32, read-only), or None when the vocabulary cannot spell it (memoised)."""
    found = _MEMO.get(word, _UNSEEN)
    return word_vectors([word])[0] if found is _UNSEEN else found


def word_vectors(words: list[str]) -> list[np.ndarray | None]:
    """``word_vector`` of each word: the memo read for all of them at once, the words it lacks then made together."""
    found = list(map(_MEMO.get, words, repeat(_UNSEEN, len(words))))
    missing = [at for at, vector in enumerate(found) if vector is _UNSEEN]
    if missing:
        if len(_MEMO) + len(missing) > _MEMO_LIMIT:
            _MEMO.clear()
        for at, vector in zip(missing, _made([words[at] for at in missing])):
            found[at] = _MEMO[words[at]] = vector
    return found


def _made(words: list[str]) -> list[np.ndarray | None]:
    """The vectors of words not memoised yet: a word of the table is its row; a word spelt by several pieces is the
    mean of theirs at unit length, made for all the words of as many pieces at once, by the same IEEE operations as
    ``table.vectors[pieces].mean(0)`` and its norm one word at a time (numpy's mean: the rows added along an axis in
    order, then divided in place by the count as an intp; the norm: the square root of a BLAS dot)."""
    table = load_vectors()
    found: list[np.ndarray | None] = []
    spelt: dict[int, list[tuple[int, list[int]]]] = {}  # number of pieces -> (position, the pieces' rows)
    for at, word in enumerate(words):
        plain = _plain(word)
        row = table.rows.get(plain)
        found.append(None if row is None else table.vectors[row])
        pieces = table.pieces(plain) if row is None and plain.isalnum() else None
        if pieces:
            spelt.setdefault(len(pieces), []).append((at, pieces))
    for count, items in spelt.items():
        rows = table.vectors.take([row for _, pieces in items for row in pieces], axis=0)
        means = np.add.reduce(rows.reshape(len(items), count, table.dims), axis=1)
        np.true_divide(means, np.intp(count), out=means, casting="unsafe")
        norms = np.sqrt(np.array([mean.dot(mean) for mean in means], dtype=np.float32))
        units = means / np.where(norms > 0, norms, 1)[:, None]
        units.flags.writeable = False
        for (at, _), norm, unit in zip(items, norms.tolist(), units):
            found[at] = unit if norm != 0.0 else None
    return found


def word_matrix(words: list[str]) -> tuple[list[str], np.ndarray]:
    """The words that have a vector, and their vectors as rows (a (0, dims) matrix when none has)."""
    kept, padded = padded_word_matrix(words)
    return kept, padded[:-1]


def padded_word_matrix(words: list[str]) -> tuple[list[str], np.ndarray]:
    """The words that have a vector, and their vectors as rows followed by one row of zeros (for ``row_sums``)."""
    kept, rows = [], []
    for word, vector in zip(words, word_vectors(words)):
        if vector is not None:
            kept.append(word)
            rows.append(vector)
    rows.append(np.zeros(load_vectors().dims, dtype=np.float32))
    return kept, np.array(rows)


_SUMMED_AT_ONCE = 64  # groups summed in one step: (groups x longest group x dims) floats


def row_sums(padded: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Each group's rows of ``padded`` (whose last row is zeros) added in order, a row per group (zeros for an empty
    group): bit for bit ``padded[group].sum(0)``, as numpy adds along the first axis one row at a time, and adding
    the zero row changes nothing. Groups of a similar length are summed together, padded with the zero row."""
    sums = np.zeros((len(groups), padded.shape[1]), dtype=padded.dtype)
    order = sorted((i for i, group in enumerate(groups) if group), key=lambda i: len(groups[i]))
    zero = len(padded) - 1
    for start in range(0, len(order), _SUMMED_AT_ONCE):
        chosen = order[start:start + _SUMMED_AT_ONCE]
        width = len(groups[chosen[-1]])
        flat: list[int] = []
        for i in chosen:
            flat += groups[i]
            flat += [zero] * (width - len(groups[i]))
        rows = np.take(padded, np.array(flat, dtype=np.intp).reshape(len(chosen), width), axis=0)
        sums[chosen] = np.add.reduce(rows, axis=1)
    return sums
