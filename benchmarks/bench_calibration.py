"""Calibration of the paired tests, the confidence intervals and the gate, by simulation with known truth.

    .venv/bin/python benchmarks/bench_calibration.py                  # the full run, n = 2 .. 1000, and the gate
    .venv/bin/python benchmarks/bench_calibration.py --quick          # a few minutes on 2 cores: 200 reps, n <= 30
    .venv/bin/python benchmarks/bench_calibration.py --ns 5 30 --reps 400 --metrics richness bleu --gate-reps 0

For every metric kind of ``guide/metrics.md`` ("Comparing two runs") simulated paired runs A and B, whose true
aggregates are known, are given to the very functions a comparison and a gate call:

- proportion (``alignment``): 0/1 rows from a Gaussian copula (a latent per-row quality shared by the pair,
  correlation 0.5 on the latent scale), test ``paired.paired_proportion`` (exact McNemar, Tango's interval),
  one aggregate ``stats.proportion_interval`` (Clopper-Pearson);
- mean (``richness``: claim counts, Poisson-gamma mixtures; ``coverage``: covered key points k of K, K uniform in
  3..8 and shared by the pair, k binomial with a Beta latent share), test ``paired.paired_ratio(kind="mean")``
  (its interval the paired t), one aggregate ``stats.bootstrap_interval`` (BCa) of ``RatioStatistic.mean_of``;
- ratio (``claim_support_rate``: claims n_i negative binomial with a mean that falls as the latent support p_i
  rises, supported y_i ~ Binomial(n_i, p_i); rows with no claim included), test
  ``paired.paired_ratio(kind="ratio")`` (its interval MOVER with Fieller's per side), one aggregate
  ``stats.ratio_interval`` (the logit delta method) of ``RatioStatistic(y, n)``;
- corpus (``bleu``): a finite population of 5,000 synthetic segments' BLEU statistics under A and B, its true
  corpus difference computed on the whole population, n pairs drawn from it; test ``paired.paired_corpus``.

Under the null A and B are exchangeable within a pair (same marginal, symmetric dependence; for the corpus each
drawn pair's two systems are swapped at random), so the truth of B - A is 0; under the effect the truth is each
scenario's stated effect. A test rejects when p < alpha (0.05); "too few pairs to test" never rejects. Reported per
scenario and n: the false-positive rate (two-sided, and one-sided "greater"), the power at the stated effect, and
the coverage of the interval of one aggregate (A's, under the null) and of the difference (under the null and under
the effect), each over the reps in which it was reported, beside the share reported. Every figure carries its Monte
Carlo standard error. Below the table: the exact coverage of the Clopper-Pearson interval (a binomial sum) at the
proportion scenarios' rates, the smallest exact coverage of Tango's paired interval (a trinomial sum, to n = 100),
and the gate as users call it (``gate_scenarios``): the chance it registers an equal or worse candidate (skewed
rows, unreadable rows counted against the candidate, retries, several candidates), beside its power.

Targets: false-positive rate <= 0.05 and coverage >= 0.93 within Monte Carlo error; an interval reported must have
width > 0, none may be reported below its kind's minimum n (2 rows for proportions, ``MIN_PAIRED_PROPORTION_ROWS``
for their paired difference, ``MIN_INTERVAL_ROWS`` for means, ``MIN_RATIO_ROWS`` for ratios, ``MIN_DIFFERENCE_ROWS``
and ``MIN_RATIO_DIFFERENCE_ROWS`` for their paired differences, ``MIN_CORPUS_ROWS`` for the corpus), none may be
missing at or above it unless the rows leave nothing to vary. A cell beyond 2 standard errors of its target is flagged
``(!)``; the exit code is 1 when a cell misses its target beyond Monte Carlo error across its table (an exact binomial
test at a Bonferroni level, so that a correct implementation fails with probability under 5% however many cells
there are), when any structural check fails, when an exact coverage is under 0.93, or when the gate registers an
equal or worse candidate more often than 0.05 beyond Monte Carlo error. Resamples and permutations are 999 each by
default (the package's defaults are 1,000 and 9,999), to keep the run bounded.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from gate_scenarios import gate_scenarios, simulate_gate
from scipy import stats as scipy_stats
from scipy.special import expit, ndtr, ndtri

from mlflow_genai_metrics.paired import (
    MIN_CORPUS_ROWS,
    MIN_DIFFERENCE_ROWS,
    MIN_PAIRED_PROPORTION_ROWS,
    MIN_RATIO_DIFFERENCE_ROWS,
    PairedTest,
    paired_corpus,
    paired_proportion,
    paired_ratio,
    tango_interval,
)
from mlflow_genai_metrics.stats import MIN_INTERVAL_ROWS, MIN_RATIO_ROWS, RatioStatistic, bootstrap_interval, proportion_interval, ratio_interval

ALPHA = 0.05
COVERAGE_TARGET = 0.93
GATE_LEVEL = 0.05  # family-wise chance that a correct implementation fails the gate
NS = (2, 5, 10, 20, 30, 100, 1000)
QUICK_NS = (2, 5, 10, 30)
LARGE_N = 1000  # from this n on, --large-reps replications
GATE_NS = (5, 20, 100, 200)
POPULATION = 5000  # segments in the corpus population


# ----------------------------------------------------------------------------------------------------------------
# Scenarios: how the pairs are drawn, and the truth


@dataclass(frozen=True)
class Pairs:
    """One simulated comparison: A's and B's rows, pair by pair (RatioStatistic per side, or corpus statistics)."""

    a: RatioStatistic | np.ndarray
    b: RatioStatistic | np.ndarray


@dataclass(frozen=True)
class Scenario:
    metric: str
    kind: str  # proportion, mean, ratio, corpus
    name: str  # what the rows are
    effect: str  # what B does better under the effect
    draw: Callable[[np.random.Generator, int, bool], Pairs] = field(repr=False)
    truth: float | None  # A's aggregate (None: the kind has no interval of one aggregate)
    truth_difference: float  # B - A under the effect (0 under the null)

    @property
    def label(self) -> str:
        return f"{self.metric} ({self.kind})"


def _correlated_normals(rng: np.random.Generator, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Two standard normal vectors with correlation ``rho``, row by row: a latent shared by the pair."""
    shared = rng.standard_normal(n)
    return (math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.standard_normal(n),
            math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.standard_normal(n))


def proportion_scenario(base: float, effect: float, rho: float = 0.5) -> Scenario:
    def draw(rng: np.random.Generator, n: int, shifted: bool) -> Pairs:
        za, zb = _correlated_normals(rng, n, rho)
        a = (za < ndtri(base)).astype(float)
        b = (zb < ndtri(base + effect if shifted else base)).astype(float)
        return Pairs(RatioStatistic(a, np.ones(n)), RatioStatistic(b, np.ones(n)))

    return Scenario("alignment", "proportion", f"0/1 rows, rate {base:g}, latent correlation {rho:g}",
                    f"rate {base:g} -> {base + effect:g} (+{effect:g})", draw, base, effect)


def richness_scenario(mean: float, shape: float | None, effect: float) -> Scenario:
    """Claim counts Poisson(lambda_i), lambda_i = mean x Gamma(shape, 1 / shape) shared by the pair (negative
    binomial marginals; shape 1 is geometric); ``shape`` None: lambda fixed (independent Poisson rows)."""

    def draw(rng: np.random.Generator, n: int, shifted: bool) -> Pairs:
        lam = np.full(n, mean) if shape is None else mean * rng.gamma(shape, 1 / shape, n)
        a = rng.poisson(lam).astype(float)
        b = rng.poisson(lam * (1 + effect) if shifted else lam).astype(float)
        return Pairs(RatioStatistic.mean_of(a), RatioStatistic.mean_of(b))

    if shape is None:
        name = f"claim counts Poisson, mean {mean:g} (pair independent)"
    elif shape == 1:
        name = f"claim counts geometric, mean {mean:g} (Poisson-gamma, shape 1)"
    else:
        name = f"claim counts negative binomial, mean {mean:g}, shape {shape:g}"
    return Scenario("richness", "mean", name, f"mean x {1 + effect:g} (+{mean * effect:g})", draw, mean, mean * effect)


def _beta(mean: float, concentration: float) -> tuple[float, float]:
    return mean * concentration, (1 - mean) * concentration


def coverage_scenario(mean: float, effect: float, concentration: float = 10.0, rho: float = 0.7) -> Scenario:
    """Key points K_i uniform in 3..8 (the source's, shared by the pair), covered k ~ Binomial(K_i, s_i), the latent
    share s_i ~ Beta (mean ``mean``), A's and B's tied by a Gaussian copula; the value is k / K_i."""
    a_params, b_params = _beta(mean, concentration), _beta(mean + effect, concentration)

    def draw(rng: np.random.Generator, n: int, shifted: bool) -> Pairs:
        key_points = rng.integers(3, 9, n)
        za, zb = _correlated_normals(rng, n, rho)
        share_a = scipy_stats.beta.ppf(ndtr(za), *a_params)
        share_b = scipy_stats.beta.ppf(ndtr(zb), *(b_params if shifted else a_params))
        a = rng.binomial(key_points, share_a) / key_points
        b = rng.binomial(key_points, share_b) / key_points
        return Pairs(RatioStatistic.mean_of(a), RatioStatistic.mean_of(b))

    return Scenario("coverage", "mean", f"k/K, K uniform 3..8, share Beta mean {mean:g} (concentration {concentration:g})",
                    f"share mean {mean:g} -> {mean + effect:g} (+{effect:g})", draw, mean, effect)


def _support_truth(mean: float, concentration: float, claims_at_0: float, claims_slope: float) -> float:
    """sum y / sum n of the population: E[lambda(p) p] / E[lambda(p)], lambda(p) = claims_at_0 - claims_slope p."""
    a, b = _beta(mean, concentration)
    m1, m2 = a / (a + b), a * (a + 1) / ((a + b) * (a + b + 1))
    return (claims_at_0 * m1 - claims_slope * m2) / (claims_at_0 - claims_slope * m1)


def support_scenario(mean: float, effect: float, concentration: float = 6.0, rho: float = 0.7,
                     claims_at_0: float = 12.0, claims_slope: float = 8.0, claims_shape: float = 3.0) -> Scenario:
    """Per row a latent support p_i ~ Beta (A's and B's tied by a Gaussian copula), claims n_i negative binomial
    (shape ``claims_shape``) with mean 12 - 8 p_i (weaker summaries make more claims; some rows have none),
    supported y_i ~ Binomial(n_i, p_i). The aggregate is sum y / sum n."""
    a_params, b_params = _beta(mean, concentration), _beta(mean + effect, concentration)

    def side(rng: np.random.Generator, z: np.ndarray, params: tuple[float, float]) -> RatioStatistic:
        support = scipy_stats.beta.ppf(ndtr(z), *params)
        claims = rng.poisson(rng.gamma(claims_shape, (claims_at_0 - claims_slope * support) / claims_shape))
        return RatioStatistic(rng.binomial(claims, support).astype(float), claims.astype(float))

    def draw(rng: np.random.Generator, n: int, shifted: bool) -> Pairs:
        za, zb = _correlated_normals(rng, n, rho)
        return Pairs(side(rng, za, a_params), side(rng, zb, b_params if shifted else a_params))

    truth_a = _support_truth(mean, concentration, claims_at_0, claims_slope)
    truth_b = _support_truth(mean + effect, concentration, claims_at_0, claims_slope)
    return Scenario("claim_support_rate", "ratio",
                    f"claims NB(shape {claims_shape:g}, mean {claims_at_0:g} - {claims_slope:g} p), p ~ Beta mean {mean:g}",
                    f"p mean {mean:g} -> {mean + effect:g} (rate {truth_a:.3f} -> {truth_b:.3f})", draw, truth_a, truth_b - truth_a)


def bleu_from_sums(summed) -> float:
    """Corpus BLEU from summed ``[hyp_len, ref_len, correct_1..4, total_1..4]``: sacreBLEU's ``compute_bleu``
    (smooth exp, no effective order, as ``reference.corpus_score("bleu", ...)``) in a few lines, because
    the simulation calls it millions of times; ``check_bleu`` holds it to sacreBLEU's number."""
    hyp, ref, *rest = summed.tolist() if isinstance(summed, np.ndarray) else list(summed)
    correct, total = rest[:4], rest[4:8]
    brevity = 1.0 if hyp >= ref else (math.exp(1 - ref / hyp) if hyp > 0 else 0.0)
    if not any(correct):
        return 0.0
    smooth, logs = 1.0, 0.0
    for right, grams in zip(correct, total):
        if grams == 0:  # sacreBLEU leaves this order's precision 0: log 0 makes the score 0
            return 0.0
        if right == 0:
            smooth *= 2
            logs += math.log(100.0 / (smooth * grams))
        else:
            logs += math.log(100.0 * right / grams)
    return brevity * math.exp(logs / 4)


def check_bleu(population: np.ndarray, rng: np.random.Generator, samples: int = 300) -> int:
    """Compare ``bleu_from_sums`` with sacreBLEU's own corpus score on sums of random parts of a population
    (including tiny ones, where smoothing and the brevity penalty bite); returns how many were checked."""
    from mlflow_genai_metrics.reference import corpus_score

    for i in range(samples):
        rows = population[rng.integers(0, len(population), 1 + i % 40)]
        summed = rows.sum(axis=0)
        ours, theirs = bleu_from_sums(summed), corpus_score("bleu", summed)
        if not math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12):
            raise AssertionError(f"bleu_from_sums {ours!r} != sacreBLEU {theirs!r} on {summed.tolist()}")
    return samples


def bleu_segments(rng: np.random.Generator, reference_lengths: np.ndarray, difficulty: np.ndarray,
                  quality: float, length_ratio: float) -> np.ndarray:
    """One system's BLEU statistics per segment: hypothesis length around ``length_ratio`` x the reference's,
    unigram precision expit(quality + 0.8 difficulty + noise), n-gram precision falling by 0.6 per order."""
    size = len(reference_lengths)
    hyp = np.maximum(1, np.rint(reference_lengths * length_ratio * np.exp(0.15 * rng.standard_normal(size)))).astype(np.int64)
    precision = expit(quality + 0.8 * difficulty + 0.5 * rng.standard_normal(size))
    totals = np.column_stack([np.maximum(hyp - k, 0) for k in range(4)])
    correct = rng.binomial(totals, precision[:, None] * 0.6 ** np.arange(4))
    return np.column_stack([hyp, reference_lengths, correct, totals]).astype(float)


@lru_cache(maxsize=4)
def bleu_populations(seed: int, size: int = POPULATION) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The finite populations (A, B) of segments: the null one (B drawn like A) and the effect one."""
    rng = np.random.default_rng([seed, 9001])
    reference_lengths = 8 + rng.negative_binomial(4, 4 / (4 + 17), size)
    difficulty = rng.standard_normal(size)
    null_a = bleu_segments(rng, reference_lengths, difficulty, 0.4, 0.97)
    null_b = bleu_segments(rng, reference_lengths, difficulty, 0.4, 0.97)
    effect_a = bleu_segments(rng, reference_lengths, difficulty, 0.4, 0.97)
    effect_b = bleu_segments(rng, reference_lengths, difficulty, 0.55, 1.0)
    return null_a, null_b, effect_a, effect_b


def bleu_scenario(seed: int) -> Scenario:
    null_a, null_b, effect_a, effect_b = bleu_populations(seed)
    truth_a = bleu_from_sums(effect_a.sum(axis=0))
    truth_b = bleu_from_sums(effect_b.sum(axis=0))

    def draw(rng: np.random.Generator, n: int, shifted: bool) -> Pairs:
        rows = rng.integers(0, POPULATION, n)
        if shifted:
            return Pairs(effect_a[rows], effect_b[rows])
        swap = rng.random(n) < 0.5  # exchangeable: the truth of B - A is 0
        a, b = null_a[rows], null_b[rows]
        return Pairs(np.where(swap[:, None], b, a), np.where(swap[:, None], a, b))

    return Scenario("bleu", "corpus", f"{POPULATION:,} segments, ref len 8 + NB(mean 17), BLEU stats per segment",
                    f"unigram precision logit +0.15, length ratio 0.97 -> 1.00 (BLEU {truth_a:.2f} -> {truth_b:.2f})",
                    draw, None, truth_b - truth_a)


def scenarios(seed: int = 0) -> list[Scenario]:
    """Every scenario, in a fixed order (a scenario's position seeds its draws, whatever is selected)."""
    return [
        proportion_scenario(0.5, 0.10),
        proportion_scenario(0.8, 0.10),
        proportion_scenario(0.9, 0.05),
        richness_scenario(3.0, 1.0, 0.2),
        richness_scenario(9.0, 2.0, 0.2),
        richness_scenario(10.0, None, 0.2),
        coverage_scenario(0.6, 0.1),
        coverage_scenario(0.9, 0.05),
        support_scenario(0.85, 0.05),
        support_scenario(0.6, 0.1),
        bleu_scenario(seed),
    ]


# ----------------------------------------------------------------------------------------------------------------
# The functions under test, per kind


def paired_test(kind: str, pairs: Pairs, alternative: str, *, resamples: int, permutations: int, seed: int) -> PairedTest:
    if kind == "proportion":
        return paired_proportion(pairs.a, pairs.b, alternative=alternative)
    if kind in ("mean", "ratio"):
        return paired_ratio(pairs.a, pairs.b, kind=kind, alternative=alternative, resamples=resamples,
                            permutations=permutations, seed=seed)
    return paired_corpus(pairs.a, pairs.b, bleu_from_sums, alternative=alternative, resamples=resamples,
                         permutations=permutations, seed=seed)


def one_interval(kind: str, pairs: Pairs, *, resamples: int, seed: int) -> tuple[float, float] | None:
    """The interval of A's aggregate (None for the corpus kind: the package gives none)."""
    if kind == "proportion":
        return proportion_interval(pairs.a.histogram())
    if kind == "mean":
        return bootstrap_interval(pairs.a, resamples=resamples, seed=seed)
    if kind == "ratio":
        return ratio_interval(pairs.a.histogram())
    return None


def minimum_rows(kind: str, interval: str) -> int:
    """The fewest rows (or pairs) from which the interval must be reported."""
    if kind == "proportion":
        return 2 if interval == "one" else MIN_PAIRED_PROPORTION_ROWS
    if kind == "corpus":
        return MIN_CORPUS_ROWS
    if kind == "ratio":
        return MIN_RATIO_ROWS if interval == "one" else MIN_RATIO_DIFFERENCE_ROWS
    return MIN_INTERVAL_ROWS if interval == "one" else MIN_DIFFERENCE_ROWS


def _varies(values: np.ndarray) -> bool:
    return len(values) > 0 and bool(np.ptp(values) > 0)


def _ratios(statistic: RatioStatistic) -> np.ndarray:
    counted = statistic.denominator > 0
    return statistic.numerator[counted] / statistic.denominator[counted]


def interval_expected(kind: str, pairs: Pairs, interval: str) -> tuple[bool, int]:
    """(whether the interval must be reported, the rows it stands on): at or above its minimum n and when the
    rows leave the bootstrap something to vary."""
    if kind == "proportion":
        n = len(pairs.a.numerator)
        return n >= minimum_rows(kind, interval), n
    if kind == "corpus":
        n = len(pairs.a)
        return n >= MIN_CORPUS_ROWS and bool(np.any(np.ptp(np.column_stack([pairs.a, pairs.b]), axis=0) > 0)), n
    a, b = pairs.a, pairs.b
    if interval == "one":
        values = _ratios(a)
        if kind == "ratio":  # every claim agreeing still has its exact bound; only one row or claim has none
            return len(values) >= minimum_rows(kind, "one") and (_varies(values) or a.denominator.sum() >= 2), len(values)
        return len(values) >= minimum_rows(kind, "one") and _varies(values), len(values)
    if kind == "mean":
        counted = (a.denominator > 0) & (b.denominator > 0)
        differences = b.numerator[counted] - a.numerator[counted]
        return counted.sum() >= MIN_DIFFERENCE_ROWS and _varies(differences), int(counted.sum())
    counted = int(((a.denominator > 0) | (b.denominator > 0)).sum())
    varies = _varies(_ratios(a)) or _varies(_ratios(b))
    return counted >= MIN_RATIO_DIFFERENCE_ROWS and varies, counted


# ----------------------------------------------------------------------------------------------------------------
# The simulation


@dataclass
class IntervalTally:
    reported: int = 0
    covered: int = 0
    zero_width: int = 0  # reported with width <= 0, or one bound NaN
    below_minimum: int = 0  # reported from fewer rows than its kind's minimum
    missing: int = 0  # not reported although the rows allowed it
    examples: list[str] = field(default_factory=list)

    def add(self, interval: tuple[float, float] | None, truth: float, expected: bool, rows: int, minimum: int) -> None:
        if interval is None:
            return
        low, high = interval
        shown = not (math.isnan(low) and math.isnan(high))
        if not shown:
            if expected:
                self.missing += 1
                self._example(f"NaN from {rows} rows that vary")
            return
        self.reported += 1
        if not (high - low > 0):
            self.zero_width += 1
            self._example(f"[{low!r}, {high!r}] from {rows} rows")
        if rows < minimum:
            self.below_minimum += 1
            self._example(f"reported from {rows} rows (minimum {minimum})")
        self.covered += int(low <= truth <= high)

    def _example(self, text: str) -> None:
        if len(self.examples) < 3:
            self.examples.append(text)

    @property
    def failures(self) -> int:
        return self.zero_width + self.below_minimum + self.missing


@dataclass
class Cell:
    """Counts over ``reps`` replications of one scenario at one n (each replication: a null draw, an effect draw)."""

    metric: str
    scenario: str
    n: int
    reps: int = 0
    tested: dict[str, int] = field(default_factory=lambda: {"null two-sided": 0, "null greater": 0, "effect two-sided": 0, "effect greater": 0})
    rejected: dict[str, int] = field(default_factory=lambda: {"null two-sided": 0, "null greater": 0, "effect two-sided": 0, "effect greater": 0})
    one: IntervalTally = field(default_factory=IntervalTally)
    difference_null: IntervalTally = field(default_factory=IntervalTally)
    difference_effect: IntervalTally = field(default_factory=IntervalTally)
    has_one_interval: bool = True
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0  # CPU seconds


def simulate(scenario: Scenario, n: int, reps: int, *, seed: int, index: int, resamples: int = 999,
             permutations: int = 999, effect: bool = True, intervals: bool = True, one_sided: bool = True) -> Cell:
    """``reps`` replications of ``scenario`` at ``n`` pairs; ``index`` (the scenario's position) seeds its draws.

    Each replication draws a null comparison and (``effect``) one under the effect, and runs the two-sided test
    (whose interval of the difference is tallied) and (``one_sided``) the "greater" one; ``intervals`` False skips
    every interval (the tests alone, faster: for a test suite)."""
    started = time.process_time()
    rng = np.random.default_rng([seed, index, n])
    cell = Cell(scenario.metric, scenario.name, n, has_one_interval=scenario.truth is not None)
    kind = scenario.kind
    for _ in range(reps):
        cell.reps += 1
        call_seed = int(rng.integers(2**31))
        try:
            for shifted in (False, True) if effect else (False,):
                pairs = scenario.draw(rng, n, shifted)
                where = "effect" if shifted else "null"
                truth = scenario.truth_difference if shifted else 0.0
                two_sided = paired_test(kind, pairs, "two-sided", resamples=resamples if intervals else 1,
                                        permutations=permutations, seed=call_seed)
                results = [("two-sided", two_sided)]
                if one_sided:
                    # The one-sided call only needs its p-value: one resample leaves its interval NaN, at no cost.
                    results.append(("greater", paired_test(kind, pairs, "greater", resamples=1, permutations=permutations, seed=call_seed)))
                for name, result in results:
                    if not result.too_few and not math.isnan(result.p_value):
                        cell.tested[f"{where} {name}"] += 1
                        cell.rejected[f"{where} {name}"] += int(result.p_value < ALPHA)
                if not intervals:
                    continue
                expected, rows = interval_expected(kind, pairs, "difference")
                tally = cell.difference_effect if shifted else cell.difference_null
                tally.add((two_sided.ci_low, two_sided.ci_high), truth, expected, rows, minimum_rows(kind, "difference"))
                if not shifted and scenario.truth is not None:
                    expected, rows = interval_expected(kind, pairs, "one")
                    cell.one.add(one_interval(kind, pairs, resamples=resamples, seed=call_seed), scenario.truth, expected,
                                 rows, minimum_rows(kind, "one"))
        except Exception as error:  # a crash is a finding: count it, keep one message
            if len(cell.errors) < 3:
                cell.errors.append(f"{type(error).__name__}: {error}")
            else:
                cell.errors.append("")
    cell.seconds = time.process_time() - started
    return cell


def proportion_exact_coverage(n: int, rate: float) -> float:
    """The exact coverage of ``proportion_interval`` (Clopper-Pearson) over n rows of a proportion ``rate`` (a sum over
    the binomial outcomes: the proportion scenarios' one-aggregate counts are binomial, so this is what their Monte
    Carlo column estimates); NaN below 2 rows, where no interval is reported."""
    if n < 2:
        return math.nan
    covered = 0.0
    for successes in range(n + 1):
        low, high = proportion_interval(RatioStatistic.mean_of(np.r_[np.ones(successes), np.zeros(n - successes)]).histogram())
        covered += scipy_stats.binom.pmf(successes, n, rate) * (low <= rate <= high)
    return covered


def proportion_lines(rates: list[float], ns: list[int]) -> tuple[list[str], list[str]]:
    """A table of ``proportion_exact_coverage`` (the rates of A and B in the proportion scenarios), and its misses."""
    lines = ["Exact coverage of the Clopper-Pearson interval of one proportion (binomial sum, no Monte Carlo error):", "",
             "| rate | " + " | ".join(f"n={n}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
    misses = []
    for rate in rates:
        cells = []
        for n in ns:
            coverage = proportion_exact_coverage(n, rate)
            missed = coverage < COVERAGE_TARGET
            cells.append("not reported" if math.isnan(coverage) else f"{coverage:.4f}" + (" **MISS**" if missed else ""))
            if missed:
                misses.append(f"Clopper-Pearson interval, rate {rate:g}, n={n}: exact coverage {coverage:.4f} < {COVERAGE_TARGET}")
        lines.append(f"| {rate:g} | " + " | ".join(cells) + " |")
    return lines, misses


# The grid of (A alone, B alone) pair probabilities over which Tango's exact coverage is taken: every pair of shares
# whose sum (the runs' disagreement) is at most TANGO_DISAGREEMENT.
TANGO_SHARES = (0.001, 0.005, *np.round(np.arange(0.01, 0.5, 0.01), 2), 0.5)
TANGO_DISAGREEMENT = 0.5
TANGO_MAX_N = 100  # beyond it the sum over outcomes is too long for a benchmark; the simulation's column speaks there


def tango_exact_coverage(n: int) -> tuple[float, tuple[float, float]]:
    """The smallest exact coverage of ``paired.tango_interval`` over n pairs, across ``TANGO_SHARES`` (a sum over
    every outcome (A alone, B alone, the rest) of the trinomial), and where it is."""
    outcomes = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    intervals = np.array([tango_interval(b, c, n) for b, c in outcomes])
    counts = np.array([(b, c, n - b - c) for b, c in outcomes])
    worst = (1.0, (math.nan, math.nan))
    for only_a in TANGO_SHARES:
        for only_b in TANGO_SHARES:
            if only_a + only_b > TANGO_DISAGREEMENT + 1e-12:
                continue
            truth = only_b - only_a
            chances = np.exp(scipy_stats.multinomial.logpmf(counts, n, [only_a, only_b, 1 - only_a - only_b]))
            covered = float(chances[(intervals[:, 0] <= truth + 1e-12) & (truth - 1e-12 <= intervals[:, 1])].sum())
            if covered < worst[0]:
                worst = (covered, (only_a, only_b))
    return worst


def tango_lines(ns: list[int]) -> tuple[list[str], list[str]]:
    """The smallest exact coverage of Tango's paired interval at each n of the run it is reported at (to TANGO_MAX_N)."""
    shown = [n for n in ns if MIN_PAIRED_PROPORTION_ROWS <= n <= TANGO_MAX_N]
    if not shown:
        return [], []
    lines = [f"Smallest exact coverage of Tango's interval of a paired difference of proportions (a sum over every outcome; "
             f"shares of pairs 'A alone' and 'B alone' from 0.001 to 0.5, disagreeing on at most {TANGO_DISAGREEMENT:g} of the pairs):",
             "", "| n | smallest coverage | at (A alone, B alone) |", "|---|---|---|"]
    misses = []
    for n in shown:
        coverage, (only_a, only_b) = tango_exact_coverage(n)
        missed = coverage < COVERAGE_TARGET
        lines.append(f"| {n} | {coverage:.4f}{' **MISS**' if missed else ''} | ({only_a:g}, {only_b:g}) |")
        if missed:
            misses.append(f"Tango interval, n={n}: smallest exact coverage {coverage:.4f} < {COVERAGE_TARGET} at ({only_a:g}, {only_b:g})")
    return lines, misses


def structural_checks(all_scenarios: list[Scenario], seed: int, reps: int = 50) -> list[str]:
    """Failures of what must hold whatever the data: no interval from one row (or pair), every test "too few
    pairs" at n = 1 and 2. Returns the failures (empty when all hold)."""
    failures = []
    rng = np.random.default_rng([seed, 777])
    for scenario in all_scenarios:
        for n in (1, 2):
            for _ in range(reps):
                for shifted in (False, True):
                    pairs = scenario.draw(rng, n, shifted)
                    for alternative in ("two-sided", "greater"):
                        result = paired_test(scenario.kind, pairs, alternative, resamples=99, permutations=999, seed=1)
                        if not result.too_few or not math.isnan(result.p_value):
                            failures.append(f"{scenario.label} {scenario.name}: {alternative} test at n={n} gave p={result.p_value} "
                                            f"(too_few={result.too_few})")
                        if n == 1 and not (math.isnan(result.ci_low) and math.isnan(result.ci_high)):
                            failures.append(f"{scenario.label}: an interval of the difference from 1 pair: [{result.ci_low}, {result.ci_high}]")
                    one = one_interval(scenario.kind, pairs, resamples=99, seed=1)
                    if n == 1 and one is not None and not (math.isnan(one[0]) and math.isnan(one[1])):
                        failures.append(f"{scenario.label}: an interval of one aggregate from 1 row: {one}")
    return sorted(set(failures))


# ----------------------------------------------------------------------------------------------------------------
# Judging the figures


def fpr_bad(rejected: int, reps: int, level: float) -> bool:
    """Whether ``rejected`` of ``reps`` is too many for a false-positive rate of ALPHA at test level ``level``."""
    return reps > 0 and scipy_stats.binom.sf(rejected - 1, reps, ALPHA) < level


def coverage_bad(covered: int, reported: int, level: float) -> bool:
    return reported > 0 and scipy_stats.binom.cdf(covered, reported, COVERAGE_TARGET) < level


def beyond_two_se_fpr(rejected: int, reps: int) -> bool:
    return reps > 0 and rejected / reps > ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


def beyond_two_se_coverage(covered: int, reported: int) -> bool:
    return reported > 0 and covered / reported < COVERAGE_TARGET - 2 * math.sqrt(COVERAGE_TARGET * (1 - COVERAGE_TARGET) / reported)


def _share(count: int, total: int) -> str:
    if total == 0:
        return "n/a"
    p = count / total
    return f"{p:.3f} ± {math.sqrt(p * (1 - p) / total):.3f}"


@dataclass
class Verdict:
    misses: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    checked: int = 0


def judge(cells: list[Cell]) -> Verdict:
    """Misses (beyond Monte Carlo error across the table) and 2-SE flags, over every FPR and coverage cell."""
    checked = sum(2 for _ in cells) + sum(t.reported > 0 for c in cells for t in (c.one, c.difference_null, c.difference_effect))
    level = GATE_LEVEL / max(checked, 1)
    verdict = Verdict(checked=checked)
    for cell in cells:
        where = f"{cell.metric}, {cell.scenario}, n={cell.n}"
        for name in ("two-sided", "greater"):
            rejected = cell.rejected[f"null {name}"]
            if fpr_bad(rejected, cell.reps, level):
                verdict.misses.append(f"{where}: false-positive rate {name} {rejected}/{cell.reps} = {rejected / cell.reps:.3f}")
            elif beyond_two_se_fpr(rejected, cell.reps):
                verdict.flags.append(f"{where}: false-positive rate {name} {rejected}/{cell.reps} = {rejected / cell.reps:.3f}")
        for label, tally in (("one aggregate", cell.one), ("difference (null)", cell.difference_null),
                             ("difference (effect)", cell.difference_effect)):
            if coverage_bad(tally.covered, tally.reported, level):
                verdict.misses.append(f"{where}: coverage of {label} {tally.covered}/{tally.reported} = {tally.covered / tally.reported:.3f}")
            elif beyond_two_se_coverage(tally.covered, tally.reported):
                verdict.flags.append(f"{where}: coverage of {label} {tally.covered}/{tally.reported} = {tally.covered / tally.reported:.3f}")
            if tally.failures:
                verdict.misses.append(f"{where}: {label}: {tally.zero_width} zero-width or half-NaN, {tally.below_minimum} below "
                                      f"the minimum n, {tally.missing} missing ({'; '.join(tally.examples)})")
        if cell.errors:
            verdict.misses.append(f"{where}: {len(cell.errors)} replications crashed, e.g. {cell.errors[0]}")
    return verdict


def _fpr_cell(cell: Cell, name: str, level: float) -> str:
    rejected = cell.rejected[f"null {name}"]
    text = _share(rejected, cell.reps)
    if fpr_bad(rejected, cell.reps, level):
        return f"{text} **MISS**"
    return f"{text} (!)" if beyond_two_se_fpr(rejected, cell.reps) else text


def _coverage_cell(cell: Cell, tally: IntervalTally, level: float, exists: bool = True) -> str:
    if not exists:
        return "none (no such interval)"
    if tally.reported == 0:
        text = "not reported (0%)"
    else:
        text = f"{_share(tally.covered, tally.reported)} ({tally.reported / cell.reps:.0%})"
        if coverage_bad(tally.covered, tally.reported, level):
            text += " **MISS**"
        elif beyond_two_se_coverage(tally.covered, tally.reported):
            text += " (!)"
    return text + (" **FAIL**" if tally.failures else "")


def table(cells: list[Cell], verdict: Verdict) -> list[str]:
    level = GATE_LEVEL / max(verdict.checked, 1)
    lines = ["| metric (kind) | scenario | n | reps | tested (two-sided / greater) | FPR two-sided | FPR greater | "
             "power two-sided | power greater | coverage, one aggregate (reported) | coverage, difference, null (reported) | "
             "coverage, difference, effect (reported) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in cells:
        tested = f"{cell.tested['null two-sided'] / cell.reps:.0%} / {cell.tested['null greater'] / cell.reps:.0%}"
        lines.append(
            f"| {cell.metric} | {cell.scenario} | {cell.n} | {cell.reps} | {tested} | {_fpr_cell(cell, 'two-sided', level)} | "
            f"{_fpr_cell(cell, 'greater', level)} | {_share(cell.rejected['effect two-sided'], cell.reps)} | "
            f"{_share(cell.rejected['effect greater'], cell.reps)} | {_coverage_cell(cell, cell.one, level, cell.has_one_interval)} | "
            f"{_coverage_cell(cell, cell.difference_null, level)} | {_coverage_cell(cell, cell.difference_effect, level)} |"
            + (f" crashed {len(cell.errors)}x" if cell.errors else ""))
    return lines


def _gate_task(task: tuple) -> tuple[int, int]:
    index, n, reps, seed = task
    return simulate_gate(index, n, reps, seed)


def gate_lines(ns: list[int], reps: int, seed: int, jobs: int) -> tuple[list[str], list[str]]:
    """The chance that the gate registers each scenario's candidate (``gate_scenarios``), and the misses: an equal or
    worse candidate registered more often than ALPHA beyond Monte Carlo error (an exact binomial test at a Bonferroni
    level over the gate's cells)."""
    everything = gate_scenarios()
    tasks = [(i, n, reps, seed) for i, scenario in enumerate(everything) for n in ns if not scenario.attempts or n == max(ns)]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_gate_task, tasks))
    else:
        done = [_gate_task(task) for task in tasks]
    checked = sum(everything[i].truth != "better" for i, *_ in tasks)
    level = GATE_LEVEL / max(checked, 1)
    lines = ["The gate as users call it (compare_results with unreadable rows counted, then decide at the attempt's level): "
             f"the chance it registers the candidate, {reps} replications per cell; an equal or worse one must stay at "
             f"{ALPHA} or below.", "", "| candidate | beat metric | truth | n | registered |", "|---|---|---|---|---|"]
    misses = []
    for (index, n, *_), (hits, total) in zip(tasks, done):
        scenario = everything[index]
        text = _share(hits, total)
        if scenario.truth != "better" and fpr_bad(hits, total, level):
            text += " **MISS**"
            misses.append(f"gate: {scenario.name}, n={n}: registered {hits}/{total} = {hits / total:.3f} (an {scenario.truth} candidate)")
        elif scenario.truth != "better" and beyond_two_se_fpr(hits, total):
            text += " (!)"
        shown_n = f"{scenario.attempts[0]}..{scenario.attempts[-1]}" if scenario.attempts else str(n)
        lines.append(f"| {scenario.name} | {scenario.beat_metric} | {scenario.truth} | {shown_n} | {text} |")
    return lines, misses


def _run(task: tuple) -> Cell:
    scenario_index, n, reps, seed, resamples, permutations = task
    return simulate(scenarios(seed)[scenario_index], n, reps, seed=seed, index=scenario_index, resamples=resamples,
                    permutations=permutations)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="*", default=None, help=f"pairs per simulated comparison (default {' '.join(map(str, NS))})")
    parser.add_argument("--reps", type=int, default=None, help=f"replications per scenario and n below n = {LARGE_N} (default 1000; --quick 200)")
    parser.add_argument("--large-reps", type=int, default=None, help=f"replications at n >= {LARGE_N} (default 250)")
    parser.add_argument("--metrics", nargs="*", default=None, help="only these metrics (alignment richness coverage claim_support_rate bleu)")
    parser.add_argument("--resamples", type=int, default=999, help="bootstrap resamples per interval (default 999)")
    parser.add_argument("--permutations", type=int, default=999, help="random permutations per test, when not exact (default 999)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (default 2, or 1 on one core); the figures do not depend on it")
    parser.add_argument("--gate-ns", type=int, nargs="*", default=list(GATE_NS), help=f"pairs for the gate's scenarios (default {' '.join(map(str, GATE_NS))})")
    parser.add_argument("--gate-reps", type=int, default=None, help="replications per gate scenario and n (default 1000; --quick 200; 0 skips the gate)")
    parser.add_argument("--quick", action="store_true", help=f"n in {' '.join(map(str, QUICK_NS))}, 200 reps (a smoke run)")
    args = parser.parse_args(argv)
    ns = args.ns or (QUICK_NS if args.quick else NS)
    reps = args.reps or (200 if args.quick else 1000)
    large_reps = args.large_reps or min(reps, 250)
    started = time.perf_counter()
    everything = scenarios(args.seed)
    selected = [i for i, s in enumerate(everything) if not args.metrics or s.metric in args.metrics]
    if not selected:
        parser.error(f"no scenario for metrics {args.metrics}")

    lines = ["Simulated paired runs with known truth; alpha 0.05; a test rejects when p < 0.05 ('too few pairs' never rejects).",
             f"Bootstrap resamples {args.resamples}, random permutations {args.permutations} (exact sign flips while 2^informative "
             f"<= {args.permutations}); seed {args.seed}; {reps} replications per cell"
             f"{f' ({large_reps} at n >= {LARGE_N})' if any(n >= LARGE_N for n in ns) else ''}.",
             f"Intervals: of proportions from 2 rows, of means from {MIN_INTERVAL_ROWS} (MIN_INTERVAL_ROWS), of ratios from "
             f"{MIN_RATIO_ROWS} (MIN_RATIO_ROWS); of a paired difference of proportions from {MIN_PAIRED_PROPORTION_ROWS} pairs, "
             f"of means from {MIN_DIFFERENCE_ROWS}, of ratios from {MIN_RATIO_DIFFERENCE_ROWS}, of the corpus from {MIN_CORPUS_ROWS}.", ""]
    if any(everything[i].kind == "corpus" for i in selected):
        null_a, *_ = bleu_populations(args.seed)
        checked = check_bleu(null_a, np.random.default_rng(args.seed))
        lines.append(f"BLEU from summed statistics: the simulation's bleu_from_sums equals sacreBLEU's corpus_score on {checked} random sums.")
    lines += ["" if lines[-1] else None, "| metric (kind) | scenario | effect (for power and the effect interval) | truth of A | truth of B - A |", "|---|---|---|---|---|"]
    for i in selected:
        s = everything[i]
        lines.append(f"| {s.label} | {s.name} | {s.effect} | {'n/a' if s.truth is None else f'{s.truth:.4f}'} | {s.truth_difference:.4f} |")
    print("\n".join(line for line in lines if line is not None), flush=True)

    tasks = [(i, n, large_reps if n >= LARGE_N else reps, args.seed, args.resamples, args.permutations) for n in ns for i in selected]
    tasks.sort(key=lambda t: -t[1] * t[2])  # the longest first, so the workers finish together
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            done = list(pool.map(_run, tasks))
    else:
        done = [_run(task) for task in tasks]
    order = {(i, n): k for k, (i, n) in enumerate((i, n) for i in selected for n in ns)}
    cells = [cell for _, cell in sorted(zip(tasks, done), key=lambda pair: order[(pair[0][0], pair[0][1])])]
    structural = structural_checks([everything[i] for i in selected], args.seed)
    verdict = judge(cells)
    verdict.misses += [f"structural: {failure}" for failure in structural]
    rates = sorted({round(r, 6) for i in selected if everything[i].kind == "proportion"
                    for r in (everything[i].truth, everything[i].truth + everything[i].truth_difference)})
    exact, exact_misses = proportion_lines(rates, list(ns)) if rates else ([], [])
    verdict.misses += exact_misses
    tango, tango_misses = tango_lines(list(ns)) if rates else ([], [])
    verdict.misses += tango_misses
    gate, gate_misses = gate_lines(args.gate_ns, args.gate_reps or (200 if args.quick else 1000), args.seed, args.jobs) if args.gate_reps != 0 else ([], [])
    verdict.misses += gate_misses

    out = ["", *table(cells, verdict), "", *exact, "", *tango, "", *gate, "",
           "FPR: share of null replications where the test rejected (over all replications; 'tested' is the share that "
           "were not 'too few pairs'). Coverage: over the replications where the interval was reported (share in brackets). "
           f"± is one Monte Carlo standard error. (!): beyond 2 SE of the target (FPR {ALPHA}, coverage {COVERAGE_TARGET}); "
           f"**MISS**: beyond Monte Carlo error across the table ({verdict.checked} cells, exact binomial at {GATE_LEVEL}/{verdict.checked}); "
           "**FAIL**: a zero-width interval, one reported below its minimum n, or one missing where the rows allowed it.", "",
           f"structural checks (no interval from 1 row, every test 'too few pairs' at n = 1 and 2): "
           f"{'all hold' if not structural else f'{len(structural)} failed'}",
           f"flags beyond 2 SE: {len(verdict.flags)}" + "".join(f"\n- {flag}" for flag in verdict.flags),
           f"targets missed: {len(verdict.misses)}" + "".join(f"\n- {miss}" for miss in verdict.misses),
           f"wall time {time.perf_counter() - started:.0f} s ({args.jobs} process{'es' if args.jobs > 1 else ''}); "
           f"CPU {sum(c.seconds for c in cells):.0f} s in the simulation's cells"]
    print("\n".join(out), flush=True)
    return 1 if verdict.misses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
