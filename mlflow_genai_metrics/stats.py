"""Bootstrap confidence intervals and the paired bootstrap test, for statistics that are ratios of row sums.

Every aggregate we report is ``sum(numerator) / sum(denominator)`` over rows: a mean is numerator = value,
denominator = 1 (0 for rows that do not count); a micro average over claims is numerator = supported claims,
denominator = claims. Resampling rows keeps each row's numerator and denominator together.

Intervals of one aggregate (``bootstrap_interval``) are computed from the statistic's histogram: its distinct
(numerator, denominator) pairs and how many rows have each (``RatioHistogram``). Drawing N rows with replacement
from N rows and counting how many draws land on each distinct pair is a multinomial draw with probabilities
count / N, so resampling the histogram is exactly the row bootstrap, in distribution, at a cost that depends on
the number of distinct pairs (a handful for a rate, tens for claim counts), not on N. Histograms of parts of the
rows add up, so a distributed run (``mlflow_genai_metrics.spark``) gets the same histogram, hence the same value
and interval, as a single process, without bringing its rows together. Percentile method, fixed seed; the rare
resample whose denominator is 0 is ignored. Proportions (a share of rows) get the Wilson score interval instead
(``wilson_interval``), which stays honest at small n where the bootstrap collapses to a point.

The paired comparison (``paired_bootstrap``) resamples rows with ``scipy.stats.bootstrap`` (pairs by row id).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

__all__ = ["RatioHistogram", "RatioStatistic", "bootstrap_interval", "category_bootstrap_interval", "paired_bootstrap", "paired_corpus_bootstrap", "ratio", "wilson_interval"]

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 12345
_BATCH = 100  # resamples per vectorised step: bounds memory at ~100 x rows values


@dataclass(frozen=True)
class RatioStatistic:
    numerator: np.ndarray
    denominator: np.ndarray

    @classmethod
    def mean_of(cls, values: np.ndarray, counts: np.ndarray | None = None) -> RatioStatistic:
        """The mean of ``values`` over the rows where ``counts`` is 1 (every row when None); NaN values never count."""
        values = np.asarray(values, dtype=float)
        include = np.ones_like(values) if counts is None else np.asarray(counts, dtype=float)
        include = np.where(np.isnan(values), 0.0, include)
        return cls(np.where(include > 0, np.nan_to_num(values), 0.0), include)

    @property
    def value(self) -> float:
        return self.histogram().value

    def histogram(self) -> RatioHistogram:
        return RatioHistogram.of(self.numerator, self.denominator)


@dataclass(frozen=True)
class RatioHistogram:
    """A ratio statistic's rows grouped by their (numerator, denominator) pair: distinct pairs in sorted order
    and the number of rows with each. Everything ``bootstrap_interval`` needs, whatever the number of rows."""

    numerators: np.ndarray
    denominators: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, numerators: np.ndarray, denominators: np.ndarray, counts: np.ndarray | None = None) -> RatioHistogram:
        """Group pairs (``counts``: how many rows each given pair stands for; default 1 each)."""
        pairs = np.column_stack([np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)]).reshape(-1, 2)
        weights = np.ones(len(pairs), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
        distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)
        totals = np.bincount(inverse.reshape(-1), weights=weights, minlength=len(distinct)).astype(np.int64)
        keep = totals > 0
        return cls(distinct[keep, 0], distinct[keep, 1], totals[keep])

    @classmethod
    def merge(cls, histograms: list[RatioHistogram]) -> RatioHistogram:
        """The histogram of the union of the rows behind ``histograms``."""
        if not histograms:
            return cls.of(np.empty(0), np.empty(0))
        return cls.of(
            np.concatenate([h.numerators for h in histograms]),
            np.concatenate([h.denominators for h in histograms]),
            np.concatenate([h.counts for h in histograms]),
        )

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    @property
    def counted_rows(self) -> int:
        """Rows the statistic stands on: those whose denominator is not 0 (a failed row counts for none)."""
        return int(self.counts[self.denominators != 0].sum())

    @property
    def value(self) -> float:
        return ratio(float(self.counts @ self.numerators), float(self.counts @ self.denominators))


def ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else float("nan")


def _ratio_along(num: np.ndarray, den: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(num, axis=axis) / np.sum(den, axis=axis)


def _distribution(data: tuple[np.ndarray, ...], statistic, resamples: int, seed: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.bootstrap(
            data,
            statistic,
            n_resamples=resamples,
            paired=True,
            vectorized=True,
            method="percentile",
            batch=_BATCH,
            rng=np.random.default_rng(seed),
        )
    return np.asarray(result.bootstrap_distribution, dtype=float)


def bootstrap_interval(
    statistic: RatioStatistic | RatioHistogram,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic`` (rows resampled with replacement, via its histogram)."""
    histogram = statistic.histogram() if isinstance(statistic, RatioStatistic) else statistic
    if histogram.rows < 2 or not histogram.denominators.any():
        return (float("nan"), float("nan"))
    pairs = np.column_stack([histogram.numerators, histogram.denominators])

    def ratios(drawn: np.ndarray) -> np.ndarray:
        sums = drawn @ pairs  # drawn: rows drawn per distinct pair
        return sums[:, 0] / sums[:, 1]

    return category_bootstrap_interval(histogram.counts, ratios, resamples=resamples, seed=seed, confidence=confidence)


def category_bootstrap_interval(
    counts: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval of a statistic of rows that each fall in one of a few categories (a
    histogram's distinct pairs, a confusion matrix's cells), given the rows per category (``counts``).

    Drawing N rows with replacement is a multinomial draw of N over the categories, so this is the row bootstrap
    at a cost set by the number of categories. ``statistic`` maps drawn counts (resamples x categories) to one
    value per resample; a resample it is undefined on (NaN) is ignored. Fewer than 2 rows give (nan, nan).
    """
    counts = np.asarray(counts, dtype=np.int64)
    rows = int(counts.sum())
    if rows < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    shares = counts / rows
    parts = []
    for start in range(0, resamples, _BATCH):
        drawn = rng.multinomial(rows, shares, size=min(_BATCH, resamples - start))
        with np.errstate(invalid="ignore", divide="ignore"):
            parts.append(np.asarray(statistic(drawn), dtype=float))
    return _percentiles(np.concatenate(parts), confidence)


def wilson_interval(histogram: RatioHistogram, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion whose rows each count 0 or 1 success out of 0 or 1 trial.

    Unlike the bootstrap, it never collapses when every row agrees: 2 rows, both successes, give about
    [0.34, 1.0], not [1, 1]. No trial at all gives (nan, nan).
    """
    trials = int(round(float(histogram.counts @ histogram.denominators)))
    successes = int(round(float(histogram.counts @ histogram.numerators)))
    if trials == 0:
        return (float("nan"), float("nan"))
    interval = scipy_stats.binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def _percentiles(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    finite = distribution[np.isfinite(distribution)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedDifference:
    a: float
    b: float
    difference: float  # b - a
    ci_low: float
    ci_high: float
    p_value: float


def paired_bootstrap(
    a: RatioStatistic,
    b: RatioStatistic,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> PairedDifference:
    """B minus A over the same rows (row i of ``a`` and of ``b`` is the same id), resampled together.

    The two-sided p-value is ``min(1, 2 * min(P(d* <= 0), P(d* >= 0)))`` over the bootstrap differences d*,
    each share counted as (k + 1) / (resamples + 1) so that it is never exactly 0. Identical inputs give a
    difference of 0 and p = 1.
    """
    if len(a.numerator) != len(b.numerator):
        raise ValueError("paired statistics need the same rows on both sides")
    value_a, value_b = a.value, b.value
    difference = value_b - value_a
    if len(a.numerator) < 2:
        return PairedDifference(value_a, value_b, difference, float("nan"), float("nan"), float("nan"))
    distribution = _distribution(
        (a.numerator, a.denominator, b.numerator, b.denominator),
        lambda na, da, nb, db, axis=-1: _ratio_along(nb, db, axis) - _ratio_along(na, da, axis),
        resamples,
        seed,
    )
    return _paired_difference(value_a, value_b, distribution, confidence)


def _paired_difference(value_a: float, value_b: float, distribution: np.ndarray, confidence: float) -> PairedDifference:
    """B minus A with the percentile interval and the two-sided p-value of the bootstrap differences."""
    low, high = _percentiles(distribution, confidence)
    finite = distribution[np.isfinite(distribution)]
    if finite.size == 0:
        return PairedDifference(value_a, value_b, value_b - value_a, low, high, float("nan"))
    below = (np.count_nonzero(finite <= 0) + 1) / (finite.size + 1)
    above = (np.count_nonzero(finite >= 0) + 1) / (finite.size + 1)
    return PairedDifference(value_a, value_b, value_b - value_a, low, high, float(min(1.0, 2 * min(below, above))))


def paired_corpus_bootstrap(
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    score: Callable[[np.ndarray], float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> PairedDifference:
    """B minus A of a corpus score, as sacreBLEU's paired bootstrap: ``stats_a[i]`` and ``stats_b[i]`` (one row
    each of two arrays shaped rows x statistics) are pair i's sufficient statistics under each system, and
    ``score(summed)`` is the corpus score of statistics summed over rows (e.g. corpus BLEU).

    Rows are resampled together (the same draws as ``paired_bootstrap`` for the same seed and rows); each resample
    sums each side's statistics and scores them. Interval and p-value as ``paired_bootstrap``: identical inputs
    give a difference of 0 and p = 1.
    """
    a, b = np.asarray(stats_a, dtype=float), np.asarray(stats_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired statistics need the same rows on both sides: {a.shape} and {b.shape}")
    value_a, value_b = float(score(a.sum(axis=0))), float(score(b.sum(axis=0)))
    if len(a) < 2:
        return PairedDifference(value_a, value_b, value_b - value_a, float("nan"), float("nan"), float("nan"))

    def differences(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        # drawn: resamples x rows, row indices; how often each row was drawn, times its statistics, is the sum.
        times = np.apply_along_axis(np.bincount, -1, drawn, minlength=len(a)).astype(float)
        return np.array([score(sum_b) - score(sum_a) for sum_a, sum_b in zip(times @ a, times @ b)], dtype=float)

    distribution = _distribution((np.arange(len(a)),), differences, resamples, seed)
    return _paired_difference(value_a, value_b, distribution, confidence)
