"""A source text indexed once for the grounding check's features: which sentences hold each word, its names, the
negated sentences, and (made on first use) the rest the features ask of the few sentences that match a summary's.

Only what every summary sentence reads is made when the index is built; a source sentence's own sets, the source's
word pairs, number units, words as written and meaning vectors are made the first time a feature asks for them and
kept in the index, so an index serves all the summaries and claims of its source. Nothing here outlives the index.
"""

from __future__ import annotations

import numpy as np

from .vectors import load_vectors, row_sums, word_vector
from .words import Sentence, Token, analyse_sentences

INFORMATIVE = frozenset({"content", "date", "number"})


class SourceIndex:
    """Everything the features ask about a source, computed once per source text.

    ``where``: informative key -> bit mask of the sentences that hold it (its keys are ``keys``); ``names``: keys
    written capitalised somewhere other than a sentence's start; ``negated``: per sentence, whether it holds a
    negation; ``words``: the source's words (tokens that are not symbols); ``readable``: the scoring found the
    text readable (``readable.unreadable``), so a later call with this index need not read it again; ``scored``:
    the features of each sentence scored against it so far, by the sentence's text (``features.texts_features``): a
    claim that repeats a summary's sentence word for word, or a sentence two summaries share, is scored once."""

    __slots__ = ("sentences", "keys", "where", "names", "negated", "words", "readable", "scored", "_keys", "_informative", "_numbered",
                 "_details", "_bigrams", "_units", "_lower", "_meaning", "_sorted", "_by_text")

    def __init__(self, text: str):
        self.sentences = analyse_sentences(text)
        where: dict[str, int] = {}
        names: set[str] = set()
        negated: list[bool] = []
        numbered: list[bool] = []
        self._keys: list[list[str]] = []  # per sentence, the keys of its tokens that are not symbols
        self._informative: list[list[str]] = []  # ... of its informative tokens
        for index, sentence in enumerate(self.sentences):
            tokens = sentence.tokens
            kinds = [t.kind for t in tokens]
            negated.append("neg" in kinds)
            numbered.append("number" in kinds)
            self._keys.append([t.key for t in tokens if t.kind != "symbol"])
            informative = [t.key for t in tokens if t.kind in INFORMATIVE]
            self._informative.append(informative)
            bit = 1 << index
            for key in set(informative):
                where[key] = where.get(key, 0) | bit
            names.update([t.key for t in tokens[1:] if t.capitalised and t.kind == "content"])
        self.where, self.names, self.negated, self._numbered = where, names, negated, numbered
        self.words = sum(map(len, self._keys))
        self.keys = set(where)
        self.readable = False  # set by the scoring once ``readable.unreadable`` found the source readable
        self.scored: dict[str, object] = {}  # sentence text -> its ``features.SentenceFeatures``
        self._details: list[tuple[set[str], set[str], list[str]] | None] = [None] * len(self.sentences)
        self._bigrams: set[tuple[str, str]] | None = None
        self._units: tuple[set[tuple[str, str]], set[str]] | None = None
        self._lower: set[str] | None = None
        self._meaning: tuple[np.ndarray, dict[str, int], np.ndarray] | None = None
        self._sorted: np.ndarray | None = None
        self._by_text: dict[str, Sentence] | None = None

    def analyse(self, text: str) -> list[Sentence]:
        """``analyse_sentences(text)``, taking the sentences the source has word for word from the index."""
        if self._by_text is None:
            self._by_text = {sentence.text: sentence for sentence in self.sentences}
        return analyse_sentences(text, self._by_text)

    def details(self, index: int) -> tuple[set[str], set[str], list[str]]:
        """Sentence ``index``'s keys (of the tokens that are not symbols), its words as written (lowercased), and its
        informative keys in order."""
        found = self._details[index]
        if found is None:
            found = self._details[index] = (set(self._keys[index]), {t.lower for t in self.sentences[index].tokens},
                                            self._informative[index])
        return found

    @property
    def bigrams(self) -> set[tuple[str, str]]:
        """Pairs of keys next to each other (symbols aside) in a sentence."""
        if self._bigrams is None:
            self._bigrams = set()
            for keys in self._keys:
                self._bigrams.update(zip(keys, keys[1:]))
        return self._bigrams

    @property
    def numbers_with_unit(self) -> set[tuple[str, str]]:
        """(number, unit) pairs of the source (``number_units``)."""
        return self._number_units()[0]

    @property
    def number_units(self) -> set[str]:
        """Numbers that carry some unit in the source."""
        return self._number_units()[1]

    def _number_units(self) -> tuple[set[tuple[str, str]], set[str]]:
        if self._units is None:
            pairs = {pair for s, numbered in zip(self.sentences, self._numbered) if numbered for pair in number_units(s.tokens)}
            self._units = pairs, {number for number, _ in pairs}
        return self._units

    @property
    def lower(self) -> set[str]:
        """Every word of the source as written, lowercased."""
        if self._lower is None:
            self._lower = {t.lower for s in self.sentences for t in s.tokens}
        return self._lower

    def sentence_vectors(self) -> np.ndarray:
        """Each sentence's mean content-word vector at unit length (zeros for a sentence without one)."""
        return self._vectors()[0]

    def word_rows(self) -> tuple[dict[str, int], np.ndarray]:
        """(content word that has a vector -> its row of the matrix, the matrix: the words' vectors then zeros)."""
        _, row, padded = self._vectors()
        return row, padded

    def word_vectors(self) -> np.ndarray:
        """The vectors of the source's distinct content words, in the words' sorted order (made on first use: only a
        word the source lacks asks for its nearest source word)."""
        if self._sorted is None:
            row, padded = self.word_rows()
            self._sorted = padded[[row[w] for w in sorted(row)]] if row else padded[:0]
        return self._sorted

    def _vectors(self) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
        if self._meaning is None:
            at: dict[str, int] = {}  # content word -> its row, in order of first use
            groups = [[at.setdefault(t.lower, len(at)) for t in s.tokens if t.kind == "content"] for s in self.sentences]
            found = list(map(word_vector, at))
            zero = np.zeros(load_vectors().dims, dtype=np.float32)
            # A word without a vector adds a row of zeros to its sentence's sum: the sum is unchanged, bit for bit.
            padded = np.array([zero if vector is None else vector for vector in found] + [zero])
            sums = row_sums(padded, groups)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            row = dict(at)
            for word, vector in zip(at, found):
                if vector is None:
                    del row[word]
            self._meaning = sums / np.where(norms > 0, norms, 1.0), row, padded
        return self._meaning


def number_units(tokens: tuple[Token, ...]) -> list[tuple[str, str]]:
    """(number, unit) for each number followed (within two tokens) by a content word or a % sign."""
    found = []
    for position, token in enumerate(tokens):
        if token.kind != "number":
            continue
        for follower in tokens[position + 1 : position + 3]:
            if follower.kind == "content" or follower.text == "%":
                found.append((token.key, follower.key))
                break
            if follower.kind == "number":
                break
    return found
