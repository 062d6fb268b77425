"""The calibration benchmark (benchmarks/bench_calibration.py) in small: no interval from one row, none of zero
width, "too few pairs" at n = 2, no anti-conservative test at small n, intervals that cover at n = 30.

Bounds are binomial: with the replications below, an implementation whose false-positive rate is at most 0.05
(or whose coverage is at least the benchmark's target 0.93) fails any one check with probability under 1e-4 (the
whole file, 44 such checks, under 0.5%). So they catch gross regressions only (a test rejecting 11% of the time under the
null, an interval covering under 88%); the benchmark measures the figures themselves.
Seeds are fixed, so the outcome is deterministic."""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_calibration  # noqa: E402
import gate_scenarios  # noqa: E402
from bench_calibration import ALPHA, minimum_rows, scenarios, simulate, structural_checks  # noqa: E402

SEED = 20261201
FPR_NS = (5, 10, 30)
FPR_REPS = 300
COVERAGE_N = 30
COVERAGE_REPS = 400
COVERAGE_REFERENCE = 0.93  # the target of the benchmark (and of guide/metrics.md), not the nominal 0.95
FAILURE_CHANCE = 1e-4
# One scenario per metric kind and metric: the skewed or near-0.9 ones, where the tests and intervals are weakest.
CHOSEN = {"alignment": 2, "richness": 3, "coverage": 7, "claim_support_rate": 8, "bleu": 10}


@lru_cache(maxsize=1)
def all_scenarios():
    return scenarios(SEED)


def chosen():
    return [pytest.param(index, id=metric) for metric, index in CHOSEN.items()]


def most_false_positives(reps: int) -> int:
    """The most rejections of ``reps`` null replications that a test at level ALPHA shows, but for a chance
    under FAILURE_CHANCE."""
    return int(scipy_stats.binom.isf(FAILURE_CHANCE, reps, ALPHA))


def fewest_covered(reported: int) -> int:
    """The fewest of ``reported`` intervals that an interval covering COVERAGE_REFERENCE covers, but for a chance
    under FAILURE_CHANCE."""
    return int(scipy_stats.binom.ppf(FAILURE_CHANCE, reported, COVERAGE_REFERENCE))


def test_the_bounds_are_loose_enough_and_tight_enough():
    # A test rejecting 11% of the time under the null, or an interval covering 87%, is caught.
    assert 0.05 < most_false_positives(FPR_REPS) / FPR_REPS < 0.11
    assert 0.87 < fewest_covered(COVERAGE_REPS) / COVERAGE_REPS < 0.91


def test_no_interval_from_one_row_and_every_test_too_few_at_one_and_two_pairs():
    assert structural_checks(all_scenarios(), SEED, reps=20) == []


@pytest.mark.parametrize("index", [pytest.param(i, id=s.metric + "-" + str(i)) for i, s in enumerate(scenarios(SEED))])
def test_at_two_pairs_no_test_runs_and_no_interval_has_zero_width(index):
    scenario = all_scenarios()[index]
    cell = simulate(scenario, 2, 40, seed=SEED, index=index, resamples=199, permutations=199)
    assert cell.errors == []
    assert set(cell.tested.values()) == {0}, cell.tested  # "too few pairs to test", both sides, null and effect
    for tally in (cell.one, cell.difference_null, cell.difference_effect):
        assert tally.zero_width == 0 and tally.below_minimum == 0 and tally.missing == 0, tally.examples
    # A proportion keeps an honest interval from 2 rows; its paired difference, means, ratios and the corpus (their
    # minimum n is higher) none.
    reported = [cell.one.reported, cell.difference_null.reported, cell.difference_effect.reported]
    assert reported == ([cell.reps, 0, 0] if scenario.kind == "proportion" else [0, 0, 0])


@pytest.mark.parametrize("n", FPR_NS)
@pytest.mark.parametrize("index", chosen())
def test_no_test_rejects_too_often_under_the_null(index, n):
    scenario = all_scenarios()[index]
    cell = simulate(scenario, n, FPR_REPS, seed=SEED, index=index, permutations=199, effect=False, intervals=False)
    assert cell.errors == []
    bound = most_false_positives(cell.reps)
    for alternative in ("two-sided", "greater"):
        rejected = cell.rejected[f"null {alternative}"]
        assert rejected <= bound, f"{scenario.label} n={n} {alternative}: {rejected}/{cell.reps} false positives (at most {bound})"


@pytest.mark.parametrize("index", chosen())
def test_the_intervals_cover_at_thirty_pairs(index):
    scenario = all_scenarios()[index]
    cell = simulate(scenario, COVERAGE_N, COVERAGE_REPS, seed=SEED, index=index, resamples=499, permutations=99, one_sided=False)
    assert cell.errors == []
    tallies = {"one aggregate": cell.one, "difference, null": cell.difference_null, "difference, effect": cell.difference_effect}
    for name, tally in tallies.items():
        assert tally.failures == 0, f"{scenario.label} {name}: {tally.examples}"
        if name == "one aggregate" and scenario.truth is None:
            assert tally.reported == 0  # the corpus kind has no interval of one aggregate
            continue
        if name != "one aggregate" and COVERAGE_N < minimum_rows(scenario.kind, "difference"):
            assert tally.reported == 0  # a difference of means or ratios: no interval below MIN_DIFFERENCE_ROWS pairs
            continue
        assert tally.reported >= 0.9 * cell.reps, f"{scenario.label} {name}: reported in {tally.reported}/{cell.reps}"
        least = fewest_covered(tally.reported)
        assert tally.covered >= least, (f"{scenario.label} {name}: covered {tally.covered}/{tally.reported} = "
                                        f"{tally.covered / tally.reported:.3f} (at least {least})")


def test_the_simulated_bleu_is_sacrebleus():
    null_a, *_ = bench_calibration.bleu_populations(SEED)
    assert bench_calibration.check_bleu(null_a, np.random.default_rng(1), samples=100) == 100


def test_the_exact_clopper_pearson_coverage_matches_a_hand_computed_case():
    # 2 rows at rate 0.95: 2 successes give [0.158, 1] (covers), 1 gives [0.013, 0.987] (covers), 0 gives [0, 0.842]
    # (misses), so the exact coverage is 1 - P(0 successes) = 1 - 0.05^2.
    assert math.isclose(bench_calibration.proportion_exact_coverage(2, 0.95), 1 - 0.05**2, rel_tol=1e-12)


def test_tango_s_smallest_exact_coverage_is_on_target_where_it_is_reported():
    coverage, where = bench_calibration.tango_exact_coverage(bench_calibration.MIN_PAIRED_PROPORTION_ROWS)
    assert coverage >= COVERAGE_REFERENCE, (coverage, where)


@pytest.mark.parametrize(("index", "n", "most"), [
    pytest.param(1, 40, 0, id="20%-unreadable-worse-counted"),
    pytest.param(2, 40, 0, id="40%-unreadable-worse-counted"),
    pytest.param(3, 100, 0, id="skewed-equal-ratio-too-few-pairs"),
    pytest.param(0, 100, 11, id="equal-proportion"),
])
def test_the_gate_does_not_register_equal_or_worse_candidates(index, n, most):
    # 60 seeded replications of the gate as users call it; "most" is the binomial bound of a 0.05 chance (P < 1e-4
    # to exceed it) where registering can happen at all, 0 where a rule must refuse every one
    hits, reps = gate_scenarios.simulate_gate(index, n, 60, SEED)
    assert reps == 60 and hits <= most, f"{gate_scenarios.gate_scenarios()[index].name}: registered {hits}/60"


def test_the_script_prints_its_table_and_gates_on_it(capsys):
    code = bench_calibration.main(["--ns", "2", "30", "--reps", "8", "--metrics", "richness", "bleu", "--jobs", "1", "--resamples", "99",
                                   "--gate-reps", "0"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("| richness |", "| bleu |"))]
    assert len(rows) == 2 * 4 and all(len(row.split("|")) == 14 for row in rows)  # 3 richness + 1 bleu scenario, 2 n
    assert "structural checks (no interval from 1 row, every test 'too few pairs' at n = 1 and 2): all hold" in out
    assert code == (1 if "targets missed: 0" not in out else 0)
