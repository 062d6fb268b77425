"""Traditional reference-based metrics: ROUGE (rouge-score), BLEU, chrF and TER (sacreBLEU), lengths.

Nothing here downloads anything: rouge-score's Porter stemmer is NLTK code that needs no NLTK data, and sentences
are split by a rule (``text.split_sentences``), not by NLTK's punkt model (which would need a download).

Per row: ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum`` (F1, Porter-stemmed; for Lsum a text's lines, or its
rule-split sentences when it is one line: ``summary_sentences``),
``bleu``, ``chrf`` (``sentence_score``), ``ter`` (only when asked: it is slow), ``summary_words`` and, with sources,
``compression_ratio``. Aggregates: ROUGE and lengths are means over rows; BLEU, chrF and TER are the corpus scores
of all rows (a corpus BLEU is not the mean of sentence BLEUs), from the sums of the rows' sufficient statistics
(``sacrebleu_metrics``), which also give their paired comparison (``paired_corpus_difference``).

Speed: the same numbers as calling rouge-score row by row, faster. Stems are memoised (stemming was ~40% of
rouge-score's time), the rougeL LCS length is computed bit-parallel (``text.lcs_length``) instead of with
rouge-score's Python table (~30%), and rows are split across processes (joblib) when there are many.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from ..paired import Alternative, PairedTest, paired_corpus
from ..text import lcs_indices, lcs_length, normalised, split_sentences, texts
from .sacrebleu_metrics import CORPUS_METRICS, corpus_score, rouge_signature, sacrebleu_signatures, segment_scores

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
TRADITIONAL_COLUMNS = (*ROUGE_TYPES, "bleu", "chrf", "ter", "summary_words", "compression_ratio")
PARALLEL_MIN_ROWS = 400  # below this, starting worker processes costs more than it saves


def _summary_level_lcs_f1(ref_sentences: list[list[str]], can_sentences: list[list[str]]) -> float:
    """rougeLsum's F1: rouge-score's summary-level union LCS (ROUGE paper 3.2, as in ROUGE-1.5.5), same counting."""
    ref_total, can_total = sum(map(len, ref_sentences)), sum(map(len, can_sentences))
    if not ref_sentences or not can_sentences or not ref_total or not can_total:
        return 0.0
    ref_counts = Counter(token for sentence in ref_sentences for token in sentence)
    can_counts = Counter(token for sentence in can_sentences for token in sentence)
    hits = 0
    for ref in ref_sentences:
        union = sorted(set().union(*(lcs_indices(ref, can) for can in can_sentences)))
        for token in (ref[i] for i in union):
            if can_counts[token] > 0 and ref_counts[token] > 0:
                hits += 1
                can_counts[token] -= 1
                ref_counts[token] -= 1
    return _f1(hits, can_total, ref_total)


@lru_cache(maxsize=1)
def _scorers() -> tuple[Any, Any]:
    """Built once per process: the memoising tokenizer and rouge-score's n-gram scorer."""
    from nltk.stem import porter
    from rouge_score import rouge_scorer, tokenize, tokenizers

    stem = lru_cache(maxsize=500_000)(porter.PorterStemmer().stem)

    class _Stemmer:  # what rouge-score's tokenize() calls: .stem(word)
        def stem(self, word: str) -> str:
            return stem(word)

    class MemoTokenizer(tokenizers.Tokenizer):
        """rouge-score's own tokenization, with the Porter stems memoised."""

        def __init__(self) -> None:
            self._stemmer = _Stemmer()

        def tokenize(self, text: str) -> list[str]:
            return tokenize.tokenize(text, self._stemmer)

    tokenizer = MemoTokenizer()
    ngram_scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], tokenizer=tokenizer)
    return tokenizer, ngram_scorer


def _f1(overlap: int, predicted: int, target: int) -> float:
    if not predicted or not target:
        return 0.0
    precision, recall = overlap / predicted, overlap / target
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class _Row:
    prediction: str
    reference: str  # sentences joined by spaces
    reference_lines: str  # one sentence a line, for rougeLsum


def _score_rows(rows: list[_Row], with_ter: bool) -> tuple[list[dict[str, float]], dict[str, list[Any]]]:
    """Per-row values, and sacreBLEU's per-row statistics for the corpus scores."""
    tokenizer, ngram_scorer = _scorers()
    scored = []
    for row in rows:
        rouge = ngram_scorer.score(row.reference, row.prediction)
        target_tokens, predicted_tokens = tokenizer.tokenize(row.reference), tokenizer.tokenize(row.prediction)
        ref_sentences = [tokenizer.tokenize(s) for s in row.reference_lines.split("\n") if s]
        can_sentences = [tokenizer.tokenize(s) for s in summary_sentences(row.prediction)]
        scored.append(
            {
                "rouge1": rouge["rouge1"].fmeasure,
                "rouge2": rouge["rouge2"].fmeasure,
                "rougeL": _f1(lcs_length(target_tokens, predicted_tokens), len(predicted_tokens), len(target_tokens)),
                "rougeLsum": _summary_level_lcs_f1(ref_sentences, can_sentences),
            }
        )
    hypotheses, references = [r.prediction for r in rows], [r.reference for r in rows]
    statistics: dict[str, list[Any]] = {}
    for name in _corpus_names(with_ter):
        sentence_scores, statistics[name] = segment_scores(name, hypotheses, references)
        for values, score in zip(scored, sentence_scores):
            values[name] = score
    return scored, statistics


def summary_sentences(text: str) -> list[str]:
    """rougeLsum's sentences of a text: its lines when it has several (rouge-score's own rule: the text came split,
    and the rule split "Dr. Brown" and "U.S." inside a line: 0.696 against rouge-score's 0.522), else the rule's
    (``text.split_sentences``), since rouge-score would take a text without newlines as one sentence."""
    lines = [line for line in text.split("\n") if line.strip()]
    return lines if len(lines) > 1 else split_sentences(text)


def _corpus_names(ter: bool) -> tuple[str, ...]:
    return CORPUS_METRICS if ter else tuple(name for name in CORPUS_METRICS if name != "ter")


@dataclass(frozen=True)
class TraditionalResult:
    """``rows``: one row per prediction, in order; ``metrics``: the aggregates; ``statistics``: sacreBLEU's
    per-row sufficient statistics (``{"bleu": [[...], ...], "chrf": ..., "ter": ...}``, laid out as in
    ``sacrebleu_metrics``), which add up to the corpus scores; ``signatures``: what produced the reference
    metrics (``traditional_signatures``), empty without references; ``reference_keys``: each row's reference
    fingerprint (``reference_key``), which a comparison pairs the reference metrics on."""

    rows: pd.DataFrame
    metrics: dict[str, float]
    statistics: dict[str, list[list[float]]] = field(default_factory=dict, repr=False)
    signatures: dict[str, str] = field(default_factory=dict)
    reference_keys: list[str] = field(default_factory=list, repr=False)


def statistics_column(name: str) -> str:
    """The per-row table's column holding a corpus metric's sacreBLEU statistics: ``bleu`` -> ``bleu_stats``."""
    return f"{name}_stats"


def traditional_signatures(ter: bool = False) -> dict[str, str]:
    """The signature of each reference metric, computing nothing from data: ``rouge`` (rouge-score's settings),
    ``bleu``, ``chrf`` and, with ``ter``, ``ter`` (sacreBLEU's own, e.g. BLEU's
    ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``; per-row BLEU is the same with ``eff:yes``)."""
    return {"rouge": rouge_signature(), **sacrebleu_signatures(_corpus_names(ter))}


def corpus_scores(summed: dict[str, Sequence[float]]) -> dict[str, float]:
    """Corpus BLEU, chrF (and TER) from the element-wise sums of the rows' ``statistics`` (of any parts of the
    corpus: the sums of parts are the sums of the whole)."""
    return {name: corpus_score(name, values) for name, values in summed.items()}


def paired_corpus_difference(
    name: str,
    stats_a: Sequence[Sequence[float]],
    stats_b: Sequence[Sequence[float]],
    *,
    alternative: Alternative = "two-sided",
    statistics: stats.StatisticsOptions = stats.StatisticsOptions(),
) -> PairedTest:
    """Corpus ``name`` (bleu, chrf or ter) of B minus A over the same rows: sacreBLEU's paired approximate
    randomization and paired bootstrap on the rows' statistics (``paired.paired_corpus``); ``stats_a[i]`` and
    ``stats_b[i]`` are ``TraditionalResult.statistics[name][i]`` of the same row under each. For TER lower is
    better: B better gives a negative difference. ``statistics``: the resamples, seed and level (``stats.StatisticsOptions``)."""
    width = len(stats_a[0]) if len(stats_a) else 0
    return paired_corpus(
        np.asarray(stats_a, dtype=float).reshape(len(stats_a), width),
        np.asarray(stats_b, dtype=float).reshape(len(stats_b), width),
        lambda summed: corpus_score(name, summed),
        alternative=alternative,
        resamples=statistics.resamples,
        seed=statistics.seed,
        confidence=statistics.confidence,
    )


def reference_key(reference: str | Sequence[str]) -> str:
    """The fingerprint of a reference (its sentences, whitespace normalised): two runs' rows compare on ROUGE,
    BLEU, chrF and TER only when their references' fingerprints match."""
    sentences = [reference] if isinstance(reference, str) else list(reference)
    text = "\n".join(" ".join(normalised(str(sentence)).split()) for sentence in sentences)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def traditional_metrics(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]] | None = None,
    sources: Sequence[str] | None = None,
    *,
    ter: bool = False,
    n_jobs: int | None = None,
) -> TraditionalResult:
    """ROUGE, BLEU, chrF (and TER when ``ter=True``) against ``references``; lengths and compression vs ``sources``.

    A reference may be a text or a list of its sentences (then rougeLsum uses those sentence boundaries, e.g. the
    BBC set's ``reference_summary_sentences``). ``n_jobs`` processes score the rows (default: every core when
    there are at least 400 rows, else 1). TER costs about 0.8 s per BBC-length summary on one core here.
    """
    predictions = texts(predictions, "prediction")
    count = len(predictions)
    rows: dict[str, list[float]] = {"summary_words": [len(p.split()) for p in predictions]}
    metrics: dict[str, float] = {}
    if sources is not None:
        sources = texts(sources, "source")
        if len(sources) != count:
            raise ValueError(f"{count} predictions but {len(sources)} sources")
        rows["compression_ratio"] = [
            words / len(s.split()) if s.split() else math.nan for words, s in zip(rows["summary_words"], sources)
        ]
    if references is not None:
        references = texts(references, "reference", allow_sentence_lists=True)
        if len(references) != count:
            raise ValueError(f"{count} predictions but {len(references)} references")
        prepared = []
        for prediction, reference in zip(predictions, references):
            sentences = list(reference) if not isinstance(reference, str) else summary_sentences(reference)
            joined = " ".join(sentences) if not isinstance(reference, str) else reference
            prepared.append(_Row(prediction, joined, "\n".join(sentences)))
        scored, statistics = _score_in_parallel(prepared, ter, n_jobs)
        for name in [*ROUGE_TYPES, "bleu", "chrf", *(["ter"] if ter else [])]:
            rows[name] = [values[name] for values in scored]
        for name in ROUGE_TYPES:
            metrics[name] = _mean(rows[name])
        metrics.update(corpus_scores({name: [sum(column) for column in zip(*segments)] for name, segments in statistics.items()}))
    metrics["summary_words"] = _mean(rows["summary_words"])
    if "compression_ratio" in rows:
        metrics["compression_ratio"] = _mean(rows["compression_ratio"])
    order = [name for name in TRADITIONAL_COLUMNS if name in rows]
    return TraditionalResult(
        rows=pd.DataFrame({name: rows[name] for name in order}),
        metrics=metrics,
        statistics=statistics if references is not None else {},
        signatures=traditional_signatures(ter) if references is not None else {},
        reference_keys=[reference_key(reference) for reference in references] if references is not None else [],
    )


def _mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _score_in_parallel(
    rows: list[_Row], with_ter: bool, n_jobs: int | None
) -> tuple[list[dict[str, float]], dict[str, list[Any]]]:
    if n_jobs is None:
        n_jobs = (os.cpu_count() or 1) if len(rows) >= PARALLEL_MIN_ROWS or with_ter else 1
    n_jobs = max(1, min(n_jobs, len(rows)))
    if n_jobs == 1:
        return _score_rows(rows, with_ter)
    # joblib's loky workers: no __main__ guard needed in the caller's script, and reused across calls.
    from joblib import Parallel, delayed

    slices = [rows[start::n_jobs] for start in range(n_jobs)]  # interleaved: long and short rows balance
    parts = Parallel(n_jobs=n_jobs, backend="loky")(delayed(_score_rows)(part, with_ter) for part in slices)
    scored: list[dict[str, float]] = [{}] * len(rows)
    statistics: dict[str, list[Any]] = {name: [None] * len(rows) for name in parts[0][1]}
    for start, (part_scores, part_statistics) in enumerate(parts):
        scored[start::n_jobs] = part_scores
        for name, segments in part_statistics.items():
            statistics[name][start::n_jobs] = segments
    return scored, statistics
