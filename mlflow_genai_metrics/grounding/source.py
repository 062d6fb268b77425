"""A source text indexed once for the grounding check's features: which sentences hold each word, its names, its
length, and (made on first use) the rest the features ask of the few sentences that match a summary's.

Only what every summary sentence reads is made when the index is built; a source sentence's own sets, the source's
word pairs, number units, words as written and meaning vectors are made the first time a feature asks for them and
kept in the index, so an index serves all the summaries and claims of its source. Nothing here outlives the index.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

import numpy as np

from .vectors import load_vectors, row_sums, word_vectors
from .words import Sentence, Token, analyse_sentences

_INFO, _KIND, _LOWER = attrgetter("info"), attrgetter("kind"), attrgetter("lower")


class SourceIndex:
    """Everything the features ask about a source, computed once per source text.

    ``where``: informative key -> bit mask of the sentences that hold it (its keys are ``keys``); ``names``: keys
    written capitalised somewhere other than a sentence's start; ``words``: how many words the source has (tokens
    that are not symbols); ``readable``: the scoring found the text readable (``readable.unreadable``), so a later
    call with this index need not read it again; ``scored``: the features of each sentence scored against it so far,
    by the sentence's text (``features.texts_features``): a claim that repeats a summary's sentence word for word, or
    a sentence two summaries share, is scored once; ``supports``: the model's score of each such sentence alone, for
    the claims that repeat it (``scoring._known_supports``). Built in one pass over each sentence's tokens, reading
    the fields ``Token`` derives once per word (``info``, ``name``); a sentence's own details, its negation included,
    are made when a feature asks for them."""

    __slots__ = ("sentences", "where", "names", "words", "readable", "scored", "supports", "_details", "_bigrams", "_units",
                 "_lower", "_meaning", "_sorted", "_by_text", "_at")

    def __init__(self, text: str):
        self.sentences = analyse_sentences(text)
        where: dict[str | None, int] = {}
        names: set[str] = set()
        words = 0
        for index, sentence in enumerate(self.sentences):
            bit = 1 << index
            tokens = sentence.tokens
            for key in {t.info for t in tokens}:  # (None stands for the tokens that are not informative)
                if key in where:
                    where[key] |= bit
                else:
                    where[key] = bit
            names.update([t.name for t in tokens[1:] if t.name is not None])
            words += len(tokens)
        where.pop(None, None)
        self.where, self.names = where, names
        self.words = words - sum([t.kind == "symbol" for sentence in self.sentences for t in sentence.tokens])
        self.readable = False  # set by the scoring once ``readable.unreadable`` found the source readable
        self.scored: dict[str, object] = {}  # sentence text -> its ``features.SentenceFeatures``
        self.supports: tuple[object, dict[str, float]] | None = None  # (model, sentence text -> its support): ``scoring``
        self._details: list[tuple[set[str], set[str], list[str], bool] | None] = [None] * len(self.sentences)
        self._bigrams: set[tuple[str, str]] | None = None
        self._units: tuple[set[tuple[str, str]], set[str]] | None = None
        self._lower: set[str] | None = None
        self._meaning: tuple[np.ndarray, dict[str, int], np.ndarray] | None = None
        self._sorted: np.ndarray | None = None
        self._by_text: dict[str, Sentence] | None = None
        self._at: dict[str, int] | None = None

    @property
    def keys(self):
        """The informative keys the source holds (a view of ``where``'s keys)."""
        return self.where.keys()

    def analyse(self, text: str) -> list[Sentence]:
        """``analyse_sentences(text)``, taking the sentences the source has word for word from the index."""
        if self._by_text is None:
            self._by_text = {sentence.text: sentence for sentence in self.sentences}
        return analyse_sentences(text, self._by_text)

    def sentence_at(self, text: str) -> int:
        """The position of the source's sentence with this text (the last, when it has two alike), or -1."""
        if self._at is None:
            self._at = {sentence.text: index for index, sentence in enumerate(self.sentences)}
        return self._at.get(text, -1)

    def details(self, index: int) -> tuple[set[str], set[str], list[str], bool]:
        """Sentence ``index``'s keys (of the tokens that are not symbols), its words as written (lowercased), its
        informative keys in order, and whether it holds a negation (made on first use: the features ask only of
        each summary sentence's best two source sentences)."""
        found = self._details[index]
        if found is None:
            tokens = self.sentences[index].tokens
            found = self._details[index] = ({t.key for t in tokens if t.kind != "symbol"}, set(map(_LOWER, tokens)),
                                            [key for key in map(_INFO, tokens) if key is not None],
                                            "neg" in map(_KIND, tokens))
        return found

    @property
    def bigrams(self) -> set[tuple[str, str]]:
        """Pairs of keys next to each other (symbols aside) in a sentence."""
        if self._bigrams is None:
            self._bigrams = set()
            for sentence in self.sentences:
                keys = [t.key for t in sentence.tokens if t.kind != "symbol"]
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
            pairs = {pair for s in self.sentences if "number" in map(_KIND, s.tokens) for pair in number_units(s.tokens)}
            self._units = pairs, {number for number, _ in pairs}
        return self._units

    @property
    def lower(self) -> set[str]:
        """Every word of the source as written, lowercased."""
        if self._lower is None:
            self._lower = set(map(_LOWER, chain.from_iterable(s.tokens for s in self.sentences)))
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
            found = word_vectors(list(at))
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
