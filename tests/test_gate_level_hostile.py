"""The registry gate's level against candidates built to slip through it: equal or worse ones that hide their bad
rows behind judge failures, and a test that could not pass at the attempt's level spending an attempt anyway.

Each simulation draws a champion's and a candidate's row tables with a fixed seed and decides as
``register_if_passing`` does once the runs are loaded (``benchmarks/gate_scenarios.py``'s ``decided``: the
comparison in decision mode, then ``decide`` at the first attempt's level, 0.025). Counts are exact for the seed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gate_scenarios import ALPHA, Run, _latent_pairs, _rows, decided, equal_good_support  # noqa: E402
from scipy.special import ndtri  # noqa: E402

from mlflow_genai_metrics.stats import StatisticsOptions  # noqa: E402
from mlflow_genai_metrics.summarization.comparison import compare_results  # noqa: E402
from mlflow_genai_metrics.summarization.decision import attempt_level, decide, decision_metrics  # noqa: E402

STATISTICS = StatisticsOptions(resamples=1, seed=0)
TRUNCATED = "claim verification failed: truncated: the reply was cut off at max_tokens"
TIMEOUT = "claim verification failed: timeout: the judge did not answer in 60 s"


def _outcomes(champion, candidate, beat_metric: str, attempt: int = 1):
    compared, alternatives = decision_metrics([beat_metric])
    comparison = compare_results(Run(champion), Run(candidate), statistics=STATISTICS, metrics=compared,
                                 alternatives=alternatives, allow_partial=True, decision=True)
    return decide(comparison, [beat_metric], alias="champion", champion="champion", champion_judged=len(champion),
                  alpha=attempt_level(ALPHA, attempt), level=ALPHA)


def _fixed(n: int, fixed: int):
    """A champion strictly aligned on all but ``fixed`` of ``n`` rows, a candidate on every row."""
    ids, ones, none = np.arange(n), np.ones(n), np.zeros(n, dtype=bool)
    a = np.ones(n)
    a[:fixed] = 0
    return _rows(ids, a, ones, a, none), _rows(ids, ones, ones, ones, none)


def test_discordant_pairs_too_few_for_the_attempt_s_level_say_so_not_not_significantly_better():
    # 5 fixed, none broken: one-sided p = 2^-5 = 0.031, which can never be under the first attempt's 0.025 (before:
    # "not significantly better", as if the candidate had been tested and found wanting)
    beat = _outcomes(*_fixed(20, 5), "strict_alignment")[0]
    assert not beat.passed and beat.p_value == 0.5**5  # the look showed its outcome: it still counts as an attempt
    assert beat.detail.startswith("too few pairs to test at this attempt's level 0.025: even if all 5 discordant pairs went "
                                  "the candidate's way, one-sided p would be 0.0312; it needs 6 discordant pairs")
    again = _outcomes(*_fixed(20, 6), "strict_alignment", attempt=2)[0]  # the second attempt, at 0.0125, needs 7
    assert not again.passed and "level 0.0125" in again.detail and "it needs 7" in again.detail
    passing = _outcomes(*_fixed(20, 6), "strict_alignment")[0]
    assert passing.passed and passing.p_value == 0.5**6


def _skewed_unreadable(rng: np.random.Generator, n: int):
    """The benchmark's candidate equal on claim support (97% of rows better, 3% long, 20 claims at 0.3 supported),
    whose long summaries the judge could not read (cut off at max_tokens)."""
    ids, none = np.arange(n), np.zeros(n, dtype=bool)
    claims_a = 1 + rng.poisson(5, n)
    supported_a = rng.binomial(claims_a, 0.9)
    long = rng.random(n) < 0.03
    claims_b = np.where(long, 20, 1 + rng.poisson(5, n))
    supported_b = rng.binomial(claims_b, np.where(long, 0.3, equal_good_support()))
    candidate = _rows(ids, supported_b == claims_b, claims_b, supported_b, long)
    candidate.loc[long, "error"] = TRUNCATED
    return _rows(ids, supported_a == claims_a, claims_a, supported_a, none), candidate


def test_a_candidate_whose_bad_long_summaries_the_judge_could_not_read_is_not_registered_on_claim_support():
    # Before: those pairs left the ratio, the candidate was decided on its good rows alone, and up to 4 failures
    # against none pass the judge error rule (p = 1/16): registered 14 of 60 times at 200 pairs.
    rng = np.random.default_rng(20261207)
    hits = sum(decided(*_skewed_unreadable(rng, 200), "claim_support_rate", 1, STATISTICS) for _ in range(60))
    assert hits == 0, f"registered {hits}/60"
    champion, candidate = _skewed_unreadable(np.random.default_rng(7), 200)
    beat = _outcomes(champion, candidate, "claim_support_rate")[0]
    assert beat.n == 200 and not beat.passed  # every pair stays, the unreadable rows counted against the candidate


def _timed_out_on_its_worst_rows(rng: np.random.Generator, n: int):
    """Strict alignment 0.8 on both sides (latent correlation 0.5): an equal candidate, whose judge timed out on 3
    of the rows where it failed and the champion did not (the long ones), within the allowance of 3 at 60 pairs."""
    za, zb = _latent_pairs(rng, n)
    a, b = (za < ndtri(0.8)).astype(float), (zb < ndtri(0.8)).astype(float)
    ids, ones, none = np.arange(n), np.ones(n), np.zeros(n, dtype=bool)
    candidate = _rows(ids, b, ones, b, none)
    worst = np.flatnonzero((b == 0) & (a == 1))
    candidate.loc[rng.choice(worst, min(3, len(worst)), replace=False), "error"] = TIMEOUT
    return _rows(ids, a, ones, a, none), candidate


def test_an_equal_candidate_whose_worst_rows_timed_out_is_not_registered_more_often_than_the_level():
    # Before: the 3 pairs left the test, and the candidate was registered 32 of 200 times at a level of 0.025.
    rng = np.random.default_rng(20261207)
    hits = sum(decided(*_timed_out_on_its_worst_rows(rng, 60), "strict_alignment", 1, STATISTICS) for _ in range(200))
    assert hits == 3, f"registered {hits}/200"  # 1.5%, under the first attempt's 0.025


def _ratio_timed_out_on_its_worst_rows(rng: np.random.Generator, n: int):
    """Claim support 0.9 on both sides, claims 1 + Poisson(5) per row (an exchangeable, equal candidate), whose judge
    timed out on the allowance's 10 rows of 200 where it did worst against the champion."""
    ids, none = np.arange(n), np.zeros(n, dtype=bool)
    claims_a, claims_b = 1 + rng.poisson(5, n), 1 + rng.poisson(5, n)
    supported_a, supported_b = rng.binomial(claims_a, 0.9), rng.binomial(claims_b, 0.9)
    candidate = _rows(ids, supported_b == claims_b, claims_b, supported_b, none)
    worst = np.argsort((supported_b - 0.9 * claims_b) - (supported_a - 0.9 * claims_a))[: max(2, n // 20)]
    candidate.loc[worst, "error"] = TIMEOUT
    return _rows(ids, supported_a == claims_a, claims_a, supported_a, none), candidate


def test_an_equal_candidate_whose_worst_rows_timed_out_is_not_registered_on_a_ratio():
    # Before: the 10 pairs left the test of claim support and the candidate was registered 15 of 40 times.
    rng = np.random.default_rng(20261207)
    hits = sum(decided(*_ratio_timed_out_on_its_worst_rows(rng, 200), "claim_support_rate", 1, STATISTICS) for _ in range(40))
    assert hits == 0, f"registered {hits}/40"
    beat = _outcomes(*_ratio_timed_out_on_its_worst_rows(np.random.default_rng(3), 200), "claim_support_rate")[0]
    assert not beat.passed and beat.detail.startswith("refused: 10 pair(s) left out for the infrastructure's failures")
