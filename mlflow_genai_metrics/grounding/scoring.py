"""Rows and claims -> grounding scores with the shipped model, and the suspect rule for judge verdicts.

``grounding`` of a row is the model's score, calibrated on its training mix (``model.calibrated_on``), that people
would find the summary fully consistent with its source, from the row's features: for ranking and comparing systems
on the same data, not a probability that holds on other data (``docs/metrics.md``). ``lexical_support`` of one claim (or one summary sentence) is the same model on
that sentence alone, as a one-sentence summary. A judge's verdict is suspect when it says ``yes`` to a claim whose
support is below ``support_low``, or ``no``/``idk`` to one whose support is above ``support_high`` (both fixed once
from the training splits and stored in the model file; ``docs/metrics.md`` says how).
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .features import SENTENCE_FEATURES, SentenceFeatures, SourceIndex, feature_rows, single_rows, summary_features, texts_features
from .model import GroundingModel, load_model
from .readable import NOTHING_TO_CHECK, pairs_unreadable


@dataclass(frozen=True)
class RowGrounding:
    """One row's grounding (None for a summary with no sentence), grounded flag and reasoning."""

    grounding: float | None
    grounded: int | None
    reasoning: str


def source_indexes(texts: Sequence[str], known: dict[str, SourceIndex] | None = None) -> Iterator[SourceIndex]:
    """Each text's index, in order; one index per distinct text, kept only until its last row (memory stays flat).
    ``known``: the caller's own indexes by text, used and added to (kept for the caller's next call)."""
    if known is not None:
        for text in texts:
            if text not in known:
                known[text] = SourceIndex(text)
            yield known[text]
        return
    remaining = Counter(texts)
    built: dict[str, SourceIndex] = {}
    for text in texts:
        index = built.get(text) or SourceIndex(text)
        remaining[text] -= 1
        if remaining[text]:
            built[text] = index
        else:
            built.pop(text, None)
        yield index


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the features allocate many small objects (no cycles among
    them; reference counting frees them): its repeated scans cost a third of the time. Restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_BEST_SENTENCE, _ORDER = list(SENTENCE_FEATURES).index("best_sentence_support"), list(SENTENCE_FEATURES).index("order_support")


def _why(sentence: SentenceFeatures) -> str:
    reasons = []
    if sentence.novel_numbers:
        reasons.append(f"numbers or dates the source lacks (or has with another unit): {', '.join(sentence.novel_numbers[:5])}")
    if sentence.novel_names:
        reasons.append(f"names the source lacks: {', '.join(sentence.novel_names[:5])}")
    reasons.extend(sentence.flips[:3])
    others = [w for w in sentence.novel_words if w not in sentence.novel_names]
    if others:
        reasons.append(f"words the source lacks: {', '.join(others[:6])}")
    if reasons:
        return "; ".join(reasons)
    # every word in the source: said by where it holds them (a copied sentence is not "spread out")
    best, order = sentence.values[_BEST_SENTENCE], sentence.values[_ORDER]
    if best < 1:
        return f"its words are in the source but spread out (the best-matching source sentence holds {best:.0%} of them)"
    if order < 1:
        return f"its words are all in one source sentence, in another order ({order:.0%} of them in the source's order)"
    return "nothing the check can name is missing: one source sentence holds all its words, in their order"


def score_pairs(sources: Sequence[str], summaries: Sequence[str], *, model: GroundingModel | None = None,
                indexes: dict[str, SourceIndex] | None = None) -> list[RowGrounding]:
    """Grounding, grounded and reasoning for each (source, summary) pair, in order. ``indexes``: sources already
    indexed by the caller (``source_indexes``), e.g. to score a row's claims against the same index after."""
    model = model or load_model()
    with _collection_paused():
        return _score_pairs(sources, summaries, model, indexes)


def _readable(sources: Sequence[str], texts: Sequence[str], indexes: dict[str, SourceIndex] | None = None) -> tuple[list[str | None], list[int]]:
    """Why each pair cannot be checked (None where it can), and the positions of the pairs that can. A source the
    caller's ``indexes`` hold as found readable (by this check, in an earlier call) is not read again."""
    read = [s for s in set(sources) if s in indexes and indexes[s].readable] if indexes else ()
    reasons = pairs_unreadable(list(sources), list(texts), read)
    return reasons, [p for p, reason in enumerate(reasons) if reason is None]


def _score_pairs(sources: Sequence[str], summaries: Sequence[str], model: GroundingModel,
                 indexes: dict[str, SourceIndex] | None) -> list[RowGrounding]:
    reasons, readable = _readable(sources, summaries, indexes)
    per_row: list[list[SentenceFeatures]] = [[] for _ in summaries]
    known: list[dict[str, float]] = [{} for _ in summaries]  # per row, its index's supports (``_known_supports``)
    blocks: list[np.ndarray] = []  # per row with a sentence: its features, then each sentence's alone
    for position, index in zip(readable, source_indexes([sources[p] for p in readable], indexes)):
        index.readable = True
        sentences = per_row[position] = summary_features(summaries[position], index)
        if sentences and not any(s.informative for s in sentences):  # "It is.": every share 1 of nothing, once grounded
            per_row[position], reasons[position] = [], NOTHING_TO_CHECK.format(text="summary")
        elif sentences:
            blocks.append(feature_rows(sentences, index))
            known[position] = _known_supports(index, model)
    # One matrix for every row and every sentence alone: one pass through the trees.
    scores = iter(model.predict(np.concatenate(blocks)).tolist() if blocks else [])
    results = []
    for sentences, reason, supported in zip(per_row, reasons, known):
        if not sentences:
            results.append(RowGrounding(None, None, f"{reason[:1].upper()}{reason[1:]}." if reason else "The summary has no sentence to check."))
            continue
        score = next(scores)
        supports = [next(scores) for _ in sentences]
        supported.update(zip([s.text for s in sentences], supports))
        weakest = supports.index(min(supports))
        grounded = int(score >= model.threshold)
        head = f"grounding {score:.2f} ({'grounded' if grounded else 'not grounded'}, threshold {model.threshold:.2f}); {len(sentences)} sentence{'' if len(sentences) == 1 else 's'}."
        quoted = " ".join(sentences[weakest].text.split())
        detail = f'Least supported (support {supports[weakest]:.2f}): "{quoted[:300]}" -- {_why(sentences[weakest])}'
        results.append(RowGrounding(score, grounded, f"{head}\n{detail}"))
    return results


def lexical_supports(claims: Sequence[str], sources: Sequence[str], *, model: GroundingModel | None = None,
                     indexes: dict[str, SourceIndex] | None = None) -> list[float]:
    """``lexical_support`` of each claim against its source (a source shared by many claims is indexed once);
    NaN for a claim with no word or number, or one the check cannot read (``readable.unreadable``). ``indexes`` as
    for ``score_pairs``."""
    model = model or load_model()
    blocks: list[np.ndarray] = []
    positions: list[int] = []
    supports = [math.nan] * len(claims)
    _, readable = _readable(sources, claims, indexes)  # a claim or source the check cannot read has no support (never suspect)
    with _collection_paused():
        run: list[int] = []  # consecutive claims of one source, scored together
        index = None
        for position, next_index in zip(readable, source_indexes([sources[p] for p in readable], indexes)):
            next_index.readable = True
            if next_index is not index and run:
                _claim_rows(run, claims, index, model, blocks, positions, supports)
                run = []
            run.append(position)
            index = next_index
        if run:
            _claim_rows(run, claims, index, model, blocks, positions, supports)
    for position, value in zip(positions, model.predict(np.concatenate(blocks)).tolist() if blocks else []):
        supports[position] = value
    return supports


def _claim_rows(run: list[int], claims: Sequence[str], index: SourceIndex, model: GroundingModel, blocks: list[np.ndarray],
                positions: list[int], supports: list[float]) -> None:
    """The feature rows of the claims at ``run`` (all of ``index``'s source) added to ``blocks``, their positions to
    ``positions``: a claim of one sentence (most) is that sentence alone; a claim with none has no row. A claim that
    is a sentence whose support ``model`` gave before against ``index`` (a summary's sentence) gets it in
    ``supports`` instead: the same row, the same score."""
    found = texts_features([" ".join(claims[p].split()) for p in run], index)  # a claim is one statement: one line
    found = [sentences if any(s.informative for s in sentences) else [] for sentences in found]  # nothing to check: NaN
    known = _known_supports(index, model)
    single = []
    for position, sentences in zip(run, found):
        if len(sentences) == 1 and sentences[0].text in known:
            supports[position] = known[sentences[0].text]
        elif len(sentences) == 1:
            single.append((position, sentences[0]))
    if single:
        blocks.append(single_rows([sentence for _, sentence in single], index))
        positions.extend(position for position, _ in single)
    for position, sentences in zip(run, found):
        if len(sentences) > 1:
            blocks.append(feature_rows(sentences, index, alone=False))
            positions.append(position)


def _known_supports(index: SourceIndex, model: GroundingModel) -> dict[str, float]:
    """The supports ``model`` gave sentences alone against ``index`` (a summary's sentences, in ``score_pairs``), by
    the sentence's text, kept in the index (``SourceIndex.supports``) for the claims that repeat them. A row's score
    is its own (``GroundingModel.raw``), whatever rows it is scored with: the value is the one scoring it again gives."""
    if index.supports is None or index.supports[0] is not model:
        index.supports = (model, {})
    return index.supports[1]


def lexical_support(claim: str, source: str, *, model: GroundingModel | None = None) -> float:
    """How much of ``claim`` the source supports, in [0, 1], from the sentence features (no judge call).

    >>> lexical_support("The council approved the budget.", "On Monday the council approved the budget.") > 0.5
    True
    """
    return lexical_supports([claim], [source], model=model)[0]


def support_thresholds(model: GroundingModel | None = None) -> tuple[float, float]:
    """(support_low, support_high) of the suspect rule, as stored in the model file."""
    model = model or load_model()
    return model.support_low, model.support_high


def suspect(verdict: str, support: float, *, model: GroundingModel | None = None) -> bool:
    """True when the judge's ``verdict`` disagrees sharply with the claim's ``lexical_support``: ``yes`` below
    ``support_low``, or ``no``/``idk`` above ``support_high``. A NaN support is never suspect."""
    low, high = support_thresholds(model)
    if support is None or math.isnan(support):
        return False
    if verdict == "yes":
        return support < low
    if verdict in ("no", "idk"):
        return support > high
    raise ValueError(f"a verdict is yes, no or idk, not {verdict!r}")
