"""A beat-the-champion decision from a paired comparison, apart from MLflow (guide "Decisions").

``decide`` reads a ``Comparison`` made with ``decision=True`` (rows a side's output made unreadable counted
as that side's failures, infrastructure failures left out) and gives one ``RuleOutcome`` per rule:

- each beat metric: better in its direction, one-sided, Holm-adjusted over the beat metrics, at the attempt's level;
  never when worse, whatever the p-value; decided on the pairs *that metric* stands on, which must be at least half
  of the champion's judged rows; a mean or a ratio needs ``MIN_MEAN_PAIRS`` of them (a few long rows can carry one)
  and is tested for "B's aggregate is larger" (``paired.paired_skew_corrected_t``), not for exchangeable pairs;
- beside them, "not worse" rules: the judge error rate (the failures each side's outputs caused) always, and
  ``strict_alignment`` beside a mean or ratio beat rule. Each fails when the candidate is significantly worse: the
  exact one-sided McNemar test of "worse" at the user's level;
- infrastructure failures beyond ``infrastructure_allowance`` refuse every rule: the missing pairs could decide it;
  within it, a proportion's beat rule must hold with them counted as pairs the champion won (``_lost_against``),
  and a mean's or ratio's is refused.

``tracking.gate`` loads the runs, counts the attempts against the champion (each spends its own level:
``attempt_level``) and records the outcome where people look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..signature import parse_signature
from .comparison import direction, with_holm
from .gating import Rule, RuleOutcome, p_text
from .metrics import METRICS

if TYPE_CHECKING:
    from .comparison import Comparison

__all__ = ["MIN_MEAN_PAIRS", "NOT_WORSE_BESIDE_MEANS", "attempt_level", "beat_rules", "decide", "decision_metrics",
           "infrastructure_allowance"]

# A beat rule on a mean or a ratio decides on at least this many pairs (the guide asks 100 or more): a candidate
# equal on claim support whose 3% of long summaries are bad was registered 5.5% of the time at 100 pairs, under 2%
# from 150 (benchmarks/bench_calibration.py, the gate's skewed scenario).
MIN_MEAN_PAIRS = 150
NOT_WORSE_BESIDE_MEANS = "strict_alignment"  # the exact proportion rule that runs beside a mean or ratio beat rule
ERROR_RATE = "judge_error_rate"


def attempt_level(alpha: float, attempt: int) -> float:
    """The level the ``attempt``-th gate attempt against one champion is decided at: ``alpha / 2**attempt``. However
    many candidates are tried, or however often one is tried again with more rows, the chance that any of the
    attempts registers a candidate no better than the champion stays under ``alpha`` (the levels sum to it)."""
    if attempt < 1:
        raise ValueError(f"attempts are counted from 1, got {attempt}")
    return alpha / 2**attempt


def infrastructure_allowance(shared_pairs: int) -> int:
    """How many shared pairs may be missing for infrastructure failures (timeouts, 5xx, the budget) before a decision
    is refused: 2, or 5% of the shared pairs when that is more."""
    return max(2, shared_pairs // 20)


def _kind(metric: str) -> str:
    spec = METRICS.aggregate(metric)
    return spec.kind if spec is not None and spec.kind else "proportion"


def beat_rules(beat_metrics: Sequence[str], alias: str) -> list[Rule]:
    """One rule per beat metric: ``strict_alignment vs champion > 0`` (``<`` where lower is better)."""
    return [Rule(f"{m} vs {alias}", ">" if direction(m) == "higher" else "<", 0.0) for m in beat_metrics]


def decision_metrics(beat_metrics: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The metrics a decision compares (the beat metrics, then the not-worse ones) and each one's one-sided
    alternative: a beat metric's "better", a not-worse metric's "worse"."""
    not_worse = [ERROR_RATE]
    if any(_kind(m) in ("mean", "ratio") for m in beat_metrics) and NOT_WORSE_BESIDE_MEANS not in beat_metrics:
        not_worse.append(NOT_WORSE_BESIDE_MEANS)
    alternatives = {}
    for metric in beat_metrics:
        alternatives[metric] = "greater" if direction(metric) == "higher" else "less"
    for metric in not_worse:
        alternatives[metric] = "less" if direction(metric) == "higher" else "greater"
    return [*beat_metrics, *not_worse], alternatives


def decide(
    comparison: Comparison, beat_metrics: Sequence[str], *, alias: str, champion: str, champion_judged: int, alpha: float,
    level: float | None = None,
) -> list[RuleOutcome]:
    """The decision's rules, beat rules first (module doc). ``champion`` names it in the details ("champion version
    3"); ``champion_judged``: its rows not lost to an infrastructure failure; ``alpha``: this attempt's level for the
    beat rules; ``level``: the user's own (1 - confidence; default ``alpha``), at which the not-worse tests run."""
    level = alpha if level is None else level
    beats = beat_rules(beat_metrics, alias)
    metrics, _ = decision_metrics(beat_metrics)
    not_worse = metrics[len(beat_metrics):]
    worse_rules = [Rule(f"{m} vs {alias}, not worse", ">=" if direction(m) == "higher" else "<=", 0.0) for m in not_worse]
    shared = comparison.pairs_used + comparison.pairs_dropped_for_errors
    allowed = infrastructure_allowance(shared)
    if comparison.pairs_dropped_for_errors > allowed:
        why = (f"refused: {comparison.pairs_dropped_for_errors} of the {shared} shared pairs failed for the infrastructure "
               f"(timeouts, server errors, the budget; at most {allowed} may), and those rows could decide it: judge them "
               f"again (the cache keeps what was answered); {comparison.rows_note}")
        return [RuleOutcome(rule, None, False, why) for rule in (*beats, *worse_rules)]
    table = comparison.table.set_index("metric")
    beat_table = with_holm(comparison.table[comparison.table["metric"].isin(beat_metrics)], 1 - alpha).set_index("metric")
    outcomes = []
    for rule, metric in zip(beats, beat_metrics):
        if metric not in beat_table.index:
            outcomes.append(RuleOutcome(rule, None, False, f"{metric} cannot be compared row by row (neither run has it for the same pairs)"))
            continue
        outcomes.append(_beat(rule, metric, beat_table.loc[metric], alpha, champion, champion_judged, comparison.rows_note,
                              comparison.pairs_dropped_for_errors))
    for rule, metric in zip(worse_rules, not_worse):
        if metric == ERROR_RATE and metric not in table.index and not any(map(_judged, (comparison.signature_a, comparison.signature_b))):
            # the grounding check alone on both sides (``judge=None``): no judge, so no failure of one to compare
            outcomes.append(RuleOutcome(rule, None, True, f"not tested: neither run asked a judge (the grounding check "
                                        f"alone), so no row has a judge failure to compare; {comparison.rows_note}"))
            continue
        if metric not in table.index:
            outcomes.append(RuleOutcome(rule, None, False, f"{metric} cannot be compared row by row on these runs"))
            continue
        outcomes.append(_not_worse(rule, metric, table.loc[metric], champion, level))
    return outcomes


def _judged(signature: str) -> bool:
    """Whether the run of this signature asked a judge (a grounding-only run's signature names none)."""
    return bool(parse_signature(signature).get("judge"))


def _test_fields(row) -> dict:
    return dict(test=str(row["test"]), n=int(row["n"]), p_value=float(row["p_value"]), p_holm=float(row.get("p_holm", math.nan)),
                direction=str(row["direction"]))


def _beat(rule: Rule, metric: str, row, alpha: float, champion: str, champion_judged: int, pairs: str, lost: int = 0) -> RuleOutcome:
    """Better in the metric's direction with the Holm-adjusted one-sided p-value below ``alpha``; never a worse one;
    never on fewer pairs than the rule's kind needs; on a proportion, better also with the ``lost`` pairs (left out for
    the infrastructure's failures, within the allowance) counted as pairs the champion won (``_lost_against``); on a
    mean or ratio, none lost (a few rows can carry one, and nothing bounds what a lost row would have shown)."""
    adjusted, difference, n = float(row["p_holm"]), float(row["difference"]), int(row["n"])
    fields = _test_fields(row)
    where = (f"{champion}: difference {difference:+.4g} ({row['direction']} is better), {row['test']}, one-sided "
             f"p = {p_text(row['p_value'])}, Holm-adjusted p = {p_text(adjusted)} at level {alpha:.3g}, n = {n} pairs; {pairs}")
    if row["better"] == "A":
        way = "lower" if row["direction"] == "higher" else "higher"
        return RuleOutcome(rule, difference, False, f"worse than the champion: {metric} is {way} than the champion's "
                           f"({row['b']:.4g} against {row['a']:.4g}) and {row['direction']} is better; {where}", **fields)
    if 2 * n < champion_judged:
        return RuleOutcome(rule, difference, False, f"refused: {metric} stands on {n} pairs, fewer than half of the "
                           f"champion's {champion_judged} judged rows; judge the candidate on the champion's rows; {where}", **fields)
    kind = str(row["kind"])
    if kind in ("mean", "ratio") and n < MIN_MEAN_PAIRS:
        return RuleOutcome(rule, difference, False, f"refused: too few pairs for a decision on a {kind} ({n}; it needs "
                           f"{MIN_MEAN_PAIRS}: a few long rows can carry a {kind} on fewer); {where}", **fields)
    if kind in ("mean", "ratio") and lost:  # an equal candidate whose 10 worst rows of 200 timed out: registered half the time
        return RuleOutcome(rule, difference, False, f"refused: {lost} pair(s) left out for the infrastructure's failures "
                           f"(timeouts, server errors, the budget), and a few rows can carry a {kind}: judge them again (the "
                           f"cache keeps what was answered); {where}", **fields)
    if math.isnan(float(row["p_value"])):
        return RuleOutcome(rule, difference, False, f"{row['note'] or 'too few pairs to test'}; {where}", **fields)
    discordant = int(row["informative"])
    if kind == "proportion" and 0.5**discordant >= alpha:  # the table's cut is at the user's level, an attempt's is lower
        # (5 discordant pairs all the candidate's way give p = 0.031: it said "not significantly better" at 0.025, as if
        # the candidate had been tested and found wanting); the look still counts as an attempt: it showed the outcome
        needs = math.floor(math.log2(1 / alpha)) + 1
        return RuleOutcome(rule, difference, False, f"too few pairs to test at this attempt's level {alpha:.3g}: even if all "
                           f"{discordant} discordant pairs went the candidate's way, one-sided p would be {0.5**discordant:.3g}; "
                           f"it needs {needs} discordant pairs; {where}", **fields)
    passed = row["better"] == "B" and adjusted < alpha
    if passed and kind == "proportion" and lost:
        worst = _lost_against(discordant, difference, n, lost, adjusted / max(float(row["p_value"]), 1e-300))
        if worst >= alpha:
            return RuleOutcome(rule, difference, False, f"not significantly better once the {lost} pair(s) left out for the "
                               f"infrastructure's failures count against the candidate (Holm-adjusted p {worst:.3g}): those "
                               f"rows could decide it, judge them again (the cache keeps what was answered); {where}", **fields)
    return RuleOutcome(rule, difference, passed, where if passed else f"not significantly better; {where}", **fields)


def _lost_against(discordant: int, difference: float, n: int, lost: int, holm_factor: float) -> float:
    """The Holm-adjusted one-sided McNemar p-value had each of the ``lost`` pairs gone the champion's way. Pairs left
    out for timeouts or server errors are not a random few: a judge times out on the long summaries, which are the
    ones that go wrong, so an equal candidate whose 3 worst rows of 60 timed out (within the allowance) was
    registered 16% of the time at a level of 0.025 (tests/test_gate_level_hostile.py). The decision must hold
    whatever they would have shown."""
    from scipy.stats import binomtest

    better = round((discordant + abs(difference) * n) / 2)
    return min(1.0, holm_factor * float(binomtest(better, discordant + lost, 0.5, alternative="greater").pvalue))


def _not_worse(rule: Rule, metric: str, row, champion: str, alpha: float) -> RuleOutcome:
    """Not significantly worse than the champion: the exact one-sided McNemar test of "worse" at ``alpha`` (the
    user's level, not the attempt's: a later attempt must not pass more easily)."""
    difference = float(row["difference"])
    fields = _test_fields(row)
    worse = row["better"] == "A" and float(row["p_value"]) < alpha
    what = ("failures the outputs caused (a refusal, no claim in a text with words, a text too long for the judge)"
            if metric == ERROR_RATE else metric)
    detail = (f"{champion}: {what} {row['b']:.4g} against {row['a']:.4g} ({row['direction']} is better), {row['test']}, "
              f"one-sided p of worse = {p_text(row['p_value'])} (significant below {alpha:.3g}), n = {int(row['n'])} pairs")
    return RuleOutcome(rule, difference, not worse, f"significantly worse than the champion; {detail}" if worse else detail, **fields)
