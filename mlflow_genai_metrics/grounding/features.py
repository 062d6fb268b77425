"""Features of each summary sentence against its source, and their aggregation to the row.

Only the source and the summary are read. Per summary sentence (``SENTENCE_FEATURES``): how much of what it says
the source holds (content words, names, numbers with their units and dates), whether its best-matching source
sentences hold it together and in the same order, whether it flips a negation or an antonym of them, and how near in
meaning its words and the whole sentence are to the source's (static word vectors, ``vectors.py``). Per row
(``ROW_FEATURES``): each sentence feature's minimum and mean (counts: maximum and sum) over the sentences, and the
summary's length. ``docs/metrics.md`` defines each one.

Made to cost about a millisecond of CPU per BBC row (issue 47), with the values they always had, bit for bit: the
source is indexed once (``source.py``: which sentences hold each word as a bit mask, the rest on first use); a
summary's (or a row's claims') word vectors are looked up, summed and normalised together (``meaning.WordPool``),
while the products whose last bit depends on the BLAS kernel keep the shapes they had; a sentence that is the
source's own best-matching sentence (most of an extractive summary's) has every feature but its meaning similarity
known without computing it (``_own_sentence``); a sentence whose words the source all holds skips what only a missing
word changes; a sentence scored against an index is kept in it by its text, so a claim repeating a summary's sentence
is scored once; and a row's feature vector and each sentence's alone are one matrix (``feature_rows``), scored by the
trees in one pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from .meaning import WordPool, meaning_features, similarity
from .source import SourceIndex, number_units
from .words import Sentence, opposites

__all__ = ["ROW_FEATURES", "SENTENCE_FEATURES", "SentenceFeatures", "SourceIndex", "feature_rows", "row_features",
           "sentence_features", "single_rows", "summary_features", "texts_features"]
_KIND, _KEY = attrgetter("kind"), attrgetter("key")
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


@dataclass(frozen=True)
class SentenceFeatures:
    """One summary sentence's features (in ``SENTENCE_FEATURES`` order) and what the reasoning quotes."""

    text: str
    values: tuple[float, ...]
    novel_words: tuple[str, ...]
    novel_names: tuple[str, ...]
    novel_numbers: tuple[str, ...]
    flips: tuple[str, ...]
    informative: bool = True  # it has a content word, a number or a date: something to hold against the source


def _share(found: int, total: int) -> float:
    return found / total if total else 1.0


def _most(masks: list[int], count: int) -> tuple[int, int]:
    """(the first of ``count`` positions that the most of ``masks`` hold, how many hold it), counted for all
    positions at once: bit j of ``counters[k]`` is bit k of position j's count (a carry-save adder of masks)."""
    counters: list[int] = []
    for mask in masks:
        level = 0
        while mask:
            if level == len(counters):
                counters.append(mask)
                break
            counter = counters[level]
            counters[level] = counter ^ mask
            mask &= counter
            level += 1
    candidates, most = (1 << count) - 1, 0
    for level in range(len(counters) - 1, -1, -1):  # the highest count's bits, from the top
        holding = candidates & counters[level]
        if holding:
            candidates, most = holding, most | 1 << level
    return (candidates & -candidates).bit_length() - 1, most


def _best_sentences(masks: list[int], count: int) -> tuple[int, int, int, int]:
    """(best sentence, its overlap, second sentence, overlap of the two together) of a summary sentence whose keys the
    source holds in the sentences ``masks`` give (a bit mask per key), among the source's ``count`` sentences: the
    first with the most of the keys, then the first other with the most of the keys the best lacks (-1 when none
    has any); -1 and 0 when the source has no sentence."""
    if not count:
        return -1, 0, -1, 0
    common = -1 if masks else 0
    for mask in masks:
        common &= mask
    if common:  # a sentence holds all the keys: the first such is the best, and no other adds one
        return (common & -common).bit_length() - 1, len(masks), -1, len(masks)
    best, overlap = _most(masks, count)
    bit = 1 << best
    second, gained = _most([mask for mask in masks if not mask & bit], count)
    return best, overlap, (second if gained else -1), overlap + gained


def _own_sentence(text: str, keys: set[str], source: SourceIndex) -> bool:
    """Whether a sentence with informative ``keys`` is one of the source's own sentences (as most of an extractive
    summary's are) and its own best-matching source sentence: no earlier source sentence holds all its keys. Then
    every feature but its meaning similarity is known without computing it (``_OWN``): the source holds all its
    keys, names, numbers with their units, name pairs side by side and consecutive keys (shares 1, counts 0); it is
    its best sentence, which holds them all in its order (order 1, no second sentence), with the same negation, and
    every one of its words (no antonym flips)."""
    own = source.sentence_at(text)
    if own < 0:
        return False
    where, common = source.where, -1
    for key in keys:
        common &= where[key]
    return not common & ((1 << own) - 1)


def _lcs_length(a: list[str], b: list[str]) -> int:
    """``text.lcs_length`` (bit-parallel, Allison-Dix / Hyyro), keeping only the last column."""
    if a == b:
        return len(a)
    if not a or not b:
        return 0
    positions: dict[str, int] = {}
    for index, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << index)
    full = column = (1 << len(a)) - 1
    for token in b:
        matches = column & positions.get(token, 0)
        column = ((column + matches) | (column - matches)) & full
    return len(a) - column.bit_count()


_FLIPPABLE = frozenset({"content", "stop", "date"})  # kinds of words whose opposite may stand in the source


# The values of a sentence of the source that is its own best-matching source sentence, but its meaning similarity:
# every share 1 and every count 0 (``_own_sentence``).
_OWN = tuple(0.0 if kind == "count" else 1.0 for kind in list(SENTENCE_FEATURES.values())[:-1])
assert list(SENTENCE_FEATURES)[-1] == "meaning_similarity"


def sentence_features(sentence: Sentence, source: SourceIndex, pool: WordPool | None = None, position: int = 0) -> SentenceFeatures:
    """The features of one summary sentence against the source (``pool``: its summary's word vectors, the
    sentence's at ``position``)."""
    tokens = sentence.tokens
    keys = {t.info for t in tokens}  # its informative keys (None: any other token's)
    keys.discard(None)
    if keys and _own_sentence(sentence.text, keys, source):
        values = (*_OWN, similarity(source, pool or WordPool([sentence], source), position))
        return SentenceFeatures(text=sentence.text, values=values, novel_words=(), novel_names=(), novel_numbers=(), flips=())
    informative = [t for t in tokens if t.info is not None]
    informative_keys = list(map(_KEY, informative))
    where = source.where  # the keys the source holds (its informative words)
    kinds = set(map(_KIND, tokens))
    novel_keys = keys.difference(where)  # (most sentences of a faithful summary have none: the checks below skip)
    novel = [t for t in informative if t.key in novel_keys] if novel_keys else []

    masks = [where[k] for k in keys if k in where] if novel_keys else list(map(where.__getitem__, keys))
    best, best_overlap, second, two_overlap = _best_sentences(masks, len(source.sentences))
    negated_here = "neg" in kinds
    negation_added = negation_dropped = False
    near: set[str] = set()
    near_lower: set[str] = set()
    if best >= 0:
        near, near_lower, best_sequence, best_negated = source.details(best)
        second_negated = False
        if second >= 0:
            second_words, second_lower, _, second_negated = source.details(second)
            near, near_lower = near | second_words, near_lower | second_lower
        negation_added = negated_here and not (best_negated or second_negated)
        negation_dropped = not negated_here and best_negated

    source_names = source.names
    name_at = [at for at, t in enumerate(tokens) if (t.name is not None and at) or (t.kind == "content" and t.key in source_names)]
    names = [tokens[at] for at in name_at]
    name_keys = set(map(_KEY, names))
    novel_names = sorted({t.text for t in names if t.key in novel_keys}) if novel_keys else []
    spans = 0  # runs of two or more names in a row whose neighbouring keys the source never has side by side
    if len(name_at) >= 2:
        run = name_at[:1]
        for at in [*name_at[1:], -1]:
            if at == run[-1] + 1:
                run.append(at)
                continue
            if len(run) >= 2 and not all((tokens[a].key, tokens[a + 1].key) in source.bigrams for a in run[:-1]):
                spans += 1
            run = [at]

    novel_numbers: list[str] = []
    if "number" in kinds or "date" in kinds:
        # A number the source has only with another unit ("5 years" for "5 months") is as new as one it lacks.
        wrong_unit = {number for number, unit in number_units(tokens)
                      if number in source.number_units and (number, unit) not in source.numbers_with_unit} if "number" in kinds else set()
        if novel_keys or wrong_unit:  # (a number or date the source lacks is among the novel keys)
            novel_numbers = sorted({t.text for t in tokens if t.kind in ("number", "date") and (t.key in novel_keys or t.key in wrong_unit)})

    flips = []
    if negation_added:
        flips.append("a negation the best-matching source sentences lack")
    if negation_dropped:
        flips.append("no negation where the best-matching source sentence has one")
    antonyms = 0
    for t in [t for t in tokens if t.kind in _FLIPPABLE and t.key not in near]:
        # the opposite in the best sentences, or anywhere in the source for a word the source lacks
        opposite = opposites(t.lower) & (near_lower if t.key in where or t.kind == "stop" else source.lower)
        if opposite:
            antonyms += 1
            flips.append(f"'{t.text}' where the source says '{min(opposite)}'")

    order = 1.0
    if best >= 0:
        bit = 1 << best
        sequence = [k for k in informative_keys if where.get(k, 0) & bit]
        order = _share(_lcs_length(sequence, best_sequence), len(sequence))

    present = [k for k in informative_keys if k in where] if novel_keys else informative_keys
    pairs = near_pairs = 0  # consecutive distinct words the source holds, and those it holds in neighbouring sentences
    for a, b in zip(present, present[1:]):
        if a != b:
            pairs += 1
            held = where[b]
            if where[a] & (held | held << 1 | held >> 1):
                near_pairs += 1

    meaning_support, weakest_meaning, meaning_similarity = meaning_features(
        informative, novel_keys, name_keys, source, pool or WordPool([sentence], source), position)

    rule = 1.0  # every content word in the source, and no number it lacks
    if novel_keys:
        content = [t for t in tokens if t.kind == "content"]
        lacks_number = "number" in kinds and any(t.kind == "number" and t.key not in where for t in tokens)
        rule = 0.0 if lacks_number else _share(sum(1 for t in content if t.key in where), len(content))

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
        _share(near_pairs, pairs),
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
        informative=bool(informative),
    )


def summary_features(summary: str, source: SourceIndex) -> list[SentenceFeatures]:
    """Each sentence's features (sentences without a word or number are left out)."""
    return texts_features([summary], source)[0]


def texts_features(texts: list[str], source: SourceIndex) -> list[list[SentenceFeatures]]:
    """``summary_features`` of each text against one source (e.g. a row's claims), their words' vectors looked up
    together."""
    per_text = [[s for s in source.analyse(text) if any(t.kind != "symbol" for t in s.tokens)] for text in texts]
    # A sentence's features depend on its text and the source alone: one the index has scored is read from it (a
    # claim that repeats a summary's sentence word for word, the same sentence in two summaries of one source).
    scored = source.scored
    fresh = list({s.text: s for sentences in per_text for s in sentences if s.text not in scored}.values())
    if fresh:
        pool = WordPool(fresh, source)
        for position, sentence in enumerate(fresh):
            scored[sentence.text] = sentence_features(sentence, source, pool, position)
    return [[scored[s.text] for s in sentences] for sentences in per_text]


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


_SHARES = np.array([kind == "share" for kind in _KINDS])


def feature_rows(sentences: list[SentenceFeatures], source: SourceIndex, *, alone: bool = True) -> np.ndarray:
    """``row_features(sentences)`` and, with ``alone``, ``row_features([s])`` of each sentence after it: a
    (1 + sentences) x ``ROW_FEATURES`` matrix (1 x when not ``alone``), equal to them bit for bit (sums add the
    sentences in order, as Python's ``sum`` does), made in a few numpy steps instead of a loop per feature."""
    count = len(sentences)
    values = np.array([s.values for s in sentences], dtype=np.float64)
    totals = np.cumsum(values, axis=0)[-1]
    rows = np.empty((1 + count if alone else 1, len(ROW_FEATURES)), dtype=np.float64)
    width = 2 * len(_KINDS)
    rows[0, 0:width:2] = np.where(_SHARES, values.min(0), values.max(0))
    rows[0, 1:width:2] = np.where(_SHARES, totals / count, totals)
    words = [len(s.text.split()) for s in sentences]
    total = sum(words)
    rows[0, width:] = (float(count), math.log1p(total), total / max(source.words, 1))
    if alone:
        rows[1:] = _alone(values, words, source)
    return rows


def single_rows(sentences: list[SentenceFeatures], source: SourceIndex) -> np.ndarray:
    """``row_features([s])`` of each sentence, as the rows of one matrix."""
    return _alone(np.array([s.values for s in sentences], dtype=np.float64).reshape(-1, len(_KINDS)),
                  [len(s.text.split()) for s in sentences], source)


def _alone(values: np.ndarray, words: list[int], source: SourceIndex) -> np.ndarray:
    rows = np.empty((len(values), len(ROW_FEATURES)), dtype=np.float64)
    width = 2 * len(_KINDS)
    rows[:, 0:width:2] = values
    rows[:, 1:width:2] = values
    source_words = max(source.words, 1)
    rows[:, width:] = [(1.0, math.log1p(w), w / source_words) for w in words]
    return rows
