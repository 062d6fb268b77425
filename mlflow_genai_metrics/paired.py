"""Paired tests of B minus A that hold their level at every n they report, with intervals of the difference.

One function per kind of metric (``guide/metrics.md``, "Comparing two runs"); row i of A and of B is the same pair:

| kind | test | interval of B - A |
|---|---|---|
| proportion (0/1 per row) | exact McNemar: a binomial test on the discordant pairs (``scipy.stats.binomtest``) | Newcombe's hybrid score interval for paired proportions |
| mean, ratio (numerator, denominator per row) | paired sign-flip permutation test (``scipy.stats.permutation_test``, exact up to 2^13 informative pairs) | BCa bootstrap of the pairs (``stats.bca_interval``), from 100 pairs |
| corpus (sacreBLEU statistics per row) | paired approximate randomization, as sacreBLEU's ``paired_ar`` but counting ties as extreme | sacreBLEU's paired bootstrap (percentile) |

Every test says "too few pairs to test" (``PairedTest.too_few``, p-value NaN) when even the most extreme outcome
of the pairs at hand could not reach p < alpha: an exact test of m informative pairs (discordant, or pairs whose two
rows differ) cannot go below 2^-m one-sided, 2^(1-m) two-sided, so 2 discordant pairs can never be significant at
0.05. Intervals of differences of means and ratios need ``MIN_DIFFERENCE_ROWS`` pairs (the corpus one
``MIN_CORPUS_ROWS``), the n from which they held their coverage in ``benchmarks/bench_calibration.py``. ``holm`` adjusts several p-values
together. Nothing here imports MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from .stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RatioHistogram,
    RatioStatistic,
    bca_interval,
    ratio,
    ratio_of_sums,
    wilson_interval,
)

Alternative = Literal["two-sided", "greater", "less"]  # "greater": B - A > 0
DEFAULT_PERMUTATIONS = 9999
# sacreBLEU's paired bootstrap interval of a corpus difference held its coverage from this many pairs.
MIN_CORPUS_ROWS = 30
# The BCa interval of a paired difference of means or ratios: near a bound (claim support 0.82, coverage 0.9) it
# covered 0.91 at 20-30 pairs in bench_calibration.py (3,000 replications), 0.925-0.93 at 100.
MIN_DIFFERENCE_ROWS = 100


@dataclass(frozen=True)
class PairedTest:
    """B minus A over ``n`` pairs, with its test and interval.

    ``p_value`` is NaN when ``too_few`` (the pairs could not reach the level whatever they showed) or when the
    metric stands on no pair; ``ci_low``/``ci_high`` are NaN below the n at which the interval holds its coverage.
    ``informative`` counts the pairs that can move the test (discordant pairs; pairs whose two rows differ).
    """

    kind: str
    test: str
    a: float
    b: float
    difference: float  # b - a
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    informative: int
    alternative: Alternative = "two-sided"
    too_few: bool = False

    @property
    def note(self) -> str:
        if self.n == 0:
            return "no pair to compare"
        if self.too_few:
            return f"too few pairs to test ({self.informative} of {self.n} pairs differ)"
        return ""


def _too_few(informative: int, alternative: Alternative, alpha: float, resamples: int | None = None) -> bool:
    """Whether the most extreme outcome of ``informative`` pairs stays at or above ``alpha``."""
    smallest = 0.5**informative * (1 if alternative != "two-sided" else 2)
    if resamples is not None and 2**informative > resamples:  # a random permutation test stops at 1 / (R + 1)
        smallest = max(smallest, 1 / (resamples + 1))
    return min(smallest, 1.0) >= alpha


def newcombe_interval(both: int, only_a: int, only_b: int, neither: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) of B's proportion minus A's over paired 0/1 rows, from the
    four cells: both 1, only A 1, only B 1, neither."""
    n = both + only_a + only_b + neither
    if n < 2:
        return (math.nan, math.nan)
    p_a, p_b = (both + only_a) / n, (both + only_b) / n
    l_a, u_a = _wilson(both + only_a, n, confidence)
    l_b, u_b = _wilson(both + only_b, n, confidence)
    product = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    # The correlation of the pairs, with Newcombe's continuity correction when positive (uncorrected, identical
    # runs would give a zero-width interval).
    association = both * neither - only_a * only_b
    if association > 0:
        association = max(association - n / 2, 0.0)
    phi = association / math.sqrt(product) if product > 0 else 0.0
    difference = p_b - p_a
    low = difference - math.sqrt(max((p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2, 0.0))
    high = difference + math.sqrt(max((u_b - p_b) ** 2 - 2 * phi * (u_b - p_b) * (p_a - l_a) + (p_a - l_a) ** 2, 0.0))
    return (max(low, -1.0), min(high, 1.0))


def _wilson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    histogram = RatioHistogram.of(np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([successes, trials - successes]))
    return wilson_interval(histogram, confidence=confidence)


def paired_proportion(
    a: RatioStatistic, b: RatioStatistic, *, alternative: Alternative = "two-sided", confidence: float = 0.95
) -> PairedTest:
    """Exact McNemar over the pairs where both rows count (denominator 1), Newcombe's interval of the difference."""
    counted = (a.denominator > 0) & (b.denominator > 0)
    x, y = a.numerator[counted] > 0, b.numerator[counted] > 0
    both, only_a, only_b = int(np.sum(x & y)), int(np.sum(x & ~y)), int(np.sum(~x & y))
    n = int(counted.sum())
    neither = n - both - only_a - only_b
    value_a, value_b = ratio(both + only_a, n), ratio(both + only_b, n)
    discordant = only_a + only_b
    too_few = _too_few(discordant, alternative, 1 - confidence)
    p_value = math.nan if too_few or n == 0 else float(scipy_stats.binomtest(only_b, discordant, 0.5, alternative=alternative).pvalue)
    low, high = newcombe_interval(both, only_a, only_b, neither, confidence=confidence)
    return PairedTest("proportion", "exact McNemar", value_a, value_b, value_b - value_a, low, high, p_value, n, discordant,
                      alternative, too_few)


def paired_ratio(
    a: RatioStatistic,
    b: RatioStatistic,
    *,
    kind: str = "ratio",
    alternative: Alternative = "two-sided",
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> PairedTest:
    """B's ratio of sums minus A's (a mean when every denominator is 0 or 1): the paired sign-flip permutation test
    (each pair's two rows swapped or not) and the BCa interval of the difference over the pairs.

    A mean (``kind="mean"``) stands on the pairs where both rows count; a ratio on the pairs where either does (a
    row of 0 claims adds nothing to its side's sums but stays paired).
    """
    if kind == "mean":
        counted = (a.denominator > 0) & (b.denominator > 0)
    else:
        counted = (a.denominator > 0) | (b.denominator > 0)
    table = np.column_stack([a.numerator, a.denominator, b.numerator, b.denominator])[counted]
    n = len(table)
    value_a, value_b = ratio(table[:, 0].sum(), table[:, 1].sum()), ratio(table[:, 2].sum(), table[:, 3].sum())
    informative, too_few, p_value, exact = _swapped(table[:, :2], table[:, 2:], ratio_of_sums, alternative, permutations, seed, confidence)
    test = f"sign-flip permutation ({'exact' if exact else f'{permutations} permutations'})"
    low, high = (math.nan, math.nan)
    if n >= MIN_DIFFERENCE_ROWS:
        distinct, counts = np.unique(table, axis=0, return_counts=True)
        low, high = bca_interval(distinct, counts, _difference_of_ratios, resamples=resamples, seed=seed, confidence=confidence)
    return PairedTest(kind, test, value_a, value_b, value_b - value_a, low, high, p_value, n, informative, alternative, too_few)


def _difference_of_ratios(sums: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[..., 2] / sums[..., 3] - sums[..., 0] / sums[..., 1]


def _swapped(
    a: np.ndarray,
    b: np.ndarray,
    score: Callable[[np.ndarray], np.ndarray],
    alternative: Alternative,
    permutations: int,
    seed: int,
    confidence: float,
) -> tuple[int, bool, float, bool]:
    """The paired swap test of ``score(B sums) - score(A sums)`` over rows ``a[i]``, ``b[i]``: each pair whose two
    rows differ (informative) exchanged or not, the others added to both sides as they are.
    ``scipy.stats.permutation_test`` with ``permutation_type="samples"`` does the swapping on row indices, exact
    while 2^informative <= ``permutations``. Gives (informative, too_few, p-value (NaN when too few), exact)."""
    differs = np.any(a != b, axis=1)
    informative = int(differs.sum())
    exact = 2**informative <= permutations
    too_few = _too_few(informative, alternative, 1 - confidence, None if exact else permutations)
    if too_few:
        return informative, True, math.nan, exact
    values = np.concatenate([a[differs], b[differs]])  # A's informative rows, then B's
    fixed_a, fixed_b = a[~differs].sum(axis=0), b[~differs].sum(axis=0)

    def statistic(index_a: np.ndarray, index_b: np.ndarray, axis: int = -1) -> np.ndarray:
        sums_a = values[index_a.astype(np.int64)].sum(axis=-2) + fixed_a
        sums_b = values[index_b.astype(np.int64)].sum(axis=-2) + fixed_b
        return score(sums_b) - score(sums_a)

    result = scipy_stats.permutation_test(
        (np.arange(informative), np.arange(informative) + informative),
        statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        alternative=alternative,
        rng=np.random.default_rng(seed),
    )
    return informative, False, float(result.pvalue), exact


def paired_corpus(
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    score: Callable[[np.ndarray], float],
    *,
    alternative: Alternative = "two-sided",
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> PairedTest:
    """B minus A of a corpus score (BLEU, chrF, TER) from each pair's sacreBLEU statistics under A and under B.

    The test is sacreBLEU's paired approximate randomization (each pair's statistics swapped between the systems
    or not, the corpus scores recomputed), with outcomes as extreme as the observed one counted (sacreBLEU counts
    only more extreme ones, which makes 1 differing row "significant"), exact while 2^pairs <= ``permutations``.
    The interval is sacreBLEU's paired bootstrap (rows resampled together, percentile), from ``MIN_CORPUS_ROWS``.
    """
    a, b = np.asarray(stats_a, dtype=float), np.asarray(stats_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired statistics need the same rows on both sides: {a.shape} and {b.shape}")
    n = len(a)
    value_a = float(score(a.sum(axis=0))) if n else math.nan
    value_b = float(score(b.sum(axis=0))) if n else math.nan

    def scores(sums: np.ndarray) -> np.ndarray:
        flat = sums.reshape(-1, sums.shape[-1])
        return np.array([score(row) for row in flat], dtype=float).reshape(sums.shape[:-1])

    informative, too_few, p_value, exact = _swapped(a, b, scores, alternative, permutations, seed, confidence)
    test = f"paired approximate randomization ({'exact' if exact else f'{permutations} trials'})"
    low, high = (math.nan, math.nan)
    if n >= MIN_CORPUS_ROWS:
        low, high = _paired_bootstrap_interval(a, b, scores, resamples, seed, confidence)
    return PairedTest("corpus", test, value_a, value_b, value_b - value_a, low, high, p_value, n, informative, alternative, too_few)


def _paired_bootstrap_interval(a, b, scores, resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """sacreBLEU's paired bootstrap: the same rows drawn for both systems, each resample's corpus scores compared."""
    rng = np.random.default_rng(seed)
    differences = []
    for start in range(0, resamples, 100):
        drawn = rng.multinomial(len(a), np.full(len(a), 1 / len(a)), size=min(100, resamples - start)).astype(float)
        differences.append(scores(drawn @ b) - scores(drawn @ a))
    distribution = np.concatenate(differences)
    distribution = distribution[np.isfinite(distribution)]
    if distribution.size == 0 or np.ptp(distribution) == 0:
        return (math.nan, math.nan)
    tail = (1 - confidence) / 2
    low, high = np.quantile(distribution, [tail, 1 - tail])
    return float(low), float(high)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of several p-values tested together (NaN ones, the untested, are left out and
    stay NaN): the k-th smallest of m is multiplied by m - k + 1, made monotone, capped at 1."""
    values = np.asarray(p_values, dtype=float)
    adjusted = np.full(values.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(values))
    order = tested[np.argsort(values[tested], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * values[index]))
        adjusted[index] = running
    return adjusted.tolist()
