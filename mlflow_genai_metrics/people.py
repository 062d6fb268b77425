"""Numbers in people's terms: a judge's rate corrected by a few rows people labelled (prediction-powered inference),
and the model-free ``grounding`` re-calibrated on the same labels. Nothing here imports MLflow.

    from mlflow_genai_metrics.people import ppi_proportion, recalibrated_grounding
    found = ppi_proportion(judged["strictly_aligned"], labelled["strictly_aligned"], labelled["person"])
    found.estimate, found.ci_low, found.ci_high, found.too_few    # found.as_metrics("strict_alignment")
    grounding = recalibrated_grounding(judged["grounding"], labelled["grounding"], labelled["person"])
    grounding.grounded_rate, grounding.ece_before, grounding.ece_after

**The estimate** is PPI++ (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, Science 2023; Angelopoulos, Duchi, Zrnic
2024): lambda times the judge's rate over all N rows, plus the mean of (person - lambda judge) over the n labelled
rows, a uniform random sample of those N rows. lambda = 1 is PPI, lambda = 0 the labels alone. Here the labelled
rows are *part of* the N rows, not an independent sample as the papers (and ``ppi-python``) assume: the error
splits exactly into people's rate over the N rows minus the target (variance p(1 - p) / N) plus the labelled rows'
mean residual minus the N rows' (variance (1 - n/N) S_e^2 / n, S_e^2 the residuals' variance), and the two parts
are uncorrelated. Only the second depends on lambda, so the lambda that minimises the variance is the labelled
rows' regression slope of person on judge, Cov(person, judge) / Var(judge), not the papers' Cov / ((1 + n/N) Var),
whose extra term the overlap removes. lambda is clipped to [0, 1]. For a 0/1 judge that slope is (people's rate where the judge said yes) - (where it said no), and with it
PPI++ is *exactly* the post-stratified estimate: F p1 + (1 - F) p0, F the judge's yes-rate over the N rows, p1, p0
people's rate among the labelled rows the judge said yes / no to. A stratum with no label, or a slope <= 0,
clips lambda to 0: the labels' own rate.

**The interval** is built from exact pieces, so that it never collapses when the judge agrees with every label
(the PPI papers' normal interval is then zero-wide and under-covers: measured in ``benchmarks/bench_people.py``):
each verdict stratum's exact Clopper-Pearson interval of people's rate, combined with the interval of F by MOVER
(Zou and Donner 2008: a sum's bounds from its parts' bounds). Conditionally on the judge's verdicts the strata's
labels are independent binomial samples and F's error is uncorrelated with them, so the pieces add as MOVER
assumes. It covers the rate people would give on rows like these (what every other interval of a run means, and
what a gate or a comparison of two runs needs), and so, a fortiori, people's rate over these N rows (measured on
both). One for these N rows alone (hypergeometric pieces) under-covers where it would be narrower (0.82-0.89 with
75-80% of 20-100 rows labelled): not offered. ``ppi_mean_interval``: ``ppi-python``'s closed forms, to compare.

**Two runs' estimates compared** (``estimate_difference``): the second's minus the first's, its interval the two
intervals combined by MOVER (low: d - sqrt((e2 - l2)^2 + (h1 - e1)^2), high alike). It assumes what
``DIFFERENCE_ASSUMES`` says: labels on independent random samples of each run's rows, the same question on both.

**Re-calibrating grounding**: logit(p') = a + b logit(grounding), fitted on the labelled rows by Platt's method
(logistic loss, his smoothed targets (k+1)/(k+2) and 1/(m+2): labels of one class still give a finite fit),
``form="shift+scale"`` (a and b, b >= 0) or ``"shift"`` (a alone). The mean of p' over the run estimates people's
rate; the re-calibrated ``grounded`` calls that share of the rows grounded, those grounding ranks highest (from grounding ``cut``). A
cut at p' = 0.5 cannot: where the score ranks poorly and people find 6.5% consistent, p' < 0.5 on every row and the
label says 0% (5-24 points off at 100 labels, benchmarks/bench_people.py). The calibration error before and after
is the ECE over ten equal-width bins, "after" on out-of-fold predictions (k-fold on the labelled rows); Brier beside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats
from scipy.special import expit, logit

from .stats import calibration_error

# The fewest labels from which the interval is reported: the count from which it held its 95% coverage (>= 0.93)
# in every cell benchmarks/bench_people.py measured (seed 0, 1,000 draws a cell): a sweep of people's and the
# judge's rates 0.02 to 0.98 and Cohen's kappa -0.3 to 0.9, runs of 20, 100 and 1,000 rows, 2 to 25 labels
# (lowest 0.943, at 25 labels; 0.985 at 2), judges of kappa 0.3 to 0.9 at 25 to 200 labels (lowest 0.961), and the
# four labelled faithfulness sets at 25 to 200 labels (lowest 0.948). Its exact pieces hold from the first two
# labels, as the labels' own Clopper-Pearson interval does (guide: proportions from 2 rows); one label gives none.
MIN_LABELS = 2
CONFIDENCE = 0.95  # the one level the intervals are offered at: the level MIN_LABELS and the sweeps were measured at
MIN_DIFFERENCE_LABELS = 2  # on each run, for two runs' difference: from here it held its coverage (bench_people.py)
DIFFERENCE_ASSUMES = ("independent random samples of labels, each drawn by the tool from its own run, and the same question (card) "
                      "people answered on both; runs of the same rows usually err alike, which makes the interval wider, not narrower")
MIN_RECALIBRATION_LABELS = 10  # fewer cannot be cross-validated in 5 folds of 2 rows: the shipped calibration stays
_TIE = 1e-9  # bounds move out by this much, so that rounding never leaves out a rate they reach exactly
_EPSILON = 1e-6  # grounding is clipped to [eps, 1 - eps] before its logit


@dataclass(frozen=True)
class PeopleEstimate:
    """People's rate of a proportion, from the judge's 0/1 verdict on every row and people's on a random sample.

    ``estimate`` (NaN without a label), its interval ``ci_low``..``ci_high`` (NaN, with ``too_few`` saying why,
    below ``MIN_LABELS`` labels), ``n`` the rows judged, ``labelled`` the rows people labelled, ``lam`` the power
    tuning's lambda, ``judge_rate`` the judge's own rate over the N rows."""

    estimate: float
    ci_low: float
    ci_high: float
    n: int
    labelled: int
    lam: float
    judge_rate: float
    method: str = "ppi++ (stratified Clopper-Pearson, MOVER)"
    too_few: str | None = None

    def as_metrics(self, metric: str) -> dict[str, float]:
        """``{people/<metric>: .., people/<metric>_ci_low: .., _ci_high, _n, _labelled}``."""
        name = f"people/{metric}"
        return {name: self.estimate, f"{name}_ci_low": self.ci_low, f"{name}_ci_high": self.ci_high,
                f"{name}_n": float(self.n), f"{name}_labelled": float(self.labelled)}

    @classmethod
    def from_metrics(cls, metrics, metric: str) -> PeopleEstimate | None:
        """The estimate a run logged as ``people/<metric>`` (``as_metrics``; NaN where not logged: below
        ``MIN_LABELS`` labels), or None when the run has none."""
        name = f"people/{metric}"
        if f"{name}_labelled" not in metrics:
            return None
        value = {key: float(metrics.get(f"{name}{key}", math.nan)) for key in ("", "_ci_low", "_ci_high", "_n", "_labelled")}
        labelled = int(value["_labelled"])
        too_few = None if labelled >= MIN_LABELS and not math.isnan(value["_ci_low"]) else _too_few(labelled, MIN_LABELS)
        return cls(value[""], value["_ci_low"], value["_ci_high"], int(value["_n"]), labelled, math.nan, math.nan, too_few=too_few)


def _too_few(labelled: int, needed: int, what: str = "an interval that holds its coverage") -> str:
    return f"too few labels: {labelled} ({what} needs {needed}, measured by benchmarks/bench_people.py)"


@dataclass(frozen=True)
class PeopleDifference:
    """Two runs' people's estimates: the second's minus the first's, its interval (``too_few``: why none), their labels."""

    difference: float
    ci_low: float
    ci_high: float
    labelled: tuple[int, int]
    too_few: str | None = None
    assumes: str = DIFFERENCE_ASSUMES

    def as_metrics(self, metric: str) -> dict[str, float]:
        """``{people/<metric>_difference: .., _difference_ci_low: .., _difference_ci_high: ..}`` (NaN: too few)."""
        name = f"people/{metric}_difference"
        return {name: self.difference, f"{name}_ci_low": self.ci_low, f"{name}_ci_high": self.ci_high}


def estimate_difference(first: PeopleEstimate, second: PeopleEstimate, *, min_labels: int = MIN_DIFFERENCE_LABELS) -> PeopleDifference:
    """``second`` minus ``first`` (two runs' estimates of the same metric), with the MOVER interval of the two; NaN
    bounds, ``too_few`` saying why, where either run has fewer than ``min_labels`` labels or no interval."""
    labelled = (first.labelled, second.labelled)
    low, high = difference_bounds(first.estimate, first.ci_low, first.ci_high, second.estimate, second.ci_low, second.ci_high)
    difference = second.estimate - first.estimate
    fewest = min(labelled)
    if fewest < max(min_labels, MIN_LABELS) or math.isnan(low) or math.isnan(high):
        what = "a difference's interval that holds its coverage"
        return PeopleDifference(difference, math.nan, math.nan, labelled, _too_few(fewest, max(min_labels, MIN_LABELS), what))
    return PeopleDifference(difference, low, high, labelled)


def difference_bounds(estimate_1, low_1, high_1, estimate_2, low_2, high_2):
    """The MOVER bounds (Zou and Donner 2008) of estimate_2 - estimate_1 from each one's interval, elementwise."""
    e1, l1, h1, e2, l2, h2 = (np.asarray(v, dtype=float) for v in (estimate_1, low_1, high_1, estimate_2, low_2, high_2))
    d = e2 - e1
    low = d - np.sqrt((e2 - l2) ** 2 + (h1 - e1) ** 2)
    high = d + np.sqrt((h2 - e2) ** 2 + (e1 - l1) ** 2)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def ppi_proportion(
    judge_all, judge_labelled, people_labelled, *, confidence: float = 0.95, power_tuned: bool = True,
    min_labels: int = MIN_LABELS,
) -> PeopleEstimate:
    """People's rate over the rows, by PPI++, from the judge's 0/1 value on every row (``judge_all``, N rows) and
    the (judge, person) pairs of the labelled rows (a uniform random sample of those rows, drawn before anyone saw a
    verdict). ``power_tuned=False`` fixes lambda = 1 (plain PPI; its interval: Tango's paired interval of person -
    judge, shifted by the judge's rate; the benchmark measures the power-tuned default only). Values are 0/1 (or
    booleans); a missing one is refused: leave a row the judge failed on out of ``judge_all``, and say so. ``confidence``: 0.95 only."""
    judge_all = _zero_one(judge_all, "judge_all")
    judge_labelled, people = _zero_one(judge_labelled, "judge_labelled"), _zero_one(people_labelled, "people_labelled")
    if len(judge_labelled) != len(people):
        raise ValueError(f"judge_labelled has {len(judge_labelled)} values and people_labelled {len(people)}: one pair per labelled row")
    cells = np.bincount(2 * people.astype(int) + judge_labelled.astype(int), minlength=4).reshape(2, 2)
    rows, yes = len(judge_all), int(judge_all.sum())
    if cells[:, 1].sum() > yes or cells[:, 0].sum() > rows - yes:
        raise ValueError("the labelled rows must be rows of the run: more labelled rows carry a judge verdict than the run has")
    found = ppi_counts(yes, rows, cells, confidence=confidence, power_tuned=power_tuned)
    labelled = int(cells.sum())
    estimate, low, high, lam = (float(v) for v in found)
    too_few = None
    if labelled < max(min_labels, 2):
        too_few, low, high = _too_few(labelled, max(min_labels, 2)), math.nan, math.nan
    method = "ppi++ (stratified Clopper-Pearson, MOVER)" if power_tuned else "ppi (Tango, shifted)"
    return PeopleEstimate(estimate, low, high, rows, labelled, lam, yes / rows if rows else math.nan, method, too_few)


def ppi_counts(judge_yes, rows, cells, *, confidence: float = 0.95, power_tuned: bool = True):
    """``ppi_proportion`` from counts, vectorised over leading axes: ``judge_yes`` of ``rows`` rows judged yes, and
    the labelled rows' 2 x 2 counts ``cells[..., person, judge]`` (rows: person no / yes; columns: judge no / yes, as
    ``meta_evaluation.binary_agreement``). Returns (estimate, ci_low, ci_high, lambda) arrays; counts add up, so
    rows judged in parts give the same numbers."""
    if confidence != CONFIDENCE:  # at 0.99 and 0.999 it covered 0.971, 0.975 (people's rate 0.98, judge specificity 0.6, 25 labels)
        raise ValueError(f"people's intervals are offered at confidence {CONFIDENCE} only, got {confidence!r}: their coverage is measured there")
    cells = np.asarray(cells, dtype=float)
    big_n, yes = np.asarray(rows, dtype=float), np.asarray(judge_yes, dtype=float)
    labelled = cells.sum((-2, -1))
    per = cells.sum(-2)  # labels per stratum
    people = cells[..., 1, :]  # people's yes per stratum
    alpha = 1 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        share = people / per  # people's rate per stratum
        slope = share[..., 1] - share[..., 0]
        rate = people.sum(-1) / labelled
        weight = yes / big_n
    stratified = (per > 0).all(-1) & (slope > 0)
    lam = np.where(stratified, np.clip(np.nan_to_num(slope), 0.0, 1.0), 0.0)
    if not power_tuned:
        return _ppi_untuned(big_n, weight, cells, labelled, alpha)
    weights = np.stack([1 - weight, weight], -1)
    estimate = np.where(stratified, (weights * np.nan_to_num(share)).sum(-1), rate)
    alone = _clopper_pearson(people.sum(-1), labelled, alpha)  # lambda = 0: the labels alone, their exact interval
    low_h, high_h = _clopper_pearson(people, per, alpha)
    share = np.nan_to_num(share)
    low_f, high_f = _clopper_pearson(yes, big_n, alpha)  # F's own uncertainty moves the estimate by p1 - p0 per unit
    step = share[..., 1] - share[..., 0]
    below = (weights**2 * (share - low_h) ** 2).sum(-1) + (step * (weight - low_f)) ** 2
    above = (weights**2 * (high_h - share) ** 2).sum(-1) + (step * (high_f - weight)) ** 2
    low = np.where(stratified, estimate - np.sqrt(below), alone[0]) - _TIE
    high = np.where(stratified, estimate + np.sqrt(above), alone[1]) + _TIE
    return estimate, np.clip(low, 0, 1), np.clip(high, 0, 1), lam


def _ppi_untuned(big_n, weight, cells, labelled, alpha):
    """lambda = 1: the judge's rate plus the labelled rows' mean of (person - judge). Its error is the labelled rows'
    mean residual minus the N rows' (Tango's paired interval, scaled by the finite-population factor) plus people's
    rate over the N rows minus the target (that rate's Clopper-Pearson interval), combined by MOVER."""
    from .paired import tango_interval

    only_judge, only_people = cells[..., 0, 1], cells[..., 1, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = (only_people - only_judge) / labelled
    estimate = np.clip(weight + shift, 0.0, 1.0)  # a rate, inside its clipped interval (unclipped: -0.65 was seen)
    tango = np.vectorize(lambda a, b, n: tango_interval(int(a), int(b), int(n), confidence=1 - alpha) if n >= 2 else (math.nan, math.nan),
                         otypes=[float, float])
    low_d, high_d = tango(only_judge, only_people, labelled)
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.sqrt(np.clip((big_n - labelled) / np.maximum(big_n - 1, 1), 0, 1))
    low_p, high_p = _clopper_pearson(np.clip(estimate, 0, 1) * big_n, big_n, alpha)
    low = estimate - np.sqrt((finite * (shift - low_d)) ** 2 + (estimate - low_p) ** 2)
    high = estimate + np.sqrt((finite * (high_d - shift)) ** 2 + (high_p - estimate) ** 2)
    return estimate, np.clip(low, 0, 1), np.clip(high, 0, 1), np.ones_like(estimate)


def ppi_mean_interval(labels, judge_labelled, judge_unlabelled, *, confidence: float = 0.95, lam: float | None = None):
    """PPI++ for a mean with an *independent* unlabelled sample (the papers' setting), as ``ppi-python`` computes it
    (``ppi_mean_pointestimate``, ``ppi_mean_ci`` with ``alpha = 1 - confidence``): lambda (when None) =
    Cov_n(Y, f) / ((1 + n/N) Var(f over the n + N rows)), clipped to [0, 1]; estimate lambda mean_N(f) +
    mean_n(Y - lambda f); normal interval with variance lambda^2 var_N(f) / N + var_n(Y - lambda f) / n (variances
    over n, not n - 1). Returns (estimate, low, high, lambda). For the closed forms and the comparison only: a run's
    labelled rows are part of its rows, which ``ppi_proportion`` handles."""
    y, f = np.asarray(labels, dtype=float), np.asarray(judge_labelled, dtype=float)
    f_u = np.asarray(judge_unlabelled, dtype=float)
    n, big_n = len(y), len(f_u)
    if lam is None:
        covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
        variance = float(np.var(np.concatenate([f, f_u]), ddof=1))
        lam = float(np.clip(covariance / ((1 + n / big_n) * variance), 0, 1)) if variance > 0 else 0.0
    estimate = lam * f_u.mean() + float(np.mean(y - lam * f))
    spread = math.sqrt(lam**2 * np.var(f_u) / big_n + np.var(y - lam * f) / n)
    z = float(scipy_stats.norm.ppf(1 - (1 - confidence) / 2))
    return float(estimate), float(estimate - z * spread), float(estimate + z * spread), float(lam)


def _zero_one(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if not np.isin(array, (0.0, 1.0)).all():
        bad = array[~np.isin(array, (0.0, 1.0))][:3]
        raise ValueError(f"{name} must hold 0/1 values (a missing one is not a verdict: leave its row out), got {bad.tolist()}")
    return array


def _clopper_pearson(successes, trials, alpha):
    """The exact interval of successes / trials, elementwise (trials 0: [0, 1])."""
    x, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x > 0, scipy_stats.beta.ppf(alpha / 2, np.maximum(x, 1e-12), np.maximum(n - x + 1, 1e-12)), 0.0)
        high = np.where(x < n, scipy_stats.beta.ppf(1 - alpha / 2, x + 1, np.maximum(n - x, 1e-12)), 1.0)
    return np.nan_to_num(low, nan=0.0), np.nan_to_num(high, nan=1.0)


@dataclass(frozen=True)
class Recalibration:
    """The grounding score re-calibrated on people's labels: ``scores`` for every row (NaN where the input had none),
    ``grounded`` (1 on the top ``mean`` share of rows by score, from the shipped score ``cut``), ``grounded_rate`` and ``mean``,
    ``shift`` a and ``scale`` b of logit(p') = a + b logit(grounding), and the calibration error on the labelled
    rows before and after (ECE over ten bins; after: out-of-fold), with the Brier score beside. Below
    ``MIN_RECALIBRATION_LABELS`` labels the shipped calibration is kept (``too_few`` says so)."""

    scores: np.ndarray = field(repr=False)
    grounded_rate: float
    mean: float
    shift: float
    scale: float
    form: str
    labelled: int
    ece_before: float
    ece_after: float
    brier_before: float
    brier_after: float
    too_few: str | None = None
    grounded: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))
    cut: float = 0.5  # the shipped score from which rows are grounded (below too few labels: the model's own 0.5)

    @property
    def calibration(self) -> str:  # what the run's tag names: the calibration its numbers use
        blind = "; the score ranks these labels the wrong way (b = 0): which rows are grounded means nothing" if self.scale == 0 else ""
        return "shipped (the training mix)" if self.too_few else (f"re-calibrated on {self.labelled} people's labels (Platt, {self.form}: a={self.shift:.3f}, b={self.scale:.3f}; "
                                                                  f"grounded: the top {self.grounded_rate:.1%} of rows, from grounding {self.cut:.3f}{blind})")


def recalibrated_grounding(
    scores_all, scores_labelled, people_labelled, *, form: Literal["shift+scale", "shift"] = "shift+scale", folds: int = 5,
    seed: int = 0, min_labels: int = MIN_RECALIBRATION_LABELS,
) -> Recalibration:
    """Re-calibrate a run's ``grounding`` column (``scores_all``) on the labelled rows' grounding and people's 0/1
    verdicts (pairs with a missing score are left out). See the module for the form and the measure."""
    if form not in ("shift+scale", "shift"):
        raise ValueError(f"form must be 'shift+scale' or 'shift', got {form!r}")
    scores_all = np.asarray(scores_all, dtype=float).reshape(-1)
    scored, people = np.asarray(scores_labelled, dtype=float).reshape(-1), np.asarray(people_labelled, dtype=float).reshape(-1)
    if len(scored) != len(people):
        raise ValueError(f"scores_labelled has {len(scored)} values and people_labelled {len(people)}: one pair per labelled row")
    if folds < 2:
        raise ValueError(f"folds must be 2 or more (the calibration error after is measured out of fold), got {folds!r}")
    for name, values in (("scores_all", scores_all), ("scores_labelled", scored)):
        if len(outside := values[~np.isnan(values) & ((values < 0) | (values > 1))]):
            raise ValueError(f"{name} must hold grounding scores, between 0 and 1 (a missing one: NaN), got {outside[:3].tolist()}")
    keep = ~np.isnan(scored)
    scored, people = scored[keep], _zero_one(people[keep], "people_labelled")
    labelled = len(people)
    ece_before = calibration_error(people, scored) if labelled else math.nan
    brier_before = float(np.mean((scored - people) ** 2)) if labelled else math.nan
    scored_all = ~np.isnan(scores_all)
    if labelled < max(min_labels, folds, 2):
        usable, grounded = scores_all[scored_all], np.where(scored_all, scores_all >= 0.5, np.nan)
        return Recalibration(scores_all.copy(), _share(grounded[scored_all]), _mean(usable), 0.0, 1.0, "shipped", labelled, ece_before, math.nan,
                             brier_before, math.nan, f"too few labels to re-calibrate grounding: {labelled} (needs {max(min_labels, folds, 2)})", grounded)
    z = _logit(scored)
    out_of_fold = np.empty(labelled)
    order = np.random.default_rng(seed).permutation(labelled)
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        a, b = _platt(z[train], people[train], form)
        out_of_fold[part] = expit(a + b * z[part])
    a, b = _platt(z, people, form)
    recalibrated = np.where(scored_all, expit(a + b * _logit(scores_all)), np.nan)
    # people's share of the rows, as p' estimates it: those rows the score ranks highest (one order, ties by position)
    ranked = np.flatnonzero(scored_all)[np.argsort(-scores_all[scored_all], kind="stable")]
    top = ranked[: int(round(_mean(recalibrated[scored_all]) * len(ranked)))] if len(ranked) else ranked
    grounded = np.where(scored_all, 0.0, np.nan)
    grounded[top] = 1.0
    return Recalibration(recalibrated, _share(grounded[scored_all]), _mean(recalibrated[scored_all]), a, b, form, labelled, ece_before,
                         calibration_error(people, out_of_fold), brier_before, float(np.mean((out_of_fold - people) ** 2)), None,
                         grounded, float(scores_all[top[-1]]) if len(top) else math.inf)


def _share(flags: np.ndarray) -> float:
    return float(np.mean(flags)) if len(flags) else math.nan


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _logit(scores: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return logit(np.clip(scores, _EPSILON, 1 - _EPSILON))


def _platt(z: np.ndarray, labels: np.ndarray, form: str) -> tuple[float, float]:
    """(a, b) minimising the logistic loss of expit(a + b z) against Platt's smoothed targets (b = 1 for "shift";
    b >= 0: a score that ranks the wrong way is not inverted, it is dropped to b = 0). Newton's method, each step
    halved until the loss falls (the loss is convex; a full step can overshoot)."""
    positives = float(labels.sum())
    target = np.where(labels > 0, (positives + 1) / (positives + 2), 1 / (len(labels) - positives + 2))
    scale = form == "shift+scale"
    design = np.column_stack([np.ones_like(z), z]) if scale else np.ones((len(z), 1))
    offset = np.zeros_like(z) if scale else z
    theta = np.zeros(design.shape[1])
    theta[0] = float(logit(target.mean())) - (0.0 if scale else float(np.mean(z)))

    def loss(t: np.ndarray) -> float:
        eta = design @ t + offset
        return float(np.sum(np.logaddexp(0.0, eta) - target * eta))

    current = loss(theta)
    for _ in range(100):
        p = expit(design @ theta + offset)
        hessian = design.T @ (design * np.maximum(p * (1 - p), 1e-12)[:, None]) + 1e-9 * np.eye(design.shape[1])
        step = np.linalg.solve(hessian, design.T @ (p - target))
        for _ in range(30):
            trial = loss(theta - step)
            if trial <= current:
                break
            step = step / 2
        theta, current = theta - step, min(trial, current)
        if np.max(np.abs(step)) < 1e-10:
            break
    a, b = float(theta[0]), float(theta[1]) if scale else 1.0
    if scale and b < 0:
        return _platt(z * 0.0, labels, "shift")[0], 0.0
    return a, b
