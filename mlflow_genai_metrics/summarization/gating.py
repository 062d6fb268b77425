"""The gate's rules and verdicts, apart from MLflow: parsing ``alignment >= 0.9``, a rule's outcome and its tag, the
gate's result, why a run has no value for a rule, and a beat rule's verdict from a paired comparison's row.
``tracking.gate`` reads the run and the champion from MLflow and registers the version."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..people import MIN_LABELS, MIN_RECALIBRATION_LABELS
from ..stats import MIN_INTERVAL_ROWS, MIN_RATIO_ROWS
from .metrics import METRICS, closest_names
from .scoring import aggregate_names, corpus_names, interval_names

_OPERATORS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
_CONDITION = re.compile(r"^\s*(>=|<=|==|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_INLINE = re.compile(r"^\s*([A-Za-z0-9_./-]+?)\s*((?:>=|<=|==|>|<).*)$")
RULE_TAG_PREFIX = "mgm.gate.rule."

# The run figures people's labels estimate (``tracking.labels``): ``people/<metric>`` and its interval, n and labels.
PEOPLE_METRICS = ("strict_alignment", "instruction_following")
# ... and the grounding check re-calibrated on the same labels: each figure's name and the ``people.Recalibration``
# attribute it logs (``people/grounding_labelled`` says how many; below the labels it needs, the only one logged)
RECALIBRATED = {"people/grounding": "mean", "people/grounded_rate": "grounded_rate", "people/grounding_ece_before": "ece_before",
                "people/grounding_ece_after": "ece_after", "people/grounding_labelled": "labelled"}


def aggregate_names_logged() -> frozenset[str]:
    """Every name a registered aggregate is logged under (value, interval bounds, n), and people's estimates'."""
    people = (f"people/{m}{suffix}" for m in PEOPLE_METRICS for suffix in ("", "_ci_low", "_ci_high", "_n", "_labelled"))
    return frozenset((*(name for base in aggregate_names() for name in (base, *interval_names(base))), *people, *RECALIBRATED))


def refuse_unknown_metrics(rules: Sequence[Rule], known: set[str], said: str) -> None:
    """``ValueError`` naming each rule's metric that is neither in ``known`` nor logged under an aggregate's name, with
    the closest names, then ``said`` (what the names were checked against, in words): a typo, or a metric no run logs."""
    known = known | aggregate_names_logged()
    unknown = [rule.metric for rule in rules if rule.metric not in known]
    if unknown:
        raise ValueError(f"unknown metric(s) in the gate's rules: {closest_names(unknown, known)} {said}")


@dataclass(frozen=True)
class Rule:
    metric: str
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"

    @property
    def tag_key(self) -> str:
        """The version tag recording this rule: ``mgm.gate.rule.<metric>``, no spaces (``alignment_vs_champion``)."""
        return RULE_TAG_PREFIX + re.sub(r"[^A-Za-z0-9_./-]+", "_", self.metric.strip())


@dataclass(frozen=True)
class RuleOutcome:
    """A rule's verdict; a rule decided by a paired test (against a champion) also carries the test's kind, its n,
    p-value, Holm-adjusted p-value and the metric's direction, for the decision's record."""

    rule: Rule
    actual: float | None
    passed: bool
    detail: str = ""
    test: str = ""
    n: int | None = None
    p_value: float = math.nan
    p_holm: float = math.nan
    direction: str = ""

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.rule}: actual {self.actual_text()}{self.because}"

    def actual_text(self, digits: int = 4) -> str:
        return "missing" if self.actual is None else f"{self.actual:.{digits}g}"

    @property
    def because(self) -> str:
        return f" ({self.detail})" if self.detail else ""

    @property
    def tag_value(self) -> str:
        """``">= 0.9 actual 0.93 passed"``: the threshold, the run's value and the verdict (and why, when said)."""
        verdict = "passed" if self.passed else "failed"
        return f"{self.rule.op} {self.rule.threshold:g} actual {self.actual_text(6)} {verdict}{self.because}"


@dataclass
class GateResult:
    """What the gate decided. ``registered_version`` is None when nothing was registered."""

    passed: bool
    outcomes: list[RuleOutcome]
    registered_version: str | None = None
    alias: str | None = None
    alias_moved: bool = False
    messages: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RuleOutcome]:
        return [o for o in self.outcomes if not o.passed]

    def __str__(self) -> str:
        head = (
            f"gate passed: registered version {self.registered_version}"
            + (f", alias {self.alias!r} moved to it" if self.alias_moved else "")
            if self.passed
            else "gate failed: nothing registered"
        )
        return "\n".join([head, *(f"  {o}" for o in self.outcomes), *(f"  {m}" for m in self.messages)])


def parse_rules(rules: Mapping[str, str] | Sequence[str]) -> list[Rule]:
    """``{"alignment": ">= 0.9"}`` or ``["alignment>=0.9"]`` -> rules; a malformed one is a ``ValueError``."""
    pairs: list[tuple[str, str]] = []
    if isinstance(rules, str):  # one rule as a string (it was read a character at a time: "malformed rule 's'")
        rules = [rules]
    if isinstance(rules, Mapping):
        pairs = [(str(k), str(v)) for k, v in rules.items()]
    else:
        for text in rules:
            match = _INLINE.match(str(text))
            if not match:
                raise ValueError(f"malformed rule {text!r}: write it as METRIC OP NUMBER, e.g. 'alignment>=0.9'")
            pairs.append((match.group(1), match.group(2)))
    if not pairs:
        raise ValueError("no rules given: a gate needs at least one, e.g. {'alignment': '>= 0.9'}")
    parsed = []
    for metric, condition in pairs:
        match = _CONDITION.match(condition)
        if not match:
            raise ValueError(
                f"malformed rule for {metric!r}: {condition!r}; write OP NUMBER with OP one of {', '.join(_OPERATORS)}"
            )
        parsed.append(Rule(metric, match.group(1), float(match.group(2))))
    return parsed


def rule_outcomes(rules: Sequence[Rule], metrics: Mapping[str, float]) -> list[RuleOutcome]:
    """Each rule against a run's figures: passed or failed with the value, or failed because the value is missing."""
    outcomes = []
    for rule in rules:
        actual = metrics.get(rule.metric)
        if actual is None or math.isnan(actual):
            outcomes.append(RuleOutcome(rule, None, False, missing_because(rule.metric, metrics)))
        else:
            outcomes.append(RuleOutcome(rule, actual, _OPERATORS[rule.op](actual, rule.threshold)))
    return outcomes


def missing_because(metric: str, metrics: Mapping[str, float]) -> str:
    """Why a run has no value for a rule's metric: an interval not reported from so few rows (or labels), no judged
    row, or no people's estimate."""
    base = re.sub(r"_ci_(low|high)$", "", metric)
    if metric in RECALIBRATED:
        labelled = metrics.get("people/grounding_labelled")
        if labelled is None:
            return ("no grounding re-calibrated on people's labels on this run: it needs grounding scores on its traces and "
                    "people's labels on its sample (mgm label-sample, then mgm people)")
        return f"too few labels to re-calibrate grounding: {labelled:.0f} (needs {MIN_RECALIBRATION_LABELS})"
    if base.startswith("people/"):
        labelled = metrics.get(f"{base}_labelled")
        if labelled is None:
            return ("no people's estimate on this run: draw a sample of its rows (mgm label-sample), have people label it, "
                    "then estimate (mgm people)")
        return (f"too few labels: {labelled:.0f} (an interval that holds its coverage needs {MIN_LABELS}, "
                "measured by benchmarks/bench_people.py)")
    rows = metrics.get(interval_names(base)[2]) if base != metric else None
    if rows:
        spec = METRICS.aggregate(base)
        kind = spec.kind if spec is not None else "mean"
        needs = {"proportion": "2 rows", "ratio": f"{MIN_RATIO_ROWS} rows with claims"}.get(kind, f"{MIN_INTERVAL_ROWS} rows that do not all agree")
        return f"no interval: {base} stands on {rows:.0f} row{'s' if rows != 1 else ''}, and an interval that holds its coverage needs {needs}"
    spec = METRICS.aggregate(base)
    if spec is not None and spec.family == "grounding":  # no judge: the check scored no row
        scored = metrics.get("grounding_n")
        return ("no value: the grounding check scored no row of the run (each summary empty, without a content word, or "
                "in a language or script it cannot read: the reasons are in grounding_reasoning)" if scored == 0 else
                "no value: the run has no grounding (judged with grounding=False)")
    errors = metrics.get("judge_error_rate")
    if errors is not None and errors < 1:  # rows were judged (this once said "no row of the run was judged" anyway)
        if spec is not None and spec.family in _NEEDS:
            return f"no value: the run has no {base}: it needs {_NEEDS[spec.family]}"
        return f"no value: no judged row of the run gives {base} (judge_error_rate {errors:.3g})"
    why = f"judge_error_rate {errors:.3g}" if errors is not None else "no judge_error_rate either"
    return f"no value: no row of the run was judged ({why})"


# What a family's figures need of a run, for the reason a judged run lacks one.
_NEEDS = {
    "coverage": "key-point coverage asked (coverage=True, mgm evaluate --coverage)",
    "reference": "reference summaries (references=, mgm evaluate --reference-col)",
    "stability": "each verification asked more than once (stability=k, k > 1)",
    "order": "the order check (order_check=share)",
    "suspect": "the grounding check beside the judge (grounding=True)",
    "length": "the summaries' lengths (a summaries run)",
    "rag": "an answers run (judge_answers, mgm evaluate --task rag)",
    "rewrite": "a rewrites run (judge_rewrites, mgm evaluate --task rewrite)",
}


def check_beat_metrics(metrics: list[str]) -> None:
    """A beat rule names a registered aggregate that pairs compare (not the judge error rate: errored pairs are out)."""
    if not metrics:
        raise ValueError("beat_champion needs at least one beat_metric")
    corpus = [m for m in metrics if m in corpus_names()]
    if corpus:
        raise ValueError(
            f"cannot beat the champion on a corpus metric ({', '.join(corpus)}): its paired test (approximate "
            "randomization) tests only that two runs are interchangeable, and a worse candidate whose rare long rows are "
            "bad passes it well over alpha; beat a row metric (strict_alignment, rougeL, ...) and give the corpus metric "
            "a threshold rule (docs/metrics.md)")
    comparable = [name for name in aggregate_names() if name != "judge_error_rate"]
    unknown = [m for m in metrics if m not in comparable]
    if unknown:
        raise ValueError(f"cannot beat the champion on {closest_names(unknown, comparable)}: a beat metric is an "
                         "aggregate with an interval registered here (a task's own: METRICS.register it), not "
                         "judge_error_rate (docs/metrics.md)")


def p_text(value: float) -> str:
    return "not tested" if math.isnan(value) else f"{value:.3g}"
