"""Two runs' people's estimates compared (issue 48, 2): ``people.estimate_difference``, the second's estimate minus
the first's with the MOVER interval of the two, checked by seeded simulation (exact counts, fixed seeds): equal
rates, different rates, rates near 0.9, the fewest labels it is reported from, and two runs of the same rows whose
errors go together (the independence it assumes broken the usual way: the interval only widens)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlflow_genai_metrics.people import (
    DIFFERENCE_ASSUMES,
    MIN_DIFFERENCE_LABELS,
    MIN_LABELS,
    PeopleEstimate,
    difference_bounds,
    estimate_difference,
    ppi_counts,
    ppi_proportion,
)
from mlflow_genai_metrics.summarization.run_table import people_differences, people_records


def _joint(rate: float, judge_rate: float, kappa: float) -> np.ndarray:
    """The 2 x 2 probabilities [person, judge] with these margins and Cohen's kappa."""
    chance = rate * judge_rate + (1 - rate) * (1 - judge_rate)
    both = (chance + kappa * (1 - chance) - 1 + rate + judge_rate) / 2
    cells = np.array([[1 - rate - judge_rate + both, judge_rate - both], [rate - both, both]])
    assert (cells >= 0).all()
    return cells


def _runs(cells: np.ndarray, rows: int, labelled: int, draws: int, rng: np.random.Generator):
    """``draws`` independent runs of ``rows`` rows, ``labelled`` of each drawn at random: each one's estimate."""
    runs = rng.multinomial(rows, cells.reshape(-1), size=draws)
    drawn = np.stack([rng.multivariate_hypergeometric(run, labelled) for run in runs]).reshape(-1, 2, 2)
    estimate, low, high, _ = ppi_counts(runs.reshape(-1, 2, 2)[..., 1].sum(-1), rows, drawn)
    return estimate, low, high


# (first run: people's rate, the judge's, kappa), (second run: the same), rows, labels on each run
CASES = {
    "equal rates": ((0.6, 0.7, 0.6), (0.6, 0.7, 0.6), 1000, 50),
    "equal rates, a weak judge": ((0.5, 0.5, 0.0), (0.5, 0.5, 0.3), 200, 25),
    "different rates": ((0.6, 0.8, 0.3), (0.75, 0.8, 0.6), 1000, 100),
    "skewed, near 0.9": ((0.9, 0.93, 0.6), (0.88, 0.91, 0.6), 1000, 100),
    "skewed, equal at 0.9": ((0.9, 0.95, 0.3), (0.9, 0.91, 0.9), 500, 50),
    "the fewest labels": ((0.6, 0.7, 0.6), (0.7, 0.7, 0.6), 100, MIN_DIFFERENCE_LABELS),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_difference_s_interval_covers_the_true_difference_in_seeded_simulation(case):
    first, second, rows, labelled = CASES[case]
    rng = np.random.default_rng(sorted(CASES).index(case) + 100)
    draws = 2000
    a, b = _runs(_joint(*first), rows, labelled, draws, rng), _runs(_joint(*second), rows, labelled, draws, rng)
    low, high = difference_bounds(*a, *b)
    truth = second[0] - first[0]
    covered = (low <= truth) & (truth <= high)
    assert covered.mean() >= 0.93, (case, covered.mean())
    assert max(np.mean(low > truth), np.mean(high < truth)) <= 0.035  # neither side misses more than its share
    assert abs(np.mean(b[0] - a[0]) - truth) < 4 * np.std(b[0] - a[0]) / math.sqrt(draws)  # unbiased
    if case == "different rates":  # the judges say 0.8 on both runs; people's estimates find the 0.15 between them
        assert np.mean(low > 0) > 0.5, np.mean(low > 0)


def test_runs_of_the_same_rows_that_err_alike_only_widen_the_interval():
    """Two systems' summaries of the same 400 sources, people's verdicts on them going together (a hard source trips
    both), the same rows labelled on both runs (one seed): the assumed independence is broken, and the interval
    covers more often than its 95%, not less."""
    rng = np.random.default_rng(7)
    rows, labelled, draws = 400, 40, 1500
    covered = []
    for _ in range(draws):
        hard = rng.random(rows)
        people = np.stack([hard < 0.7, hard < 0.8]).astype(int)  # people's rates 0.7 and 0.8, strongly correlated
        judge = np.where(rng.random((2, rows)) < 0.15, 1 - people, people)
        picked = rng.choice(rows, labelled, replace=False)
        a, b = (ppi_proportion(judge[k], judge[k, picked], people[k, picked]) for k in (0, 1))
        found = estimate_difference(a, b)
        covered.append(found.ci_low <= 0.1 <= found.ci_high)
    assert np.mean(covered) >= 0.97


def test_the_difference_is_the_second_minus_the_first_with_mover_bounds_and_too_few_labels_below_its_count():
    rng = np.random.default_rng(3)
    people, judge = (rng.random(300) < 0.6).astype(int), (rng.random(300) < 0.7).astype(int)
    a = ppi_proportion(judge, judge[:40], people[:40])
    b = ppi_proportion(1 - judge, 1 - judge[:60], people[:60])
    found = estimate_difference(a, b)
    assert found.difference == pytest.approx(b.estimate - a.estimate) and found.labelled == (40, 60) and found.too_few is None
    assert found.ci_low == pytest.approx(found.difference - math.hypot(b.estimate - b.ci_low, a.ci_high - a.estimate))
    assert found.ci_high == pytest.approx(found.difference + math.hypot(b.ci_high - b.estimate, a.estimate - a.ci_low))
    assert found.assumes == DIFFERENCE_ASSUMES and "independent random samples" in found.assumes and "same question" in found.assumes
    assert found.as_metrics("strict_alignment") == {"people/strict_alignment_difference": found.difference,
                                                     "people/strict_alignment_difference_ci_low": found.ci_low,
                                                     "people/strict_alignment_difference_ci_high": found.ci_high}
    one = ppi_proportion(judge, judge[:1], people[:1])  # one label: no interval for it, none for the difference
    few = estimate_difference(a, one)
    assert math.isnan(few.ci_low) and math.isnan(few.ci_high) and few.too_few.startswith("too few labels: 1")
    assert str(max(MIN_DIFFERENCE_LABELS, MIN_LABELS)) in few.too_few
    assert estimate_difference(a, b, min_labels=50).too_few.startswith("too few labels: 40")


def test_an_estimate_reads_back_from_a_run_s_figures_as_logged():
    rng = np.random.default_rng(4)
    people, judge = (rng.random(200) < 0.6).astype(int), (rng.random(200) < 0.7).astype(int)
    found = ppi_proportion(judge, judge[:30], people[:30])
    back = PeopleEstimate.from_metrics(found.as_metrics("strict_alignment"), "strict_alignment")
    assert (back.estimate, back.ci_low, back.ci_high, back.n, back.labelled, back.too_few) == (
        found.estimate, found.ci_low, found.ci_high, 200, 30, None)
    assert PeopleEstimate.from_metrics({"strict_alignment": 0.5}, "strict_alignment") is None
    few = PeopleEstimate.from_metrics({"people/strict_alignment_n": 200.0, "people/strict_alignment_labelled": 1.0}, "strict_alignment")
    assert math.isnan(few.estimate) and few.too_few.startswith("too few labels: 1")


class _Run:
    def __init__(self, run_id: str, metrics: dict[str, float]) -> None:
        self.run_id, self.name, self.metrics = run_id, run_id, metrics


def test_a_comparison_table_gets_people_s_rows_and_their_difference_when_both_runs_have_estimates():
    rng = np.random.default_rng(5)
    people, judge = (rng.random(200) < 0.6).astype(int), (rng.random(200) < 0.7).astype(int)
    a = ppi_proportion(judge, judge[:30], people[:30])
    b = ppi_proportion(judge, judge[:50], 1 - people[:50])
    runs = [_Run("first-run", a.as_metrics("strict_alignment")), _Run("second-run", b.as_metrics("strict_alignment")),
            _Run("third-run", {"people/strict_alignment_n": 200.0, "people/strict_alignment_labelled": 1.0}), _Run("fourth-run", {})]
    cards = {"first-run": "claim_alignment", "second-run": "claim_alignment", "third-run": "claim_alignment"}
    records = people_records(runs, ["people/strict_alignment"], cards, {})
    assert [r["run_id"] for r in records] == ["first-run", "second-run", "third-run"]
    expected = estimate_difference(a, b)
    second = records[1]
    assert (second["difference_vs_first"], second["difference_ci_low"], second["difference_ci_high"]) == (
        expected.difference, expected.ci_low, expected.ci_high)
    assert second["value"] == b.estimate and second["n"] == 50 and second["test"] == "independent samples (MOVER)"
    assert second["metric_note"] == f"the difference assumes {DIFFERENCE_ASSUMES}"
    assert records[2]["metric_note"].startswith("too few labels: 1") and math.isnan(records[2]["difference_ci_low"])
    assert records[0]["test"] == "" and math.isnan(records[0]["difference_vs_first"])
    import pandas as pd

    lines = people_differences(pd.DataFrame.from_records(records))
    assert len(lines) == 2 and lines[0].startswith(f"second-run (second-r) minus the first, people/strict_alignment: {expected.difference:+.3g} [")
    other = people_records(runs[:2], ["people/strict_alignment"], {"first-run": "claim_alignment", "second-run": "answer_faithfulness"}, {})
    assert other[1]["metric_note"].startswith("not compared: people answered claim_alignment on the first run and answer_faithfulness")
    assert math.isnan(other[1]["difference_vs_first"])


def test_a_gate_rule_reads_the_recalibrated_grounding_and_says_too_few_labels_below_its_count():
    from mlflow_genai_metrics.people import MIN_RECALIBRATION_LABELS
    from mlflow_genai_metrics.summarization.gating import aggregate_names_logged, parse_rules, rule_outcomes

    rules = parse_rules(["people/grounded_rate>=0.3", "people/grounding_ece_after<=0.1"])
    assert {r.metric for r in rules} <= aggregate_names_logged()  # known names: the gate does not refuse them as typos
    few = rule_outcomes(rules, {"people/grounding_labelled": 3.0})
    assert [o.passed for o in few] == [False, False]
    assert few[0].detail == f"too few labels to re-calibrate grounding: 3 (needs {MIN_RECALIBRATION_LABELS})"
    none = rule_outcomes(rules, {})
    assert none[0].detail.startswith("no grounding re-calibrated on people's labels on this run")
    enough = rule_outcomes(rules, {"people/grounded_rate": 0.35, "people/grounding_ece_after": 0.08, "people/grounding_labelled": 50.0})
    assert [o.passed for o in enough] == [True, True]
