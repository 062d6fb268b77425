"""Paired tests of B minus A that hold their level at every n they report, with intervals of the difference.

One function per kind of metric (``guide/metrics.md``, "Comparing two runs"); row i of A and of B is the same pair:

| kind | test | interval of B - A |
|---|---|---|
| proportion (0/1 per row) | exact McNemar: a binomial test on the discordant pairs (``scipy.stats.binomtest``) | Tango's score interval for paired proportions |
| mean, ratio (numerator, denominator per row) | paired sign-flip permutation test (``scipy.stats.permutation_test``, exact up to 2^13 informative pairs); for a decision, the skewness-corrected paired t | paired t (means, from 10 pairs); MOVER with Fieller's interval per side (ratios, from 20) |
| corpus (sacreBLEU statistics per row) | paired approximate randomization, as sacreBLEU's ``paired_ar`` but counting ties as extreme | sacreBLEU's paired bootstrap (percentile) |

Every test says "too few pairs to test" (``PairedTest.too_few``, p-value NaN) when even the most extreme outcome
of the pairs at hand could not reach p < alpha: an exact test of m informative pairs (discordant, or pairs whose two
rows differ) cannot go below 2^-m one-sided, 2^(1-m) two-sided, so 2 discordant pairs can never be significant at
0.05. Intervals of differences need ``MIN_PAIRED_PROPORTION_ROWS``, ``MIN_DIFFERENCE_ROWS`` or ``MIN_RATIO_DIFFERENCE_ROWS`` pairs (the corpus one
``MIN_CORPUS_ROWS``), the n from which they held their coverage in ``benchmarks/bench_calibration.py``. ``holm`` adjusts several p-values
together. Nothing here imports MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize
from scipy import stats as scipy_stats

from .stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RatioStatistic,
    all_or_none_bound,
    ratio,
    ratio_of_sums,
)

Alternative = Literal["two-sided", "greater", "less"]  # "greater": B - A > 0
DEFAULT_PERMUTATIONS = 9999
# sacreBLEU's paired bootstrap interval of a corpus difference held its coverage from this many pairs.
MIN_CORPUS_ROWS = 30
# Tango's interval of a paired difference of proportions is reported from this many pairs: its exact coverage
# (benchmarks/bench_calibration.py, a sum over every outcome of the pairs) is >= 0.93 at every rate from there on.
MIN_PAIRED_PROPORTION_ROWS = 10
# The paired t interval of a difference of means is reported from this many pairs, the MOVER-Fieller one of a
# difference of ratios from MIN_RATIO_DIFFERENCE_ROWS (their coverage measured in benchmarks/bench_calibration.py; at
# 10 pairs Fieller's interval of a side's ratio is now and then unbounded, when its claim counts vary too much).
MIN_DIFFERENCE_ROWS = 10
MIN_RATIO_DIFFERENCE_ROWS = 20


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


def tango_interval(only_a: int, only_b: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Tango's asymptotic score interval (Stat Med 1998;17:891-908) of B's proportion minus A's over ``n`` paired 0/1
    rows, of which ``only_a`` are 1 for A alone and ``only_b`` for B alone.

    It inverts the score test of a hypothesised difference d: with the discordant counts b = ``only_a`` and
    c = ``only_b``, the statistic (c - b - n d) / sqrt(n (2 q + d (1 - d))) uses q, the maximum-likelihood
    probability of an "A alone" pair when the difference is d (the root in [0, 1] of
    2n q^2 + (-(b + c) + (2n - c + b) d) q - b d (1 - d) = 0); each bound is the d at which the statistic meets the
    normal quantile. Two runs that agree on every row still get an interval of positive width around 0. Fewer than 2
    pairs give (nan, nan).
    """
    if n < 2:
        return (math.nan, math.nan)
    z = float(scipy_stats.norm.ppf(1 - (1 - confidence) / 2))
    b, c = float(only_a), float(only_b)

    def statistic(d: float) -> float:
        # q(d): the root of 2n q^2 + (-(b + c) + (2n - c + b) d) q - b d (1 - d) = 0 that is a probability
        linear = -(b + c) + (2 * n - c + b) * d
        q = (math.sqrt(max(linear * linear + 8 * n * b * d * (1 - d), 0.0)) - linear) / (4 * n)
        return (c - b - n * d) / math.sqrt(max(n * (2 * q + d * (1 - d)), 1e-300))

    edge = 1 - 1e-12
    estimate = (c - b) / n
    low = -1.0 if estimate <= -1 else optimize.brentq(lambda d: statistic(d) - z, -edge, min(estimate, edge), xtol=1e-12)
    high = 1.0 if estimate >= 1 else optimize.brentq(lambda d: statistic(d) + z, max(estimate, -edge), edge, xtol=1e-12)
    return (float(low), float(high))


def paired_proportion(
    a: RatioStatistic, b: RatioStatistic, *, alternative: Alternative = "two-sided", confidence: float = 0.95
) -> PairedTest:
    """Exact McNemar over the pairs where both rows count (denominator 1), Tango's interval of the difference (from
    ``MIN_PAIRED_PROPORTION_ROWS`` pairs)."""
    counted = (a.denominator > 0) & (b.denominator > 0)
    x, y = a.numerator[counted] > 0, b.numerator[counted] > 0
    both, only_a, only_b = int(np.sum(x & y)), int(np.sum(x & ~y)), int(np.sum(~x & y))
    n = int(counted.sum())
    value_a, value_b = ratio(both + only_a, n), ratio(both + only_b, n)
    discordant = only_a + only_b
    too_few = _too_few(discordant, alternative, 1 - confidence)
    p_value = math.nan if too_few or n == 0 else float(scipy_stats.binomtest(only_b, discordant, 0.5, alternative=alternative).pvalue)
    low, high = tango_interval(only_a, only_b, n, confidence=confidence) if n >= MIN_PAIRED_PROPORTION_ROWS else (math.nan, math.nan)
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
    (each pair's two rows swapped or not) and the interval of the difference (``_difference_interval``).

    A mean (``kind="mean"``) stands on the pairs where both rows count; a ratio on the pairs where either does (a
    row of 0 claims adds nothing to its side's sums but stays paired).
    """
    table, value_a, value_b = _pairs(a, b, kind)
    informative, too_few, p_value, exact = _swapped(table[:, :2], table[:, 2:], ratio_of_sums, alternative, permutations, seed, confidence)
    test = f"sign-flip permutation ({'exact' if exact else f'{permutations} permutations'})"
    low, high = _difference_interval(table, kind, confidence)
    return PairedTest(kind, test, value_a, value_b, value_b - value_a, low, high, p_value, len(table), informative, alternative, too_few)


def _pairs(a: RatioStatistic, b: RatioStatistic, kind: str) -> tuple[np.ndarray, float, float]:
    """The pairs a mean (both rows count) or a ratio (either does) stands on, as rows of (numerator, denominator) of
    A then of B, and each side's value over them."""
    counted = (a.denominator > 0) & (b.denominator > 0) if kind == "mean" else (a.denominator > 0) | (b.denominator > 0)
    table = np.column_stack([a.numerator, a.denominator, b.numerator, b.denominator])[counted]
    return table, ratio(table[:, 0].sum(), table[:, 1].sum()), ratio(table[:, 2].sum(), table[:, 3].sum())


def _difference_interval(table: np.ndarray, kind: str, confidence: float) -> tuple[float, float]:
    """The paired t interval of a difference of means (from ``MIN_DIFFERENCE_ROWS`` pairs), MOVER-Fieller of a
    difference of ratios (from ``MIN_RATIO_DIFFERENCE_ROWS``); NaN below."""
    if kind == "mean":
        if len(table) < MIN_DIFFERENCE_ROWS:
            return (math.nan, math.nan)
        return paired_t_interval(table[:, 2] / table[:, 3] - table[:, 0] / table[:, 1], confidence=confidence)
    if len(table) < MIN_RATIO_DIFFERENCE_ROWS:
        return (math.nan, math.nan)
    return mover_ratio_interval(table[:, :2], table[:, 2:], confidence=confidence)


def paired_skew_corrected_t(
    a: RatioStatistic, b: RatioStatistic, *, kind: str = "ratio", alternative: Alternative = "greater", confidence: float = 0.95,
) -> PairedTest:
    """B minus A of a mean or a ratio of sums, tested as a decision needs: does B's aggregate exceed A's (not "are the
    pairs exchangeable", which the sign-flip test answers)? Johnson's skewness-corrected t (J Am Stat Assoc 1978;
    73:536-544) on each pair's contribution to the difference (a mean's difference of values; a ratio's difference of
    the two linearisations (y - r n) / mean n), with t(n - 1) tails.

    A mean or ratio carried by rare long rows has skewed contributions, which a plain t (or the sign-flip test) reads
    as evidence: a candidate equal on claim support whose 3% of long summaries are bad (the scenario of
    ``benchmarks/gate_scenarios.py``) passed a one-sided t at 0.025 7.6% of the time at 100 pairs in a side simulation
    of 4,000 draws, the corrected one 4.5% (1-2% from 150 pairs). A difference on the null's side gives p >= 0.5, so a
    clearly worse candidate is never read as better. Pairs enter as ``paired_ratio`` takes them, with its interval."""
    table, value_a, value_b = _pairs(a, b, kind)
    n = len(table)
    difference = value_b - value_a
    test = "paired t, skewness-corrected (Johnson)"
    low, high = _difference_interval(table, kind, confidence)
    if kind == "mean":
        contributions = table[:, 2] / table[:, 3] - table[:, 0] / table[:, 1]
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            contributions = ((table[:, 2] - value_b * table[:, 3]) / table[:, 3].mean()
                             - (table[:, 0] - value_a * table[:, 1]) / table[:, 1].mean())
    informative = int(np.sum(np.any(table[:, :2] != table[:, 2:], axis=1)))
    if n < 3 or not np.all(np.isfinite(contributions)) or not np.ptp(contributions) > 0:
        return PairedTest(kind, test, value_a, value_b, difference, low, high, math.nan, n, informative, alternative, True)
    spread = float(np.std(contributions, ddof=1)) / math.sqrt(n)
    t = difference / spread
    bend = float(scipy_stats.skew(contributions, bias=False)) / (6 * math.sqrt(n))
    # "greater" on the contributions, "less" the same on the negated ones (t and the skew change sign). Johnson's
    # quadratic turns back for a large t against the skew: a B worse on 140 of 150 pairs read as better at p = 3.5e-5.
    # A difference on the null's side is never evidence against it (p >= 0.5). (Monotone forms, Hall's cubic term or
    # slope 1 past the turning point, rejected a skewed equal candidate 7% and 12% of the time at 150 pairs where
    # Johnson's did 4.4%, by simulation: the turn is the correction distrusting a mean that rests on rare rows.)
    greater, less = (float(scipy_stats.t.sf(sign * t + sign * bend * (1 + 2 * t * t), n - 1)) for sign in (1, -1))
    greater, less = (max(greater, 0.5) if difference <= 0 else greater), (max(less, 0.5) if difference >= 0 else less)
    p_value = {"greater": greater, "less": less}.get(alternative, min(1.0, 2 * min(greater, less)))
    return PairedTest(kind, test, value_a, value_b, difference, low, high, p_value, n, informative, alternative, False)


def paired_t_interval(differences: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """The paired t interval of a difference of means: the mean of the pairs' differences +- t(n - 1) s / sqrt(n).
    (nan, nan) below 2 pairs or when every pair differs by the same amount (no spread: no zero-width interval)."""
    differences = np.asarray(differences, dtype=float)
    n = len(differences)
    if n < 2 or not np.ptp(differences) > 0:
        return (math.nan, math.nan)
    half = float(scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) * float(np.std(differences, ddof=1)) / math.sqrt(n)
    centre = float(differences.mean())
    return centre - half, centre + half


def fieller_interval(numerators: np.ndarray, denominators: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Fieller's interval of a ratio of means (sum y / sum n over the rows), with t(n - 1) quantiles: the values of r
    at which (mean y - r mean n)^2 = t^2 var(mean y - r mean n). Every claim supported (or none) gives the exact
    ``all_or_none_bound``; (nan, nan) when the denominator's mean is not clear of 0 (the interval is unbounded) or
    nothing varies."""
    y, d = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    n = len(y)
    if n < 2 or d.sum() <= 0:
        return (math.nan, math.nan)
    value = y.sum() / d.sum()
    if value <= 0 or value >= 1:
        return all_or_none_bound(int(np.count_nonzero(d)), value >= 1, confidence=confidence)  # its rows are the trials
    q2 = float(scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) ** 2
    covariance = np.cov(np.vstack([y, d]), ddof=1) / n  # of the two means
    mean_y, mean_d = y.mean(), d.mean()
    a = mean_d**2 - q2 * covariance[1, 1]
    b = -2 * (mean_y * mean_d - q2 * covariance[0, 1])
    c = mean_y**2 - q2 * covariance[0, 0]
    discriminant = b * b - 4 * a * c
    if a <= 0 or discriminant <= 0:
        return (math.nan, math.nan)
    root = math.sqrt(discriminant)
    return float((-b - root) / (2 * a)), float((-b + root) / (2 * a))


def mover_ratio_interval(a: np.ndarray, b: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """The MOVER interval (Newcombe; Zou and Donner) of B's ratio of sums minus A's over paired rows (``a``, ``b``:
    numerator, denominator per row), from each side's ``fieller_interval`` and the correlation of the two ratios'
    linearisations (y - r n) across the pairs. (nan, nan) when a side has no interval."""
    low_a, high_a = fieller_interval(a[:, 0], a[:, 1], confidence=confidence)
    low_b, high_b = fieller_interval(b[:, 0], b[:, 1], confidence=confidence)
    if any(math.isnan(v) for v in (low_a, high_a, low_b, high_b)):
        return (math.nan, math.nan)
    ratio_a, ratio_b = a[:, 0].sum() / a[:, 1].sum(), b[:, 0].sum() / b[:, 1].sum()
    residual_a, residual_b = a[:, 0] - ratio_a * a[:, 1], b[:, 0] - ratio_b * b[:, 1]
    spread = float(np.std(residual_a) * np.std(residual_b))
    rho = float(np.mean((residual_a - residual_a.mean()) * (residual_b - residual_b.mean())) / spread) if spread > 0 else 0.0
    difference = ratio_b - ratio_a
    below = math.sqrt(max((ratio_b - low_b) ** 2 + (high_a - ratio_a) ** 2 - 2 * rho * (ratio_b - low_b) * (high_a - ratio_a), 0.0))
    above = math.sqrt(max((high_b - ratio_b) ** 2 + (ratio_a - low_a) ** 2 - 2 * rho * (high_b - ratio_b) * (ratio_a - low_a), 0.0))
    if not below + above > 0:
        return (math.nan, math.nan)
    return difference - below, difference + above


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
