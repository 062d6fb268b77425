"""People's rate from a few labels (``people.ppi_proportion``) and grounding re-calibrated on them, on cases whose
answers are known exactly or by seeded simulation; and the closed forms against ``ppi-python`` in the peers' env."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats
from scipy.special import expit

from mlflow_genai_metrics.people import (
    MIN_LABELS,
    MIN_RECALIBRATION_LABELS,
    ppi_counts,
    ppi_mean_interval,
    ppi_proportion,
    recalibrated_grounding,
)

PEERS_PYTHON = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"


def _run(rate: float, judge_rate: float, kappa: float, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """People's and the judge's 0/1 values on ``rows`` rows, with these margins and Cohen's kappa."""
    chance = rate * judge_rate + (1 - rate) * (1 - judge_rate)
    both = (chance + kappa * (1 - chance) - 1 + rate + judge_rate) / 2
    cells = [1 - rate - judge_rate + both, judge_rate - both, rate - both, both]  # (person, judge): 00, 01, 10, 11
    codes = rng.choice(4, size=rows, p=cells)
    return codes // 2, codes % 2


def _clopper_pearson_width(successes: int, trials: int) -> float:
    interval = scipy_stats.binomtest(successes, trials).proportion_ci(method="exact")
    return interval.high - interval.low


def test_the_estimate_is_ppi_plus_plus_with_the_labelled_rows_regression_slope():
    rng = np.random.default_rng(1)
    people, judge = _run(0.6, 0.8, 0.3, 1000, rng)
    picked = rng.choice(1000, 100, replace=False)
    found = ppi_proportion(judge, judge[picked], people[picked])
    y, f = people[picked], judge[picked]
    slope = y[f == 1].mean() - y[f == 0].mean()  # Cov(person, judge) / Var(judge) for a 0/1 judge
    assert found.lam == pytest.approx(np.cov(y, f)[0, 1] / np.var(f, ddof=1)) == pytest.approx(slope)
    assert found.estimate == pytest.approx(found.lam * judge.mean() + np.mean(y - found.lam * f))
    # ... which is the post-stratified estimate: the judge's yes-share times people's rate where it said yes, and so on
    share = judge.mean()
    assert found.estimate == pytest.approx(share * y[f == 1].mean() + (1 - share) * y[f == 0].mean())
    assert found.ci_low < found.estimate < found.ci_high and (found.n, found.labelled) == (1000, 100)
    assert found.judge_rate == pytest.approx(judge.mean()) and found.too_few is None
    assert found.as_metrics("strict_alignment") == {
        "people/strict_alignment": found.estimate, "people/strict_alignment_ci_low": found.ci_low,
        "people/strict_alignment_ci_high": found.ci_high, "people/strict_alignment_n": 1000.0, "people/strict_alignment_labelled": 100.0}


def test_a_judge_that_ranks_the_wrong_way_gets_lambda_0_the_labels_alone():
    people = np.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1, 1])
    judge = 1 - people  # always wrong
    found = ppi_proportion(np.r_[judge, np.ones(50)], judge, people)
    assert found.lam == 0 and found.estimate == pytest.approx(people.mean())
    low, high = scipy_stats.binomtest(int(people.sum()), len(people)).proportion_ci(method="exact")
    assert (found.ci_low, found.ci_high) == pytest.approx((low, high), abs=1e-8)


def test_a_perfect_judge_gives_a_narrower_interval_than_the_labels_alone_and_never_a_zero_width_one():
    rng = np.random.default_rng(2)
    people = (rng.random(2000) < 0.7).astype(int)
    for labelled in (10, 25, 100, 400):
        picked = rng.choice(2000, labelled, replace=False)
        found = ppi_proportion(people, people[picked], people[picked])  # the judge agrees with people on every row
        width = found.ci_high - found.ci_low
        assert 0 < width < _clopper_pearson_width(int(people[picked].sum()), labelled)
        assert found.ci_low <= people.mean() <= found.ci_high
    # every row labelled: still an interval for the rate on rows like these, about the labels' own Clopper-Pearson
    everything = ppi_proportion(people, people, people)
    assert everything.ci_high - everything.ci_low == pytest.approx(_clopper_pearson_width(int(people.sum()), 2000), rel=0.05)


def test_a_biased_judge_is_corrected_without_bias_and_the_interval_covers_at_the_reported_n():
    """True rate 0.6, the judge says 0.8 (Cohen's kappa 0.3): over 2,000 seeded runs of 1,000 rows with 100 labelled,
    the estimate's mean is 0.6 within Monte Carlo error and the interval covers >= 0.93 (the judge's own rate,
    0.2 off, never would)."""
    rng = np.random.default_rng(3)
    draws, rows, labelled, rate = 2000, 1000, 100, 0.6
    chance = rate * 0.8 + 0.4 * 0.2
    both = (chance + 0.3 * (1 - chance) - 1 + rate + 0.8) / 2
    runs = rng.multinomial(rows, [1 - rate - 0.8 + both, 0.8 - both, rate - both, both], size=draws)
    cells = np.stack([rng.multivariate_hypergeometric(run, labelled) for run in runs]).reshape(-1, 2, 2)
    estimate, low, high, lam = ppi_counts(runs[:, 1] + runs[:, 3], rows, cells)
    assert abs(estimate.mean() - rate) < 3 * estimate.std() / math.sqrt(draws)
    assert np.mean((low <= rate) & (rate <= high)) >= 0.93
    assert np.mean(low > rate) <= 0.035 and np.all(high - low > 0) and np.all((0 < lam) & (lam <= 1))
    single = ppi_proportion(np.repeat([0, 1, 0, 1], runs[0]), np.repeat([0, 1, 0, 1], cells[0].reshape(-1)),
                            np.repeat([0, 0, 1, 1], cells[0].reshape(-1)))
    assert (single.estimate, single.ci_low, single.ci_high) == pytest.approx((estimate[0], low[0], high[0]))


def test_plain_ppi_without_power_tuning_adds_the_labels_mean_error_to_the_judges_rate():
    rng = np.random.default_rng(4)
    people, judge = _run(0.6, 0.8, 0.3, 1000, rng)
    picked = rng.choice(1000, 100, replace=False)
    found = ppi_proportion(judge, judge[picked], people[picked], power_tuned=False)
    assert found.lam == 1 and found.estimate == pytest.approx(judge.mean() + np.mean(people[picked] - judge[picked]))
    assert found.ci_low < found.estimate < found.ci_high and found.method.startswith("ppi (")


def test_plain_ppi_s_rate_stays_a_rate_inside_its_interval():
    """The judge's rate plus the labels' mean error passed 0: the judge said yes on 2 rows of 100, people said no on
    the 3 labelled rows (two of the judge's yes among them), and the rate read -0.65, outside its own [0, 0.504]."""
    found = ppi_proportion([1, 1] + [0] * 98, [1, 1, 0], [0, 0, 0], power_tuned=False)
    assert found.estimate == 0 and found.ci_low <= found.estimate <= found.ci_high
    above = ppi_proportion([0, 0] + [1] * 98, [0, 0, 1], [1, 1, 1], power_tuned=False)
    assert above.estimate == 1 and above.ci_low <= above.estimate <= above.ci_high


def test_the_intervals_are_offered_at_the_level_their_coverage_was_measured_at_only():
    """At 0.99 and 0.999 the stratified interval covered 0.971 and 0.975 of simulated runs (people's rate 0.98, a
    judge of sensitivity 0.95 and specificity 0.6, 25 labels of 1,000 rows): refused, saying why, not reported."""
    judge_all = [1] * 937 + [0] * 63
    assert ppi_proportion(judge_all, [1] * 24 + [0], [1] * 23 + [0, 0], confidence=0.95).too_few is None
    for level in (0.9, 0.99, 0.999):
        with pytest.raises(ValueError, match=f"offered at confidence 0.95 only, got {level}"):
            ppi_proportion(judge_all, [1] * 24 + [0], [1] * 23 + [0, 0], confidence=level)


def test_too_few_labels_gives_the_estimate_without_an_interval_and_says_why():
    rng = np.random.default_rng(5)
    people, judge = _run(0.6, 0.7, 0.6, 500, rng)
    few = rng.choice(500, MIN_LABELS - 1, replace=False)
    found = ppi_proportion(judge, judge[few], people[few])
    assert math.isnan(found.ci_low) and math.isnan(found.ci_high) and found.labelled == MIN_LABELS - 1
    assert not math.isnan(found.estimate) and found.too_few.startswith("too few labels") and str(MIN_LABELS) in found.too_few
    enough = ppi_proportion(judge, judge[:MIN_LABELS], people[:MIN_LABELS])
    assert enough.too_few is None and enough.ci_low <= enough.estimate <= enough.ci_high
    none = ppi_proportion(judge, [], [])
    assert none.labelled == 0 and math.isnan(none.estimate) and none.too_few


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="0/1"):
        ppi_proportion([0, 1, 0.5], [0, 1], [1, 1])
    with pytest.raises(ValueError, match="0/1"):
        ppi_proportion([0, 1, 1], [0, 1], [1, float("nan")])
    with pytest.raises(ValueError, match="one pair per labelled row"):
        ppi_proportion([0, 1, 1], [0, 1], [1])
    with pytest.raises(ValueError, match="rows of the run"):
        ppi_proportion([0, 0, 1], [1, 1], [1, 1])
    with pytest.raises(ValueError, match="confidence"):
        ppi_proportion([0, 1], [0, 1], [0, 1], confidence=95)


def test_recalibration_refuses_scores_that_are_not_grounding_scores_and_a_single_fold():
    """A score on a 0-100 scale was fitted as if it were one (calibration error 72), a negative one failed deep in
    the fit with an unrelated message, and one fold has nothing to measure out of fold."""
    scores, people = [0.2, 0.9] * 10, [0, 1] * 10
    with pytest.raises(ValueError, match=r"between 0 and 1 .* got \[90\.0\]"):
        recalibrated_grounding(scores + [90.0], scores, people)
    with pytest.raises(ValueError, match=r"scores_labelled must hold grounding scores.*got \[-0\.1\]"):
        recalibrated_grounding(scores, [-0.1] + scores[1:], people)
    with pytest.raises(ValueError, match="folds must be 2 or more"):
        recalibrated_grounding(scores, scores, people, folds=1)
    assert recalibrated_grounding(scores + [float("nan")], scores, people).too_few is None  # a missing score stays allowed


def _miscalibrated(rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """People's labels drawn from expit(z) and a score that says expit(2 + 2 z): too high and too sure."""
    z = rng.normal(0, 1.2, rows)
    return (rng.random(rows) < expit(z)).astype(int), expit(2 + 2 * z)


def test_recalibration_on_the_labels_reduces_the_calibration_error():
    rng = np.random.default_rng(6)
    people, scores = _miscalibrated(3000, rng)
    picked = rng.choice(3000, 200, replace=False)
    for form in ("shift+scale", "shift"):
        found = recalibrated_grounding(scores, scores[picked], people[picked], form=form)
        assert found.ece_after < found.ece_before / 2 and found.brier_after < found.brier_before
        assert abs(found.mean - people.mean()) < abs(scores.mean() - people.mean()) / 3
        assert found.scores.shape == scores.shape and found.labelled == 200 and "re-calibrated on 200" in found.calibration
        assert found.grounded_rate == np.mean(found.grounded) == np.mean(scores >= found.cut)
        assert found.grounded_rate == pytest.approx(found.mean, abs=1 / 3000)  # the share people's rate is estimated at
    # the fit recovers the inverse map, logit p = (logit score - 2) / 2: a = -1, b = 0.5
    assert (found.shift, found.scale) != (0, 1)
    full = recalibrated_grounding(scores, scores[picked], people[picked])
    assert full.shift == pytest.approx(-1.0, abs=0.45) and full.scale == pytest.approx(0.5, abs=0.15)


def test_the_recalibrated_grounded_rate_follows_people_s_rate_where_the_score_ranks_poorly():
    """Issue 48: a score that ranks barely better than chance (AUC about 0.6) on a set people find 6.5% consistent,
    and one they find 87% consistent: a cut at re-calibrated 0.5 would call 0% and 100% grounded; the label's share
    is within a few points of people's rate over the set (100 labels, 200 seeded draws each)."""
    rng = np.random.default_rng(11)
    for rate in (0.065, 0.869):
        people = (rng.random(2000) < rate).astype(int)
        scores = expit(rng.normal(0.4 * people, 1.0) + 1.0)  # too high, and ranking poorly
        errors, at_half = [], []
        for _ in range(200):
            picked = rng.choice(2000, 100, replace=False)
            found = recalibrated_grounding(scores, scores[picked], people[picked])
            errors.append(abs(found.grounded_rate - people.mean()))
            at_half.append(abs(np.mean(found.scores >= 0.5) - people.mean()))
            assert found.cut == np.min(scores[found.grounded == 1]) and found.grounded_rate == np.mean(found.grounded)
        assert np.mean(errors) < 0.05 and np.mean(at_half) > 0.06, (rate, np.mean(errors), np.mean(at_half))


def test_recalibration_leaves_missing_scores_out_and_keeps_the_shipped_calibration_below_its_minimum():
    rng = np.random.default_rng(7)
    people, scores = _miscalibrated(300, rng)
    scores[:5] = np.nan
    found = recalibrated_grounding(scores, scores[:60], people[:60])
    assert found.labelled == 55 and np.isnan(found.scores[:5]).all() and not np.isnan(found.scores[5:]).any()
    few = recalibrated_grounding(scores, scores[5:5 + MIN_RECALIBRATION_LABELS - 1], people[5:5 + MIN_RECALIBRATION_LABELS - 1])
    assert few.too_few and few.calibration.startswith("shipped") and np.array_equal(few.scores, scores, equal_nan=True)
    assert few.cut == 0.5 and few.grounded_rate == np.nanmean(few.grounded) == np.mean(scores[5:] >= 0.5)  # the model's own cut
    assert np.isnan(found.grounded[:5]).all() and found.grounded_rate == np.mean(found.grounded[5:])
    assert math.isnan(few.ece_after)
    one_class = recalibrated_grounding(scores, scores[5:45], np.zeros(40))  # Platt's targets keep the fit finite
    assert np.isfinite(one_class.shift) and one_class.mean < scores[5:].mean()
    assert "means nothing" not in found.calibration
    backwards = recalibrated_grounding(scores, scores[5:65], (scores[5:65] < np.median(scores[5:65])).astype(int))  # ranks wrongly
    assert backwards.scale == 0 and "ranks these labels the wrong way (b = 0): which rows are grounded means nothing" in backwards.calibration


def test_the_core_imports_nothing_from_mlflow():
    done = subprocess.run([sys.executable, "-c", "import sys, mlflow_genai_metrics.people; print('mlflow' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


_PEER_SCRIPT = """
import json, sys
import numpy as np
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
data = json.load(open(sys.argv[1]))
y, f, u = (np.array(data[k], dtype=float) for k in ("y", "f", "u"))
out = {}
for name, lam in (("tuned", None), ("plain", 1.0), ("labels", 0.0)):
    low, high = ppi_mean_ci(y, f, u, alpha=0.05, lam=lam)
    out[name] = [float(np.ravel(ppi_mean_pointestimate(y, f, u, lam=lam))[0]), float(np.ravel(low)[0]), float(np.ravel(high)[0])]
print(json.dumps(out))
"""


def test_the_closed_forms_match_ppi_python(tmp_path):
    """``ppi_mean_interval`` (the papers' setting: an independent unlabelled sample) against ``ppi-python``'s
    ``ppi_mean_pointestimate`` and ``ppi_mean_ci``, run in the peers' virtual env (never a dependency of ours)."""
    if not PEERS_PYTHON.exists():
        pytest.skip(f"the peers' virtual env is not at {PEERS_PYTHON} (benchmarks/setup_peers.sh makes it)")
    if subprocess.run([str(PEERS_PYTHON), "-c", "import ppi_py"], capture_output=True, timeout=300).returncode != 0:
        pytest.skip(f"ppi-python is not installed in {PEERS_PYTHON.parents[1]} (benchmarks/setup_peers.sh installs it)")
    rng = np.random.default_rng(8)
    people, judge = _run(0.6, 0.8, 0.3, 150, rng)
    _, unlabelled = _run(0.6, 0.8, 0.3, 2000, rng)
    data = tmp_path / "example.json"
    data.write_text(json.dumps({"y": people.tolist(), "f": judge.tolist(), "u": unlabelled.tolist()}))
    done = subprocess.run([str(PEERS_PYTHON), "-c", _PEER_SCRIPT, str(data)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for name, lam in (("tuned", None), ("plain", 1.0), ("labels", 0.0)):
        estimate, low, high, _ = ppi_mean_interval(people, judge, unlabelled, lam=lam)
        assert [estimate, low, high] == pytest.approx(theirs[name], abs=1e-10), name
