"""sacreBLEU's BLEU, chrF and TER: each row's sentence score and sufficient statistics, corpus scores from their
sums, and sacreBLEU's own signatures.

A corpus BLEU, chrF or TER is a function of the element-wise sum of per-segment statistics, so parts of a corpus
(Spark partitions, bootstrap resamples) need only their rows' statistics. sacreBLEU's public API gives them for
BLEU and TER: the fields of ``sentence_score``'s ``BLEUScore`` (``sys_len``, ``ref_len``, ``counts``, ``totals``)
and ``TERScore`` (``num_edits``, ``ref_length``), and ``BLEU.compute_bleu`` turns summed BLEU statistics into the
corpus score. TER from summed statistics is its definition, 100 x edits / reference words (``_ter``, as sacreBLEU
computes it). sacreBLEU has no public way to get chrF's per-segment statistics, nor a chrF score from summed
statistics (its own paired tests use the private methods), so the two private calls in ``PRIVATE_CALLS`` are
used. ``check_sacrebleu`` refuses, naming the installed version, a sacreBLEU that lacks them, and
``tests/test_traditional.py`` pins their parameters, and every corpus score from summed statistics against
sacreBLEU's public ``corpus_score``.

What ``statistics(name, ...)`` gives per row (one reference per row):

- ``bleu``: ``[hyp_len, ref_len, correct_1..4, total_1..4]`` (13a tokens; 10 values)
- ``chrf``: ``[hyp, ref, match]`` character n-gram counts for n = 1..6 (18 values)
- ``ter``: ``[edits, ref_len]`` (Tercom tokens)
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib.metadata import version
from typing import Any

CORPUS_METRICS = ("bleu", "chrf", "ter")
# The only private sacreBLEU calls: (class, method, its parameters). Nothing public gives what they give.
PRIVATE_CALLS = (
    ("CHRF", "_extract_corpus_statistics", ("hypotheses", "references")),
    ("CHRF", "_compute_score_from_stats", ("stats",)),
)


def check_sacrebleu() -> None:
    """Raise a ``RuntimeError`` naming the installed sacreBLEU when a call in ``PRIVATE_CALLS`` is missing."""
    import sacrebleu.metrics

    missing = [f"{cls}.{method}" for cls, method, _ in PRIVATE_CALLS if not _implemented(getattr(sacrebleu.metrics, cls), method)]
    if missing:
        raise RuntimeError(
            f"sacreBLEU {sacrebleu.__version__} lacks {', '.join(missing)}, which chrF's corpus statistics need "
            "(written against sacreBLEU 2.4 to 2.6); install a sacreBLEU 2.x that has them"
        )


def _implemented(cls: type, method: str) -> bool:
    found = getattr(cls, method, None)
    return callable(found) and not getattr(found, "__isabstractmethod__", False)  # the base Metric's are abstract


@lru_cache(maxsize=1)
def _metrics() -> dict[str, tuple[Any, Any]]:
    """Built once per process, per metric: (the sentence-level metric, the corpus-level metric)."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    check_sacrebleu()
    # Sentence BLEU uses effective order (as sacreBLEU recommends); corpus BLEU does not. Both read the same
    # per-segment statistics.
    return {"bleu": (BLEU(effective_order=True), BLEU()), "chrf": (CHRF(), CHRF()), "ter": (TER(), TER())}


def segment_scores(name: str, hypotheses: Sequence[str], references: Sequence[str]) -> tuple[list[float], list[list[float]]]:
    """Each row's sentence score and sufficient statistics for ``name`` (bleu, chrf or ter), one reference a row."""
    sentence_metric, _ = _metrics()[name]
    if name == "chrf":
        segments = sentence_metric._extract_corpus_statistics(list(hypotheses), [list(references)])
        return [sentence_metric._compute_score_from_stats(s).score for s in segments], segments
    scores, segments = [], []
    for hypothesis, reference in zip(hypotheses, references):
        score = sentence_metric.sentence_score(hypothesis, [reference])
        scores.append(score.score)
        if name == "bleu":
            segments.append([score.sys_len, score.ref_len, *score.counts, *score.totals])
        else:
            segments.append([score.num_edits, score.ref_length])
    return scores, segments


def corpus_score(name: str, summed: Sequence[float]) -> float:
    """The corpus score of ``name`` from the element-wise sum of its rows' statistics (of any rows)."""
    from sacrebleu.metrics import BLEU

    _, metric = _metrics()[name]
    # Sums that crossed a float column (Spark, numpy) come back as floats; BLEU's lengths must be ints.
    values = [int(v) if float(v).is_integer() else float(v) for v in summed]
    if name == "bleu":
        order = metric.max_ngram_order
        return BLEU.compute_bleu(
            values[2 : 2 + order], values[2 + order :], values[0], values[1], smooth_method=metric.smooth_method,
            smooth_value=metric.smooth_value, effective_order=metric.effective_order, max_ngram_order=order,
        ).score
    if name == "ter":
        return _ter(*values)
    return metric._compute_score_from_stats(values).score


def _ter(edits: float, reference_words: float) -> float:
    """TER from summed statistics, exactly as sacreBLEU's TER computes it: 100 x edits / reference words; with
    no reference words, 100 when there were edits and 0 when there were none."""
    if reference_words > 0:
        return 100 * (edits / reference_words)
    return 100 * (1.0 if edits > 0 else 0.0)


def sacrebleu_signatures(names: Sequence[str]) -> dict[str, str]:
    """sacreBLEU's own signature of each corpus metric in ``names``, e.g. BLEU's
    ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``. The per-row BLEU is the same with ``eff:yes``."""
    return {name: _signature(name) for name in names}


@lru_cache(maxsize=None)
def _signature(name: str) -> str:
    _, metric = _metrics()[name]
    metric.corpus_score(["a"], [["a"]])  # sacreBLEU knows the number of references only after scoring
    return str(metric.get_signature())


def rouge_signature() -> str:
    """rouge-score's settings as used here: its version, NLTK's Porter stemmer, rougeLsum on a text's lines, or its
    rule-split sentences when it is one line."""
    return f"rouge-score:{version('rouge-score')}|stem:porter|nltk:{version('nltk')}|lsum:lines-else-rule"
