"""Rows a run's own output made unreadable: which judge failures a run caused, and how a decision counts them.

A judge failure caused by what a run wrote (``CONTENT_FAILURES``: a reply refused for its content, no claim in a text
that has words, a request the endpoint refused as it stands (400/413/422: a text too long for the judge's context
window), a reply cut off at the judge's ``max_tokens`` (the claims of a long text), and a row the application raised
on (``application``: nothing to judge)) is, for a decision, a failure of
the run that wrote it, never a row to leave out (guide "Decisions"): the two runs of a decision are judged alike, so a
request refused or answered too long on one side only differs by that side's text. Every other failure (timeouts,
5xx, rate limits, the budget, a reply that is not a chat completion or not the answer's JSON) is the infrastructure's
and leaves the pair. ``comparison.pair_rows`` and ``comparison.paired_table`` read them in decision mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..people import CONFIDENCE
from ..stats import RatioStatistic, StatisticsOptions, rate_counting_failures
from .gating import PEOPLE_METRICS
from .metrics import METRICS, MetricSpec
from .scoring import estimates, interval_names

__all__ = ["CONTENT_FAILURES", "content_failed", "counted_against", "decision_figures", "error_kinds", "infrastructure_failed"]

# The error kinds (``judge.records.ErrorKind``) a run's text causes. A candidate whose rambling summaries overflow the
# judge's context once had those rows dropped as the infrastructure's (3 of 60, within the allowance) and was registered.
CONTENT_FAILURES = frozenset({"no_claims", "refused", "bad_request", "truncated", "application"})
_ERROR_KIND = r"^(?:[^:]*? failed: )?([a-z_]+)(?: \(HTTP \d+\))?:"


def error_kinds(rows: pd.DataFrame) -> pd.Series:
    """Each row's judge error kind (``"no_claims"``, ``"timeout"``, ...; ``""`` when it was judged, ``"unknown"`` for
    an error text of another form), read from the row's ``error`` text: ``"<stage> failed: <kind>[ (HTTP n)]: ..."``
    (``RowError.__str__``) or ``"<kind>[ (HTTP n)]: ..."`` (``JudgeError.__str__``)."""
    errors = rows["error"].fillna("").astype(str)
    kinds = errors.str.extract(_ERROR_KIND, expand=False).fillna("unknown")
    return kinds.where(errors.str.strip() != "", "")


def content_failed(rows: pd.DataFrame) -> pd.Series:
    """Rows the judge could not read because of what was written (``CONTENT_FAILURES``)."""
    return error_kinds(rows).isin(CONTENT_FAILURES)


def infrastructure_failed(rows: pd.DataFrame) -> pd.Series:
    """Rows the judge failed on for the infrastructure (any error that is not a content failure): a decision leaves
    their pairs out and counts them."""
    return (rows["error"].fillna("").astype(str) != "") & ~content_failed(rows)


def _unreadable(spec: MetricSpec, rows: pd.DataFrame, other: pd.DataFrame) -> np.ndarray:
    """The rows of one side the metric could not be read on because of what that side wrote: a content failure of
    the judge; for the grounding check (no judge), a text it cannot read (no score) where the other side has one."""
    if spec.family == "grounding":
        column = spec.of or "grounding"
        if column not in rows or column not in other:
            return np.zeros(len(rows), dtype=bool)
        mine, theirs = (frame[column].to_numpy(dtype=float, na_value=np.nan) for frame in (rows, other))
        # the check did not run on this side at all (no score and no reason on any row): nothing it wrote was
        # unreadable; a side whose every row has a reason and no score ("It is." on every article) is all unreadable
        reasons = rows.get("grounding_reasoning")
        if np.isnan(mine).all() and (reasons is None or not reasons.fillna("").astype(str).str.strip().ne("").any()):
            return np.zeros(len(rows), dtype=bool)
        return np.isnan(mine) & ~np.isnan(theirs)
    return content_failed(rows).to_numpy(dtype=bool)


def counted_against(spec: MetricSpec, a: RatioStatistic, b: RatioStatistic, rows_a: pd.DataFrame, rows_b: pd.DataFrame,
                    ) -> tuple[RatioStatistic, RatioStatistic]:
    """A decision's view of one metric over paired rows (guide "Decisions"): a row a side's output made unreadable
    is a failure of that side on a proportion (0 where higher is better, 1 where lower is), never left out; on a
    judged mean or ratio likewise (``_worst``: a mean's lowest value, a ratio's claims all unsupported, weighed as
    the largest row read), since leaving the pair out let a candidate whose long, bad summaries the judge could not
    read be decided on its good rows alone (registered 14 of 60 times at 200 pairs, equal once those rows were
    judged: tests/test_gate_level_hostile.py). A figure the judge does not give (reference, length) cannot be
    scored so: its pair leaves. The judge error rate itself needs nothing: its rows are already 1 where it failed."""
    if spec.name == "judge_error_rate" or spec.kind == "corpus":
        return a, b
    unreadable_a, unreadable_b = _unreadable(spec, rows_a, rows_b), _unreadable(spec, rows_b, rows_a)
    if spec.kind != "proportion":
        if spec.family in _NOT_JUDGED - {"grounding"}:
            keep = ~(unreadable_a | unreadable_b)
            return tuple(RatioStatistic(s.numerator * keep, s.denominator * keep) for s in (a, b))  # type: ignore[return-value]
        return _worst(spec, a, b, unreadable_a), _worst(spec, b, a, unreadable_b)
    return _failed_proportion(spec, a, unreadable_a), _failed_proportion(spec, b, unreadable_b)


def _failed_proportion(spec: MetricSpec, statistic: RatioStatistic, failed: np.ndarray) -> RatioStatistic:
    """A proportion's ``statistic`` with its ``failed`` rows each one trial gone wrong (0 where higher is better, 1
    where lower is)."""
    failure = 0.0 if spec.greater_is_better else 1.0
    return RatioStatistic(np.where(failed, failure, statistic.numerator), np.where(failed, 1.0, statistic.denominator))


def _worst(spec: MetricSpec, mine: RatioStatistic, theirs: RatioStatistic, unreadable: np.ndarray) -> RatioStatistic:
    """``mine`` with its ``unreadable`` rows scored as failures: a mean's worst value (0, or the worst row either side
    got where that is worse), a ratio's numerator none (higher is better) or all (lower is) of a denominator as
    large as the largest of a row either side was read on (1 where none was): a text the judge could not read is
    as often a long one (cut off at ``max_tokens``, past the context window), and weighed as the pair's other row a
    candidate much better on its short rows still read as better with its long ones hidden."""
    if spec.kind == "mean":
        values = [s.numerator[s.denominator > 0] / s.denominator[s.denominator > 0] for s in (mine, theirs)]
        seen = np.concatenate(values)
        worst = min(0.0, float(seen.min(initial=0.0))) if spec.greater_is_better else float(seen.max(initial=0.0))
        return RatioStatistic(np.where(unreadable, worst, mine.numerator), np.where(unreadable, 1.0, mine.denominator))
    weight = max(1.0, float(np.max(np.concatenate([mine.denominator, theirs.denominator]), initial=0.0)))
    failed = 0.0 if spec.greater_is_better else weight
    return RatioStatistic(np.where(unreadable, failed, mine.numerator), np.where(unreadable, weight, mine.denominator))


# Families whose figures the judge's reading of the run's own text gives (what a content failure leaves unscored).
_NOT_JUDGED = frozenset({"reference", "length", "usage", "grounding"})


def decision_figures(rows: pd.DataFrame, figures: dict[str, float], metrics: Sequence[str],
                     statistics: StatisticsOptions) -> tuple[dict[str, float], dict[str, int]]:
    """A run's ``figures`` as a decision on that run alone reads them (a threshold rule of the registry gate, guide
    "Decisions"): each judged proportion that ``metrics`` name (by itself, an interval bound or its n) counts the rows
    the run's own output made unreadable (``content_failed``), and those the judge did not answer
    (``infrastructure_failed``), as failures, never leaves them out, and has its interval and n again; every other figure is as logged (a mean or ratio cannot score such a row: the judge error rate
    says how many); people's rate of such a proportion (``people/strict_alignment``, its bounds) likewise, from its
    logged figures (``_people_counting_failures``). Returns those figures and, for each proportion read so, how many
    rows it counted so."""
    unreadable = content_failed(rows).to_numpy(dtype=bool) if "error" in rows else np.zeros(0, dtype=bool)
    # rows the judge did not answer (timeouts, server errors, the budget) count as failures too: with no champion to
    # pair them against, the worst they could have shown (a judge times out on the long summaries, the ones that go
    # wrong: left out, they lifted the rate of exactly the candidates that write them)
    unanswered = infrastructure_failed(rows).to_numpy(dtype=bool) if "error" in rows else np.zeros(0, dtype=bool)
    decided, counted = dict(figures), {}
    if not (unreadable.any() or unanswered.any()):
        return decided, counted
    named = set(metrics)
    for spec in METRICS.aggregates():
        if (spec.kind != "proportion" or spec.family in _NOT_JUDGED or spec.name == "judge_error_rate"
                or named.isdisjoint((spec.name, *interval_names(spec.name))) or not all(c in rows for c in spec.columns)):
            continue
        statistic, _ = counted_against(spec, spec.ratio_statistic(rows), spec.ratio_statistic(rows), rows, rows)
        if not statistic.denominator.sum():  # no row judged or unreadable: no figure to bound (the rule says why)
            continue
        statistic = _failed_proportion(spec, statistic, unanswered)
        decided.update(estimates({spec.name: statistic.histogram()}, statistics)[spec.name].as_metrics())
        counted[spec.name] = int((unreadable | unanswered).sum())
    for metric in PEOPLE_METRICS:  # people's rate of a judged proportion: its rows are the judge's, read alike
        name, column = f"people/{metric}", METRICS.aggregate(metric).columns[0]
        failures = int(((unreadable | unanswered) & rows[column].isna().to_numpy()).sum()) if column in rows else 0
        if failures and not named.isdisjoint((name, *interval_names(name))) and name in figures and f"{name}_n" in figures:
            decided.update(_people_counting_failures(figures, name, failures))
            counted[name] = failures
    return decided, counted


def _people_counting_failures(figures: Mapping[str, float], name: str, failures: int) -> dict[str, float]:
    """People's rate ``name`` (over the ``n`` rows the judge read) with ``failures`` more rows counted as failures
    (``stats.rate_counting_failures``, at people's one level). A NaN (too few labels) stays NaN."""
    rate, low, high, n = (float(figures.get(k, math.nan)) for k in (name, *interval_names(name)))
    value, low, high = rate_counting_failures(rate, low, high, int(n), failures, confidence=CONFIDENCE)
    return {name: value, f"{name}_ci_low": low, f"{name}_ci_high": high, f"{name}_n": n + failures}
