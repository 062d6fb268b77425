"""Features of each summary sentence against its source, and their aggregation to the row.

Only the source and the summary are read. Per summary sentence (``SENTENCE_FEATURES``): how much of what it says
the source holds (content words, names, numbers with their units and dates), whether its best-matching source
sentences hold it together and in the same order, whether it flips a negation or an antonym of them, and how near in
meaning its words and the whole sentence are to the source's (static word vectors, ``vectors.py``). Per row
(``ROW_FEATURES``): each sentence feature's minimum and mean (counts: maximum and sum) over the sentences, and the
summary's length. ``docs/metrics.md`` defines each one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..text import lcs_length
from .vectors import word_matrix
from .words import Sentence, Token, analyse_sentences, opposites

_INFORMATIVE = frozenset({"content", "date", "number"})
# name: how it aggregates over a summary's sentences ("share": min and mean; "count": max and sum)
SENTENCE_FEATURES: dict[str, str] = {
    "content_support": "share",  # informative words (content, dates, numbers) found anywhere in the source
    "best_sentence_support": "share",  # ... found in the one best-matching source sentence
    "best_two_support": "share",  # ... found in the best two source sentences together
    "novel_words": "count",  # informative words the source lacks
    "name_support": "share",  # names (capitalised, or capitalised in the source) found in the source
    "novel_names": "count",
    "novel_name_spans": "count",  # runs of two or more names that never occur together in the source
    "novel_numbers": "count",  # numbers (scaled) or dates the source lacks, or has only with another unit
    "negation_added": "count",  # negated here, but neither best source sentence is
    "negation_dropped": "count",  # not negated here, but the best source sentence is
    "antonym_flip": "count",  # a word absent from the best source sentences whose opposite is there
    "order_support": "share",  # words shared with the best source sentence in the same order (LCS)
    "pair_cooccurrence": "share",  # consecutive informative words found within one or two adjacent source sentences
    "untrained_rule": "share",  # the rule: content-word share, 0 with a number the source lacks
    # Meaning, not only shared words (static word vectors, ``vectors.py``): a word the source lacks counts by how
    # near its nearest source word is; names, numbers and dates count only as written.
    "meaning_support": "share",  # informative words found in the source, or near one of its words
    "weakest_meaning": "share",  # the least supported informative word's support
    "meaning_similarity": "share",  # cosine of the sentence's mean word vector and its nearest source sentence's
}
ROW_EXTRA = ["sentences", "log_summary_words", "summary_source_ratio"]
ROW_FEATURES: list[str] = [
    f"{name}_{stat}"
    for name, kind in SENTENCE_FEATURES.items()
    for stat in (("min", "mean") if kind == "share" else ("max", "sum"))
] + ROW_EXTRA


class SourceIndex:
    """Everything the features ask about a source, computed once per source text."""

    __slots__ = ("sentences", "keys", "bigrams", "where", "names", "negated", "sentence_keys",
                 "sequences", "numbers_with_unit", "number_units", "words", "sentence_words", "sentence_lower", "lower",
                 "_meaning")

    def __init__(self, text: str):
        self.sentences = analyse_sentences(text)
        self.keys: set[str] = set()
        self.bigrams: set[tuple[str, str]] = set()
        self.where: dict[str, int] = {}  # key -> bit mask of the sentences that hold it
        self.names: set[str] = set()  # keys written capitalised somewhere other than a sentence's start
        self.negated: list[bool] = []
        self.sentence_keys: list[set[str]] = []
        self.sequences: list[list[str]] = []
        self.sentence_words: list[set[str]] = []
        self.sentence_lower: list[set[str]] = []  # each sentence's words as written, lowercased
        self.numbers_with_unit: set[tuple[str, str]] = set()
        self.number_units: set[str] = set()  # numbers that carry some unit in the source
        words = 0
        for index, sentence in enumerate(self.sentences):
            bit = 1 << index
            keys = [t.key for t in sentence.tokens if t.kind != "symbol"]
            words += len(keys)
            self.sentence_words.append(set(keys))
            self.sentence_lower.append({t.lower for t in sentence.tokens})
            self.bigrams.update(zip(keys, keys[1:]))
            informative = [t.key for t in sentence.tokens if t.kind in _INFORMATIVE]
            self.sequences.append(informative)
            self.sentence_keys.append(set(informative))
            for key in informative:
                self.where[key] = self.where.get(key, 0) | bit
            self.negated.append(any(t.kind == "neg" for t in sentence.tokens))
            self.names.update(t.key for t in sentence.tokens[1:] if t.capitalised and t.kind == "content")
            for number, unit in _number_units(sentence.tokens) if "number" in {t.kind for t in sentence.tokens} else ():
                self.numbers_with_unit.add((number, unit))
                self.number_units.add(number)
        self.keys = set(self.where)
        self.lower = set().union(*self.sentence_lower)
        self.words = words
        self._meaning: tuple[np.ndarray, np.ndarray] | None = None

    def meaning(self) -> tuple[np.ndarray, np.ndarray]:
        """(vectors of the source's distinct content words, unit mean vector of each sentence's), made on first use."""
        if self._meaning is None:
            words = sorted({t.lower for s in self.sentences for t in s.tokens if t.kind == "content"})
            kept, vectors = word_matrix(words)
            row = {w: i for i, w in enumerate(kept)}
            sentence_vectors = np.zeros((len(self.sentences), vectors.shape[1]), dtype=np.float32)
            for index, sentence in enumerate(self.sentences):
                rows = [row[t.lower] for t in sentence.tokens if t.kind == "content" and t.lower in row]
                if rows:
                    sentence_vectors[index] = vectors[rows].sum(0)
            norms = np.linalg.norm(sentence_vectors, axis=1, keepdims=True)
            self._meaning = vectors, sentence_vectors / np.where(norms > 0, norms, 1.0)
        return self._meaning


def _number_units(tokens: tuple[Token, ...]) -> list[tuple[str, str]]:
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


@dataclass(frozen=True)
class SentenceFeatures:
    """One summary sentence's features (in ``SENTENCE_FEATURES`` order) and what the reasoning quotes."""

    text: str
    values: tuple[float, ...]
    novel_words: tuple[str, ...]
    novel_names: tuple[str, ...]
    novel_numbers: tuple[str, ...]
    flips: tuple[str, ...]


def _share(found: int, total: int) -> float:
    return found / total if total else 1.0


def _best_sentences(keys: set[str], source: SourceIndex) -> tuple[int, int, int, int]:
    """(best sentence, its overlap, second sentence, overlap of the two together); -1 when the source has none."""
    best, best_overlap = -1, -1
    for index, sentence_keys in enumerate(source.sentence_keys):
        overlap = len(keys & sentence_keys)
        if overlap > best_overlap:
            best, best_overlap = index, overlap
    if best < 0:
        return -1, 0, -1, 0
    rest = keys - source.sentence_keys[best]
    second, gained = -1, 0
    for index, sentence_keys in enumerate(source.sentence_keys):
        if index != best:
            overlap = len(rest & sentence_keys)
            if overlap > gained:
                second, gained = index, overlap
    return best, best_overlap, second, best_overlap + gained


def sentence_features(sentence: Sentence, source: SourceIndex) -> SentenceFeatures:
    """The features of one summary sentence against the source."""
    tokens = sentence.tokens
    informative = [t for t in tokens if t.kind in _INFORMATIVE]
    keys = {t.key for t in informative}
    in_source = source.keys
    novel = [t for t in informative if t.key not in in_source]
    novel_keys = {t.key for t in novel}

    best, best_overlap, second, two_overlap = _best_sentences(keys, source)
    near = set(source.sentence_words[best]) if best >= 0 else set()
    if second >= 0:
        near |= source.sentence_words[second]

    is_name = [t.kind == "content" and (t.key in source.names or (t.capitalised and position > 0)) for position, t in enumerate(tokens)]
    names = [t for t, name in zip(tokens, is_name) if name]
    name_keys = {t.key for t in names}
    novel_names = sorted({t.text for t in names if t.key not in in_source})
    spans, run = 0, []
    for t, name in zip((*tokens, None), (*is_name, False)):
        if name:
            run.append(t.key)
            continue
        if len(run) >= 2 and not all(pair in source.bigrams for pair in zip(run, run[1:])):
            spans += 1
        run = []

    # A number the source has only with another unit ("5 years" for "5 months") is as new as one it lacks.
    wrong_unit = {number for number, unit in _number_units(tokens)
                  if number in source.number_units and (number, unit) not in source.numbers_with_unit}
    novel_numbers = sorted({t.text for t in tokens if t.kind in ("number", "date") and (t.key not in in_source or t.key in wrong_unit)})

    negated_here = any(t.kind == "neg" for t in tokens)
    negation_added = best >= 0 and negated_here and not (source.negated[best] or (second >= 0 and source.negated[second]))
    negation_dropped = best >= 0 and not negated_here and source.negated[best]
    flips = []
    if negation_added:
        flips.append("a negation the best-matching source sentences lack")
    if negation_dropped:
        flips.append("no negation where the best-matching source sentence has one")
    antonyms = 0
    near_lower = set(source.sentence_lower[best]) if best >= 0 else set()
    if second >= 0:
        near_lower |= source.sentence_lower[second]
    for t in tokens:
        if t.kind in ("content", "stop", "date") and t.key not in near:
            # the opposite in the best sentences, or anywhere in the source for a word the source lacks
            opposite = opposites(t.lower) & (near_lower if t.key in in_source or t.kind == "stop" else source.lower)
            if opposite:
                antonyms += 1
                flips.append(f"'{t.text}' where the source says '{min(opposite)}'")

    sequence = [t.key for t in informative if best >= 0 and t.key in source.sentence_keys[best]]
    order = _share(lcs_length(sequence, source.sequences[best]), len(sequence)) if best >= 0 else 1.0

    where = source.where
    present = [t.key for t in informative if t.key in where]
    pairs = [(a, b) for a, b in zip(present, present[1:]) if a != b]
    near_pairs = sum(1 for a, b in pairs if where[a] & (where[b] | where[b] << 1 | where[b] >> 1))

    meaning_support, weakest_meaning, meaning_similarity = _meaning(informative, names, source)

    content = [t for t in tokens if t.kind == "content"]
    rule = 0.0 if any(t.kind == "number" and t.key not in in_source for t in tokens) else _share(sum(1 for t in content if t.key in in_source), len(content))

    values = (
        _share(len(keys) - len(novel_keys), len(keys)),
        _share(best_overlap, len(keys)),
        _share(two_overlap, len(keys)),
        float(len(novel_keys)),
        _share(len(name_keys - novel_keys), len(name_keys)),
        float(len(novel_names)),
        float(spans),
        float(len(novel_numbers)),
        float(negation_added),
        float(negation_dropped),
        float(antonyms),
        order,
        _share(near_pairs, len(pairs)),
        rule,
        meaning_support,
        weakest_meaning,
        meaning_similarity,
    )
    return SentenceFeatures(
        text=sentence.text,
        values=values,
        novel_words=tuple(dict.fromkeys(t.text for t in novel if t.kind == "content")),
        novel_names=tuple(novel_names),
        novel_numbers=tuple(novel_numbers),
        flips=tuple(flips),
    )


def _meaning(informative: list[Token], names: list[Token], source: SourceIndex) -> tuple[float, float, float]:
    """(meaning_support, weakest_meaning, meaning_similarity) of a sentence's informative words: a word the source
    has counts 1; a content word it lacks counts the cosine of its nearest source word (at least 0); a number, a
    date or a name it lacks counts 0, as no neighbour can stand for it."""
    if not informative:
        return 1.0, 1.0, 1.0
    source_vectors, sentence_vectors = source.meaning()
    kept, vectors = word_matrix(list(dict.fromkeys(t.lower for t in informative if t.kind == "content")))
    nearest = dict(zip(kept, (vectors @ source_vectors.T).max(1).tolist())) if len(kept) and len(source_vectors) else {}
    name_keys = {t.key for t in names}
    supports = [1.0 if t.key in source.keys else
                0.0 if t.kind != "content" or t.key in name_keys else max(0.0, nearest.get(t.lower, 0.0))
                for t in informative]
    similarity = 0.0
    if len(kept) and len(sentence_vectors):
        mean = vectors.sum(0)
        norm = float(np.linalg.norm(mean))
        similarity = max(0.0, float((sentence_vectors @ (mean / norm)).max())) if norm else 0.0
    return sum(supports) / len(supports), min(supports), similarity


def summary_features(summary: str, source: SourceIndex) -> list[SentenceFeatures]:
    """Each sentence's features (sentences without a word or number are left out)."""
    features = []
    for sentence in analyse_sentences(summary):
        if any(t.kind != "symbol" for t in sentence.tokens):
            features.append(sentence_features(sentence, source))
    return features


_KINDS = list(SENTENCE_FEATURES.values())


def row_features(sentences: list[SentenceFeatures], source: SourceIndex) -> list[float]:
    """The row's feature vector (``ROW_FEATURES`` order) from its sentences' features."""
    if not sentences:
        return [math.nan] * len(ROW_FEATURES)
    row: list[float] = []
    count = len(sentences)
    if count == 1:  # one sentence (a claim): its minimum, mean, maximum and sum are its value
        row = [value for value in sentences[0].values for value in (value, value)]
    for column, kind in enumerate(_KINDS if count > 1 else ()):
        values = [s.values[column] for s in sentences]
        total = sum(values)
        row.extend((min(values), total / count) if kind == "share" else (max(values), total))
    words = sum(1 for s in sentences for _ in s.text.split())
    row.extend((float(count), math.log1p(words), words / max(source.words, 1)))
    return row
