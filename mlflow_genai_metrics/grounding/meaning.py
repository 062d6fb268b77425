"""The grounding check's features of meaning: how near a summary sentence's words, and the sentence as a whole, are to
its source's, by static word vectors (``vectors.py``), not only by the words they share.

A summary's (or a row's claims') word vectors are looked up, summed and normalised together (``WordPool``); the
products whose last bit depends on the BLAS kernel keep the shapes they always had.
"""

from __future__ import annotations

import numpy as np

from .source import SourceIndex
from .vectors import padded_word_matrix, row_sums
from .words import Sentence, Token


class WordPool:
    """The word vectors of a summary's sentences, looked up once for all of them: per sentence its distinct content
    words that have a vector (``kept``), their rows of ``padded`` (the source's word vectors, those of the summary's
    other words, then a row of zeros), and their sum's norm and the sum at unit length (``units``)."""

    __slots__ = ("kept", "rows", "padded", "norms", "units")

    def __init__(self, sentences: list[Sentence], source: SourceIndex):
        per_sentence = [list(dict.fromkeys(t.lower for t in s.tokens if t.kind == "content")) for s in sentences]
        row, self.padded = source.word_rows()
        other = [w for w in dict.fromkeys(w for lowers in per_sentence for w in lowers) if w not in row]
        if other:  # the summary's words the source lacks (or has no vector for)
            words, padded = padded_word_matrix(other)
            if words:
                start = len(self.padded) - 1
                row = {**row, **{w: start + i for i, w in enumerate(words)}}
                self.padded = np.concatenate([self.padded[:-1], padded])
        self.kept = [[w for w in lowers if w in row] for lowers in per_sentence]
        self.rows = [[row[w] for w in kept] for kept in self.kept]
        sums = row_sums(self.padded, self.rows)
        # np.linalg.norm(sum) is sqrt(sum.dot(sum)): a BLAS dot for each (a sum of squares over the matrix would add
        # them in another order), the square roots and divisions then all at once (the same IEEE operations).
        norms = np.sqrt(np.array([vector.dot(vector) for vector in sums], dtype=np.float32))
        self.norms = norms.tolist()
        self.units = sums / np.where(norms > 0, norms, 1)[:, None]  # as each sum divided by its norm alone


def meaning_features(informative: list[Token], novel_keys: set[str], name_keys: set[str], source: SourceIndex,
                     pool: WordPool, position: int) -> tuple[float, float, float]:
    """(meaning_support, weakest_meaning, meaning_similarity) of a sentence's informative words: a word the source
    has counts 1; a content word it lacks counts the cosine of its nearest source word (at least 0); a number, a
    date or a name it lacks counts 0, as no neighbour can stand for it. The products keep the shapes they always had
    (a sentence's words by the source's; the source's sentences by one vector): the BLAS kernel, and so the last
    bit, depends on them."""
    if not informative:
        return 1.0, 1.0, 1.0
    kept = pool.kept[position]
    where = source.where
    support, weakest = 1.0, 1.0
    if novel_keys:
        nearest = {}
        if kept and any(t.kind == "content" and t.key not in where and t.key not in name_keys for t in informative):
            source_vectors = source.word_vectors()
            if len(source_vectors):
                nearest = dict(zip(kept, (pool.padded[pool.rows[position]] @ source_vectors.T).max(1).tolist()))
        supports = [1.0 if t.key in where else
                    0.0 if t.kind != "content" or t.key in name_keys else max(0.0, nearest.get(t.lower, 0.0))
                    for t in informative]
        support, weakest = sum(supports) / len(supports), min(supports)
    return support, weakest, similarity(source, pool, position)


def similarity(source: SourceIndex, pool: WordPool, position: int) -> float:
    """meaning_similarity: the cosine of the sentence's mean word vector (``pool``'s at ``position``) and its nearest
    source sentence's, at least 0 (0 for a sentence without a word vector)."""
    sentence_vectors = source.sentence_vectors()
    if pool.kept[position] and len(sentence_vectors) and pool.norms[position]:
        return max(0.0, max((sentence_vectors @ pool.units[position]).tolist()))
    return 0.0
