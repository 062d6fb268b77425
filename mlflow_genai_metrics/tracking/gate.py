"""``register_if_passing``: register a model version only when its evaluation run clears every rule."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import mlflow
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED, MIN_INTERVAL_ROWS
from ..summarization.comparison import (
    InsufficientPairsError,
    SignatureMismatchError,
    SourceMismatchError,
    compare_results,
    direction,
)
from ..summarization.metrics import METRICS, closest_names
from ..summarization.scoring import aggregate_names, corpus_names, interval_names
from .compare import evaluated_run, load_run, run_figures
from .errors import is_bad_input
from .run_logging import SIGNATURE_TAG

__all__ = ["GateResult", "Rule", "RuleOutcome", "check_model_uri", "parse_rules", "register_if_passing"]

_OPERATORS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
_CONDITION = re.compile(r"^\s*(>=|<=|==|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_INLINE = re.compile(r"^\s*([A-Za-z0-9_./-]+?)\s*((?:>=|<=|==|>|<).*)$")
EVALUATION_RUN_TAG = "mgm.evaluation_run_id"
RULE_TAG_PREFIX = "mgm.gate.rule."
# The URI forms MLflow resolves (a typo in them is a bad input, said before any rule is evaluated).
_MODEL_URI_FORMS = {
    "models:": (re.compile(r"^models:/[^/@]+(?:/[^/@]+|@[^/@]+)?$"), "models:/<name>/<version>, models:/<name>@<alias> or models:/<model id>"),
    "runs:": (re.compile(r"^runs:/[^/]+(?:/.*)?$"), "runs:/<run id>/<artifact path>"),
}


def _aggregate_names() -> frozenset[str]:
    """Every name a registered aggregate is logged under (value, interval bounds, n)."""
    return frozenset(name for base in aggregate_names() for name in (base, *interval_names(base)))



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
    rule: Rule
    actual: float | None
    passed: bool
    detail: str = ""

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


def register_if_passing(
    model_uri: str,
    name: str,
    *,
    run_id: str,
    rules: Mapping[str, str] | Sequence[str],
    alias: str | None = "champion",
    beat_champion: bool = False,
    beat_metric: str | Sequence[str] = "strict_alignment",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> GateResult:
    """Register ``model_uri`` as a version of ``name`` only if the evaluation run ``run_id`` passes every rule.

    Rules read every figure of the run, interval bounds and n included (``"alignment_ci_low": ">= 0.85"``): its
    report's, not only the headline figures logged as run metrics (``compare.run_figures``). With
    ``beat_champion=True`` the run must also beat the model version holding ``alias`` on each ``beat_metric``
    (default ``strict_alignment``: every claim supported), in the metric's own direction (higher is better for
    ``strict_alignment``, lower for ``defect_rate/contradiction``, from the metric registry): a one-sided test of
    the metric's kind (exact McNemar, sign-flip permutation, approximate randomization) at level
    1 - ``confidence``, Holm-adjusted when several metrics are to be beaten, compared exactly as
    ``compare_results`` compares (pairs by id and source, rows with a judge error on either side left out), under
    the same judge signature, over pairs that cover at least half of the champion's judged rows. A candidate worse
    than the champion on a beat rule is refused whatever the p-value; too few pairs to test is refused; a refused
    comparison fails the gate, with the reason. The pairs used and left out, and each test (kind, n, p, adjusted
    p, direction), are tagged on the version. On a pass the version is registered and ``alias`` is moved to it; the
    version gets one tag per rule, ``mgm.gate.rule.<metric>`` = ``">= 0.9 actual 0.93 passed"`` (a champion
    rule's key is ``mgm.gate.rule.<beat_metric>_vs_<alias>``), the tags ``mgm.signature`` and
    ``mgm.evaluation_run_id``, and a description naming the run, the rules with their values and the signature.
    On a fail nothing is registered and every failed rule is reported with its actual and required values.
    Malformed rules, unknown metrics and a ``model_uri`` that names no model raise ``ValueError``, and an unknown
    ``run_id`` MLflow's ``MlflowException`` (RESOURCE_DOES_NOT_EXIST), before any rule is evaluated.
    """
    parsed = parse_rules(rules)
    beat_metrics = [beat_metric] if isinstance(beat_metric, str) else list(beat_metric)
    if beat_champion and not alias:
        raise ValueError("beat_champion needs an alias naming the champion")
    if alias:
        _check_alias(alias)
    if beat_champion:
        _check_beat_metrics(beat_metrics)
    client = MlflowClient()
    run = client.get_run(run_id)
    check_model_uri(model_uri)
    metrics = run_figures(run, client)
    # A judge aggregate that the run lacks had no row to stand on (every row failed): the rule fails, with the
    # reason. Any other missing name is a typo or a metric this run never logs: an error before anything happens.
    unknown = [r.metric for r in parsed if r.metric not in metrics and r.metric not in _aggregate_names()]
    if unknown:
        raise ValueError(f"unknown metric(s) in the gate's rules: {closest_names(unknown, set(metrics) | set(_aggregate_names()))} "
                         f"(run {run_id} has {len(metrics)} figures; docs/metrics.md lists every name)")
    outcomes = []
    for rule in parsed:
        actual = metrics.get(rule.metric)
        if actual is None or math.isnan(actual):
            outcomes.append(RuleOutcome(rule, None, False, _missing_because(rule.metric, metrics)))
            continue
        passed = not math.isnan(actual) and _OPERATORS[rule.op](actual, rule.threshold)
        outcomes.append(RuleOutcome(rule, actual, passed))
    messages: list[str] = []
    comparison_tags: dict[str, str] = {}
    if beat_champion:
        outcomes += _champion_outcomes(client, name, alias, run, metrics, beat_metrics, resamples, seed, confidence, messages, comparison_tags)
    result = GateResult(passed=all(o.passed for o in outcomes), outcomes=outcomes, alias=alias, messages=messages)
    if not result.passed:
        return result
    version = mlflow.register_model(model_uri, name)
    signature = run.data.tags.get(SIGNATURE_TAG, "")
    tags = {
        EVALUATION_RUN_TAG: run_id,
        SIGNATURE_TAG: signature,
        **{o.rule.tag_key: o.tag_value for o in outcomes},
        **comparison_tags,
    }
    for key, value in tags.items():
        client.set_model_version_tag(name, version.version, key, value)
    client.update_model_version(name, version.version, description=_description(run, outcomes, signature))
    result.registered_version = str(version.version)
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
        result.alias_moved = True
    return result


def _missing_because(metric: str, metrics: Mapping[str, float]) -> str:
    """Why a run has no value for a rule's metric: an interval not reported from so few rows, or no judged row."""
    base = re.sub(r"_ci_(low|high)$", "", metric)
    rows = metrics.get(interval_names(base)[2]) if base != metric else None
    if rows:
        spec = METRICS.aggregate(base)
        needs = "2 rows" if spec is not None and spec.kind == "proportion" else f"{MIN_INTERVAL_ROWS} rows that do not all agree"
        return f"no interval: {base} stands on {rows:.0f} row{'s' if rows != 1 else ''}, and an interval that holds its coverage needs {needs}"
    errors = metrics.get("judge_error_rate")
    why = f"judge_error_rate {errors:.3g}" if errors is not None else "no judge_error_rate either"
    return f"no value: no row of the run was judged ({why})"


def check_model_uri(model_uri: str) -> None:
    """Raise ``ValueError`` unless ``model_uri`` names a model MLflow can load (its ``MLmodel`` file is read):
    a malformed ``models:/`` or ``runs:/`` URI, an unknown run, logged model, registered model, version or alias.
    Checked before registering, since ``mlflow.register_model`` creates the registered model before it fails."""
    for scheme, (form, forms) in _MODEL_URI_FORMS.items():
        if model_uri.startswith(scheme) and not form.match(model_uri):
            raise ValueError(f"malformed model URI {model_uri!r}: write {forms}")
    try:
        mlflow.models.get_model_info(model_uri)
    except MlflowException as error:
        if not is_bad_input(error):
            raise
        raise ValueError(f"model URI {model_uri!r} names no model: {error.message}") from None


def _description(run, outcomes: list[RuleOutcome], signature: str) -> str:
    """The version's description (Markdown): which run, which rules passed with which values, the judge signature."""
    name = run.info.run_name or "unnamed"
    lines = [
        f"Registered by the mlflow_genai_metrics gate: evaluation run `{run.info.run_id}` ({name}) passed every rule.",
        "",
        *(f"- `{o.rule}`: actual {o.actual_text(6)}{o.because}" for o in outcomes),
        "",
        f"Judge signature: `{signature or 'none recorded'}`",
    ]
    return "\n".join(lines)


def _check_beat_metrics(metrics: list[str]) -> None:
    """A beat rule names a registered aggregate that pairs compare (not the judge error rate: errored pairs are out)."""
    if not metrics:
        raise ValueError("beat_champion needs at least one beat_metric")
    comparable = [name for name in aggregate_names() if name != "judge_error_rate"] + corpus_names()
    unknown = [m for m in metrics if m not in comparable]
    if unknown:
        raise ValueError(f"cannot beat the champion on {closest_names(unknown, comparable)}: a beat metric is a judge "
                         "aggregate (not judge_error_rate) or a corpus metric (docs/metrics.md)")


def _check_alias(alias: str) -> None:
    """Refuse an alias MLflow would refuse (``v1``, ``latest``, a space) before anything is registered: MLflow checks
    it only when the alias is set, after the version exists."""
    try:
        from mlflow.utils.validation import _validate_model_alias_name, _validate_model_alias_name_reserved
    except ImportError:  # pragma: no cover - another MLflow: it says so when the alias is set
        return
    _validate_model_alias_name(alias)
    _validate_model_alias_name_reserved(alias)


def _champion_outcomes(
    client: MlflowClient, name: str, alias: str, run: Run, figures: dict[str, float], metrics: list[str], resamples: int,
    seed: int, confidence: float, messages: list[str], tags: dict[str, str],
) -> list[RuleOutcome]:
    """One outcome per beat rule: better than the champion in the metric's direction, one-sided, Holm-adjusted
    (``run`` is the candidate's, with the ``figures`` the rules read)."""
    rules = [Rule(f"{metric} vs {alias}", ">" if direction(metric) == "higher" else "<", 0.0) for metric in metrics]

    def refused(why: str, *, passed: bool = False) -> list[RuleOutcome]:
        return [RuleOutcome(rule, None, passed, why) for rule in rules]

    try:
        champion = client.get_model_version_by_alias(name, alias)
    except MlflowException as error:
        if not is_bad_input(error):  # a store that failed is not "no champion"
            raise
        messages.append(f"no version holds alias {alias!r} yet: nothing to beat")
        return refused("no champion yet", passed=True)
    champion_run_id = champion.tags.get(EVALUATION_RUN_TAG)
    if not champion_run_id:
        return refused(f"champion version {champion.version} has no {EVALUATION_RUN_TAG} tag to compare with")
    candidate, incumbent = evaluated_run(run, client, figures), load_run(champion_run_id, client)
    alternatives = {metric: "greater" if direction(metric) == "higher" else "less" for metric in metrics}
    try:  # the one comparison every path uses: pairs by id and source, errored pairs out, too few refused
        comparison = compare_results(
            incumbent, candidate, resamples=resamples, seed=seed, confidence=confidence, metrics=metrics, alternatives=alternatives,
        )
    except SignatureMismatchError as error:
        return refused(f"refused: judge signatures differ from the champion's ({error})")
    except (SourceMismatchError, InsufficientPairsError) as error:
        return refused(f"refused: {error}")
    tags.update({
        "mgm.gate.pairs_used": str(comparison.pairs_used),
        "mgm.gate.pairs_dropped_for_errors": str(comparison.pairs_dropped_for_errors),
        "mgm.gate.only_in_champion": str(comparison.only_in_a),
        "mgm.gate.only_in_candidate": str(comparison.only_in_b),
    })
    judged = int((incumbent.rows["error"].fillna("").astype(str) == "").sum())
    if 2 * comparison.pairs_used < judged:  # a hand-picked handful of the champion's articles does not speak for it
        return refused(
            f"refused: the {comparison.pairs_used} usable pairs cover fewer than half of the champion's {judged} judged "
            f"rows (champion version {champion.version}; {comparison.rows_note}); judge the candidate on the champion's rows"
        )
    table = comparison.table.set_index("metric")  # only the beat metrics: its p_holm adjusts them together
    outcomes = []
    for rule, metric in zip(rules, metrics):
        if metric not in table.index:
            outcomes.append(RuleOutcome(rule, None, False, f"{metric} cannot be compared row by row (neither run has it for the same pairs)"))
            continue
        row = table.loc[metric]
        outcomes.append(_beat_outcome(rule, metric, row, confidence, f"champion version {champion.version}", comparison.rows_note))
        tags[f"mgm.gate.test.{metric}"] = (
            f"{row['test']}, one-sided ({row['direction']} is better), n {int(row['n'])}, p {_p(row['p_value'])}, "
            f"Holm-adjusted p {_p(row['p_holm'])}"
        )
    return outcomes


def _p(value: float) -> str:
    return "not tested" if math.isnan(value) else f"{value:.3g}"


def _beat_outcome(rule: Rule, metric: str, row, confidence: float, champion: str, pairs: str) -> RuleOutcome:
    """Better in the metric's direction with the Holm-adjusted one-sided p-value below the level; never a worse one."""
    adjusted = float(row["p_holm"])
    difference, higher = float(row["difference"]), row["direction"] == "higher"
    where = (f"{champion}: difference {difference:+.4g} ({row['direction']} is better), {row['test']}, one-sided "
             f"p = {_p(row['p_value'])}, Holm-adjusted p = {_p(adjusted)}, n = {int(row['n'])} pairs; {pairs}")
    if row["better"] == "A":
        way = "lower" if higher else "higher"
        return RuleOutcome(rule, difference, False, f"worse than the champion: {metric} is {way} than the champion's "
                           f"({row['b']:.4g} against {row['a']:.4g}) and {row['direction']} is better; {where}")
    if math.isnan(float(row["p_value"])):
        return RuleOutcome(rule, difference, False, f"{row['note'] or 'too few pairs to test'}; {where}")
    passed = row["better"] == "B" and adjusted < 1 - confidence
    return RuleOutcome(rule, difference, passed, where if passed else f"not significantly better; {where}")
