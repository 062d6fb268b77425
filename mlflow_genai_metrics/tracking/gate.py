"""``register_if_passing``: register a model version only when its evaluation run clears every rule."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ..judge import ExampleSet, Judge
from ..signature import parse_signature
from ..stats import StatisticsOptions
from ..summarization.comparison import (
    InsufficientPairsError,
    SignatureMismatchError,
    SourceMismatchError,
    compare_results,
)
from ..summarization.decision import attempt_level, beat_rules, decide, decision_metrics
from ..summarization.gating import (
    GateResult,
    Rule,
    RuleOutcome,
    check_beat_metrics,
    p_text,
    parse_rules,
    refuse_unknown_metrics,
    rule_outcomes,
)
from ..summarization.metrics import METRICS
from ..summarization.options import resolve
from ..summarization.stability import counted_against
from ..summarization.unreadable import content_failed, decision_figures, error_kinds, infrastructure_failed
from . import attempts
from .compare import evaluated_run, load_run, load_table, quiet_downloads, run_figures, run_report
from .errors import is_bad_input
from .model import check_evaluated_model
from .rejudge import ChampionDataError, check_rejudgeable, rejudge_champion
from .run_logging import SIGNATURE_TAG, set_note_section, set_tags, tag_value

EVALUATION_RUN_TAG = "mgm.evaluation_run_id"


def register_if_passing(
    model_uri: str,
    name: str,
    *,
    run_id: str,
    rules: Mapping[str, str] | Sequence[str],
    alias: str | None = "champion",
    beat_champion: bool = False,
    beat_metric: str | Sequence[str] = "strict_alignment",
    statistics: StatisticsOptions | None = None,
    require_stability: bool = False,
    champion_data: pd.DataFrame | str | Path | None = None,
    judge: Judge | None = None,
    examples: Any = None,
    **keywords: Any,
) -> GateResult:
    """Register ``model_uri`` as a version of ``name`` only if the evaluation run ``run_id`` passes every rule.

    Rules read every figure of the run, interval bounds and n included (``"alignment_ci_low": ">= 0.85"``): its
    report's, not only the headline figures logged as run metrics (``compare.run_figures``). With
    ``beat_champion=True`` the run must also beat the model version holding ``alias`` on each ``beat_metric``
    (default ``strict_alignment``: every claim supported), in the metric's own direction (higher is better for
    ``strict_alignment``, lower for ``defect_rate/contradiction``, from the metric registry): a one-sided test of
    the metric's kind (exact McNemar, sign-flip permutation, approximate randomization) at level
    1 - ``confidence`` (of ``statistics``, a ``stats.StatisticsOptions``, or its fields as keywords),
    Holm-adjusted when several metrics are to be beaten, compared exactly as ``compare_results`` compares (pairs
    by id and source, rows with a judge error on either side left out), under the same judge signature, over pairs
    that cover at least half of the champion's judged rows. A candidate worse than the champion on a beat rule is
    refused whatever the p-value; too few pairs to test is refused; a refused comparison fails the gate, with the
    reason. The pairs used and left out, and each test (kind, n, p, adjusted
    p, direction), are tagged on the version. ``require_stability=True`` makes the beat rules hold with the
    candidate's unstable claims counted against it (``summarization.stability.counted_against``: each claim whose
    repeated verifications disagreed counted as contradicted); a candidate judged with each verification asked
    once (no ``stability`` in its signature) is refused. ``champion_data`` (the champion's outputs: a table or its path,
    columns ``id``, ``text``, ``summary``) with ``judge`` (the candidate's ``Judge``; ``examples``: the examples
    the candidate was judged with, if any; its stability is read from its signature) judges the champion's rows again
    at gate time and compares against that (``tracking.rejudge``): a judge that drifted since the champion was
    evaluated then judges both sides; the cache answers what has not changed. On a pass the version is registered and ``alias`` is moved to it; the
    version gets one tag per rule, ``mgm.gate.rule.<metric>`` = ``">= 0.9 actual 0.93 passed"`` (a champion
    rule's key is ``mgm.gate.rule.<beat_metric>_vs_<alias>``), the tags ``mgm.signature`` and
    ``mgm.evaluation_run_id``, and a description naming the run, the rules with their values and the signature.
    On a fail nothing is registered and every failed rule is reported with its actual and required values.
    Malformed rules, unknown metrics and a ``model_uri`` that names no model raise ``ValueError``, and an unknown
    ``run_id`` MLflow's ``MlflowException`` (RESOURCE_DOES_NOT_EXIST), before any rule is evaluated.
    """
    statistics = resolve("register_if_passing", keywords, statistics=statistics, judging=False).statistics
    parsed = parse_rules(rules)
    beat_metrics = [beat_metric] if isinstance(beat_metric, str) else list(beat_metric)
    if beat_champion and not alias:
        raise ValueError("beat_champion needs an alias naming the champion")
    if alias:
        _check_alias(alias)
    if beat_champion:
        check_beat_metrics(beat_metrics)
    if champion_data is not None and (not beat_champion or judge is None):
        raise ValueError("champion_data is judged again to beat the champion: give it with beat_champion=True and the "
                         "candidate's judge (judge=Judge(...), the one its run was judged with)")
    if examples is not None and champion_data is None:
        raise ValueError("examples are the candidate's, to judge the champion's rows again with: give them with champion_data")
    client = MlflowClient()
    run = client.get_run(run_id)
    check_evaluated_model(model_uri, run)
    if champion_data is not None:
        check_rejudgeable(run.data.tags.get(SIGNATURE_TAG, ""), run_id)
    report = run_report(run_id, client)  # read once: the rules' figures, then the comparison's run
    metrics = run_figures(run, client, report)
    # A judge aggregate that the run lacks had no row to stand on (every row failed): the rule fails, with the
    # reason. Any other missing name is a typo or a metric this run never logs: an error before anything happens.
    refuse_unknown_metrics(parsed, set(metrics), f"(run {run_id} has {len(metrics)} figures; docs/metrics.md lists every name)")
    bases = [_interval_base(rule.metric) for rule in parsed]
    # the run's rows, read once: a rule on an aggregate reads them as a decision does, the champion's comparison pairs them
    rows = _rows_table(run_id, client) if beat_champion or any(METRICS.aggregate(base.removeprefix("people/")) is not None for base in bases) else None
    outcomes = _threshold_outcomes(parsed, bases, metrics, rows, statistics)
    messages: list[str] = []
    comparison_tags: dict[str, str] = {}
    if beat_champion:
        rejudge = (champion_data, judge, ExampleSet.coerce(examples)) if champion_data is not None else None
        outcomes += _champion_outcomes(client, name, alias, run, metrics, beat_metrics, statistics, messages, comparison_tags,
                                       require_stability, report, rejudge, rows)
    result = GateResult(passed=all(o.passed for o in outcomes), outcomes=outcomes, alias=alias, messages=messages)
    if not result.passed:
        _record_decision(client, run_id, name, result, comparison_tags)
        return result
    version = mlflow.register_model(model_uri, name)
    signature = run.data.tags.get(SIGNATURE_TAG, "")
    tags = {EVALUATION_RUN_TAG: run_id, SIGNATURE_TAG: signature, **_rule_tags(outcomes), **comparison_tags}
    for key, value in tags.items():
        client.set_model_version_tag(name, version.version, key, value)
    client.update_model_version(name, version.version, description=_description(run, outcomes, signature))
    if beat_champion and (moved := _champion_moved(client, name, alias, comparison_tags.get(CHAMPION_VERSION_TAG))) is not None:
        client.delete_model_version(name, version.version)  # passed against a champion that no longer holds the alias
        result = GateResult(passed=False, outcomes=[*outcomes, moved], alias=alias, messages=messages)
        _record_decision(client, run_id, name, result, comparison_tags)
        return result
    result.registered_version = str(version.version)
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
        result.alias_moved = True
    _record_decision(client, run_id, name, result, comparison_tags)
    return result


def _interval_base(metric: str) -> str:
    """The aggregate a rule's figure belongs to: ``strict_alignment`` for ``strict_alignment_ci_low`` and ``_n``."""
    return re.sub(r"_(ci_low|ci_high|n)$", "", metric)


def _rows_table(run_id: str, client: MlflowClient) -> pd.DataFrame | None:
    """The run's rows table; None for a run without one (not judged by this package: its rules read it as logged)."""
    try:
        return load_table(run_id, "rows", client)
    except (MlflowException, OSError):
        return None


def _threshold_outcomes(parsed: list[Rule], bases: list[str], metrics: dict[str, float], rows: pd.DataFrame | None,
                        statistics: StatisticsOptions) -> list[RuleOutcome]:
    """The rules against the run's figures as a decision reads them (``unreadable.decision_figures``): a proportion
    counts the rows the judge could not read for what the run wrote, or did not answer, as failures (a candidate
    refusing half its articles read strict_alignment 1 over the other half, and was registered). ``bases``: each rule's aggregate
    (``_interval_base``); ``rows``: the run's rows table (None: the figures as logged)."""
    decided, counted, unwritten = metrics, {}, int((error_kinds(rows) == "application").sum()) if rows is not None else 0  # no output
    unread = int(content_failed(rows).sum()) - unwritten if rows is not None else 0  # outputs the judge could not read
    unanswered = int(infrastructure_failed(rows).sum()) if rows is not None and "error" in rows else 0  # timeouts, 5xx, budget
    if rows is not None:
        decided, counted = decision_figures(rows, metrics, [r.metric for r in parsed], statistics)
    outcomes = rule_outcomes(parsed, decided)
    for number, (outcome, base) in enumerate(zip(outcomes, bases)):
        if base in counted and outcome.actual is not None:
            logged = metrics.get(outcome.rule.metric)
            failed = (f"{counted[base]} row(s) with no output (the application failed on them)" if not unread else  # not "what it wrote"
                      f"{counted[base]} row(s) the judge could not read for what the run wrote" + (f" ({unwritten} with no output)" if unwritten else ""))
            if unanswered:
                failed = (f"{counted[base]} row(s) the judge did not answer or could not read ({unanswered} unanswered: timeouts or server errors, "
                          "the worst they could have shown; judge them again, the cache keeps what was answered" + "".join(
                              f"; {k} {what}" for k, what in ((unread, "unreadable for what the run wrote"), (unwritten, "with no output")) if k > 0) + ")")
            said = (f"{failed} counted as failures; "
                    + (f"logged {logged:.4g} without them" if logged is not None else "none logged without them"))
            outcomes[number] = dataclasses.replace(outcome, detail="; ".join(d for d in (outcome.detail, said) if d))
    return outcomes


DECISION_TAG = "mgm.gate.decision"  # on the candidate's run: what the latest gate decided, in one line
DECISION_TABLE = "mgm_gate_decisions.json"  # on the candidate's run, beside its other tables: every rule of every gate call, appended


def decision_table(result: GateResult, name: str) -> pd.DataFrame:
    """One row per rule: what it required, the actual value, passed or not, and its test (kind, n, p, Holm-adjusted
    p, direction) where a paired test decided it; the detail says why."""
    decided = "passed: registered version " + str(result.registered_version) if result.passed else "failed: nothing registered"
    return pd.DataFrame.from_records([{  # what a reader needs first, first: the UI shows the leftmost columns
        "rule": str(o.rule), "passed": o.passed, "actual": o.actual, "required": f"{o.rule.op} {o.rule.threshold:g}",
        "test": o.test, "n": o.n, "p_holm": o.p_holm, "p_value": o.p_value, "direction": o.direction, "detail": o.detail,
        "decision": decided, "registered_model": name,
    } for o in result.outcomes])


def _record_decision(client: MlflowClient, run_id: str, name: str, result: GateResult, tags: dict[str, str]) -> None:
    """Passed or failed, the decision goes on the candidate's run where people look: a one-line tag, the comparison's
    tags, and the rules' table (``mgm_gate_decisions.json``, one row per rule of each gate call)."""
    failed = result.failed
    line = (f"passed: registered version {result.registered_version} of {name}" if result.passed
            else f"failed ({len(failed)} of {len(result.outcomes)} rules) for {name}: {failed[0]}")
    set_tags(client, run_id, {DECISION_TAG: tag_value(line), **tags})
    with quiet_downloads():  # MLflow reads the table logged by an earlier gate call, to add this one's rows
        client.log_table(run_id, decision_table(result, name), DECISION_TABLE)
    rules = "\n".join(_rule_lines(result.outcomes, marks=True))
    head = (f"passed, registered version {result.registered_version}" if result.passed
            else f"failed {len(failed)} of {len(result.outcomes)} rules, nothing registered")
    set_note_section(client, run_id, "gate decision", f"**Registry gate ({name}): {head}**\n\n{rules}\n\nEvery rule's test: `{DECISION_TABLE}`.")


CHAMPION_VERSION_TAG = "mgm.gate.champion_version"  # the version the decision compared with ("none": no champion yet)


def _champion_moved(client: MlflowClient, name: str, alias: str, compared: str | None) -> RuleOutcome | None:
    """A failed outcome when ``alias`` no longer names the version the decision compared with: another gate
    registered a candidate meanwhile (the later of two gates at once moved the alias over a champion it never saw)."""
    try:
        now = str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException as error:
        if not is_bad_input(error):
            raise
        now = "none"
    if compared is None or now == compared:
        return None
    was = "no version" if compared == "none" else f"version {compared}"
    why = (f"{'version ' + now if now != 'none' else 'no version'} holds alias {alias!r} now, and this gate compared with "
           f"{was} (another gate registered a candidate meanwhile): nothing registered; gate again to compare with it")
    return RuleOutcome(Rule(f"{alias} unchanged while deciding", "==", 1.0), 0.0, False, why)


def _rule_tags(outcomes: list[RuleOutcome]) -> dict[str, str]:
    """One version tag per rule: ``mgm.gate.rule.<metric>``, then ``.2``, ``.3`` for more rules on one metric (two
    rules on ``richness`` kept only the last)."""
    tags: dict[str, str] = {}
    for outcome in outcomes:
        key, number = outcome.rule.tag_key, 1
        while key in tags:
            number += 1
            key = f"{outcome.rule.tag_key}.{number}"
        tags[key] = outcome.tag_value
    return tags


def _description(run, outcomes: list[RuleOutcome], signature: str) -> str:
    """The version's description (Markdown): which run, which rules passed with which values, the judge signature."""
    name = run.info.run_name or "unnamed"
    lines = [
        f"Registered by the mlflow_genai_metrics gate: evaluation run `{run.info.run_id}` ({name}) passed every rule.",
        "",
        *_rule_lines(outcomes),
        "",
        f"Judge signature: `{signature or 'none recorded'}`",
    ]
    return "\n".join(lines)


def _rule_lines(outcomes: list[RuleOutcome], *, marks: bool = False) -> list[str]:
    """Each rule as a Markdown list item with its actual value and why (``marks``: PASS or FAIL before it)."""
    return [f"- {('PASS ' if o.passed else 'FAIL ') if marks else ''}`{o.rule}`: actual {o.actual_text(6)}{o.because}" for o in outcomes]


def _check_alias(alias: str) -> None:
    """Refuse an alias MLflow would refuse (``v1``, ``latest``, a space) before anything is registered: MLflow checks it
    only when the alias is set, after the version exists. By MLflow's documented rules, and by its own checks where
    they are found (3.18 renamed them: a fresh install registered the version, then refused its alias)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils import validation

    for name in ("_validate_alias_name", "_validate_model_alias_name", "_validate_alias_name_reserved", "_validate_model_alias_name_reserved"):
        getattr(validation, name, lambda _: None)(alias)
    if not isinstance(alias, str) or not re.fullmatch(r"[\w\-]{1,255}", alias) or alias.lower() == "latest" or re.fullmatch(r"[vV]\d+", alias):
        raise MlflowException(f"Invalid alias name: {alias!r}: letters, digits, '_' and '-' (at most 255), neither 'latest' "
                              "nor a version's name ('v1')", error_code="INVALID_PARAMETER_VALUE")


def _champion_outcomes(
    client: MlflowClient, name: str, alias: str, run: Run, figures: dict[str, float], metrics: list[str],
    statistics: StatisticsOptions, messages: list[str], tags: dict[str, str], require_stability: bool = False,
    report: dict | None = None, rejudge: tuple[Any, Judge, ExampleSet | None] | None = None, rows: pd.DataFrame | None = None,
) -> list[RuleOutcome]:
    """The decision's rules against the champion (``summarization.decision.decide``), this attempt counted on the
    champion's version (``run`` is the candidate's, with the ``figures`` the rules read, its ``report`` and its ``rows``
    table, read once)."""
    def refused(why: str, *, passed: bool = False) -> list[RuleOutcome]:
        return [RuleOutcome(rule, None, passed, why) for rule in beat_rules(metrics, alias)]

    try:
        champion = client.get_model_version_by_alias(name, alias)
    except MlflowException as error:
        if not is_bad_input(error):  # a store that failed is not "no champion"
            raise
        messages.append(f"no version holds alias {alias!r} yet: nothing to beat")
        tags[CHAMPION_VERSION_TAG] = "none"
        return refused("no champion yet", passed=True)
    tags[CHAMPION_VERSION_TAG] = str(champion.version)
    champion_run_id = champion.tags.get(EVALUATION_RUN_TAG)
    if not champion_run_id:
        return refused(f"champion version {champion.version} has no {EVALUATION_RUN_TAG} tag to compare with")
    try:
        incumbent = load_run(champion_run_id, client)
    except MlflowException as error:
        if not is_bad_input(error):
            raise
        return refused(f"refused: champion version {champion.version}'s evaluation run {champion_run_id} cannot be read "
                       f"({error.message}): restore it, or move alias {alias!r} to a version whose run can be read")
    candidate = evaluated_run(run, client, figures, report, rows)
    if rejudge is not None:  # the champion's side judged today, by the candidate's judge
        try:
            data, judge, examples = rejudge
            again = rejudge_champion(incumbent, data, judge, run, candidate.signature, f"{name} v{champion.version} judged again", client,
                                     examples)
        except ChampionDataError as error:
            return refused(f"refused: {error}")
        incumbent = again.run
        tags["mgm.gate.champion_rejudged"] = again.note
        tags["mgm.gate.champion_drift"] = f"{again.drifted} of {again.compared} rows judged otherwise than in the champion's run"
        messages.append(again.note)
    if require_stability:
        if not parse_signature(candidate.signature).get("stability"):
            return refused("refused: stability is required, but the candidate was judged with each verification asked once "
                           "(judge it with stability=k, k > 1, at the temperature it will be used at)")
        rows, counted = counted_against(candidate.rows, load_table(run.info.run_id, "claims", client))
        candidate = dataclasses.replace(candidate, rows=rows)
        tags["mgm.gate.stability"] = f"required: {counted} unstable claim(s) of the candidate counted as contradicted"
    # The endpoint's own name for what answered: one signature can hide a hosted model that changed under its name.
    served = {"champion": list(incumbent.served_models), "candidate": list(candidate.served_models)}
    tags["mgm.gate.served_models"] = "; ".join(f"{side}: {', '.join(names) or 'not reported'}" for side, names in served.items())
    if served["champion"] and served["candidate"] and served["champion"] != served["candidate"]:
        return refused(f"refused: the judge's endpoint served {', '.join(served['candidate'])} for the candidate and "
                       f"{', '.join(served['champion'])} for the champion under one signature, so a difference could be the "
                       "judge's; give the gate the champion's outputs (champion_data=, mgm gate --champion-data) to judge "
                       "them again with the candidate's judge")
    compared, alternatives = decision_metrics(metrics)
    try:  # the one comparison every path uses: pairs by id and source; a decision counts unreadable outputs as failures
        comparison = compare_results(incumbent, candidate, statistics=statistics, metrics=compared, alternatives=alternatives,
                                     allow_partial=True, decision=True)
    except SignatureMismatchError as error:
        return refused(f"refused: judge signatures differ from the champion's ({error})")
    except (SourceMismatchError, InsufficientPairsError) as error:
        return refused(f"refused: {error}")
    tags.update({
        "mgm.gate.pairs_used": str(comparison.pairs_used),
        "mgm.gate.pairs_unreadable": str(comparison.pairs_unreadable),
        "mgm.gate.pairs_dropped_for_errors": str(comparison.pairs_dropped_for_errors),
        "mgm.gate.only_in_champion": str(comparison.only_in_a),
        "mgm.gate.only_in_candidate": str(comparison.only_in_b),
    })
    infrastructure = infrastructure_failed(incumbent.rows)
    attempts.claim(client, name, champion.version, run.info.run_id)
    try:
        return _decided(client, name, alias, run, champion, comparison, metrics, statistics, messages, tags,
                        int((~infrastructure).sum()))
    finally:
        attempts.release(client, name, champion.version, run.info.run_id)


def _decided(client: MlflowClient, name: str, alias: str, run: Run, champion, comparison, metrics: list[str],
             statistics: StatisticsOptions, messages: list[str], tags: dict[str, str], champion_judged: int) -> list[RuleOutcome]:
    """The rules decided at this attempt's level: its number is the attempts recorded against the champion plus the
    gates deciding against it now, this one included (read after this one said so: of two at once, the later reader
    sees the earlier, so the k-th to say so decides at alpha / 2^k or less, and the levels still sum under alpha)."""
    seen = client.get_model_version(name, champion.version).tags
    deciding = attempts.deciding(client, name, champion.version, seen, messages)
    attempt = attempts.recorded(seen) + max(deciding, 1)
    family, ledger = attempts.family_alpha(client, name, champion.version, seen.get(attempts.ALPHA_TAG), 1 - statistics.confidence, messages)
    alpha = attempt_level(family, attempt)
    outcomes = decide(comparison, metrics, alias=alias, champion=f"champion version {champion.version}",
                      champion_judged=champion_judged, alpha=alpha, level=1 - statistics.confidence)
    for outcome in outcomes:
        if outcome.test:
            metric = outcome.rule.metric.split(" vs ")[0]
            kind = "not worse" if outcome.rule.metric.endswith("not worse") else "better"
            tags[f"mgm.gate.test.{metric}"] = (
                f"{outcome.test}, one-sided ({kind}; {outcome.direction} is better), n {outcome.n}, p {p_text(outcome.p_value)}"
                + (f", Holm-adjusted p {p_text(outcome.p_holm)}, level {alpha:.3g}" if kind == "better" else "")
            )
    if any(not math.isnan(o.p_value) for o in outcomes[: len(metrics)]):  # a test was spent: the next attempt pays
        passed = all(o.passed for o in outcomes)
        attempts.record(client, name, champion.version, attempt, run.info.run_id, beside=deciding > 1,  # two at once: two records
                        text=f"run {run.info.run_id}: level {alpha:.3g}, {'passed' if passed else 'failed'}")
        tags["mgm.gate.attempt"] = f"{attempt} against version {champion.version} of {name}, decided at level {alpha:.3g}"
        messages.append(f"attempt {attempt} against champion version {champion.version}: decided at level {alpha:.3g} "
                        f"(the k-th attempt against one champion at alpha / 2^k, so all of them together stay under "
                        f"alpha = {ledger:g}, the champion's {attempts.ALPHA_TAG})")
    return outcomes


