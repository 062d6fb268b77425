"""Judgement records -> per-row values and aggregates, exactly as ``docs/metrics.md`` defines them.

Rows the judge failed on get no value (empty, never 0): they are left out of every denominator and counted in
``judge_error_rate``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..judge import Prices, Usage
from ..stats import RatioHistogram, RatioStatistic, StatisticsOptions, bootstrap_interval, proportion_interval, ratio_interval
from ..text import normalised
from .metrics import METRICS, MetricRegistry, row_facts
from .records import RowJudgement

USAGE_COLUMNS = [
    "judge_calls",
    "judge_cache_hits",
    "judge_prompt_tokens",
    "judge_completion_tokens",
    "judge_latency_s",
    "judge_cost_usd",
]
_VERDICT_ORDER = {"no": 0, "idk": 1, "yes": 2}  # contradicted claims first in the reasoning


def row_values(judgement: RowJudgement, *, coverage: bool = True) -> dict[str, float | int | None]:
    """The per-row values of one judged row, from the registry; all None for a row the judge failed on."""
    facts = row_facts(judgement)
    return {spec.name: spec.row_value(facts) for spec in METRICS.rows("judge", *(("coverage",) if coverage else ()))}


def _claim_line(number: int, claim) -> str:
    mark = f", suspect: source support {claim.lexical_support:.2f}" if claim.suspect else ""
    if claim.unstable:
        mark += f", unstable: {claim.agreement:.0%} of repetitions agree"
    return f"[{claim.verdict}{mark}] claim {number}: {claim.claim} -- {claim.reason}"


def reasoning(judgement: RowJudgement) -> str:
    """Every claim with its verdict and reason, contradicted first, then unverifiable, then supported; within each,
    the verdicts the model-free check finds suspect first, marked, so a reviewer starts with them."""
    if judgement.error is not None:
        return f"Not judged: {judgement.error}"
    # the order check only measures: when it failed the verdicts stand, and the row says why it has no order figure
    failed = judgement.order_check.failed if judgement.order_check is not None else None
    note = [f"Not in the order check (the verdicts stand): {failed}"] if failed else []
    if not judgement.claims:
        return "\n".join(["The summary makes no claim (defect: empty).", *note])
    ordered = sorted(
        enumerate(judgement.claims, start=1), key=lambda item: (_VERDICT_ORDER[item[1].verdict], not item[1].suspect, item[0])
    )
    counts = {v: sum(c.verdict == v for c in judgement.claims) for v in ("no", "idk", "yes")}
    head = f"{len(judgement.claims)} claims: {counts['no']} contradicted, {counts['idk']} unverifiable, {counts['yes']} supported."
    suspects = sum(bool(c.suspect) for c in judgement.claims)
    if suspects:
        head += f" {suspects} suspect verdict{'s' if suspects > 1 else ''} (the model-free check disagrees)."
    unstable = sum(bool(c.unstable) for c in judgement.claims)
    if unstable:
        head += f" {unstable} unstable verdict{'s' if unstable > 1 else ''} (asked again, the judge answered otherwise)."
    return "\n".join([head, *(_claim_line(number, claim) for number, claim in ordered), *note])


def coverage_reasoning(judgement: RowJudgement) -> str | None:
    if judgement.error is not None or judgement.key_points is None:
        return None
    missed = [p for p in judgement.key_points if not p.covered]
    head = f"{len(judgement.key_points) - len(missed)} of {len(judgement.key_points)} key points covered."
    lines = [f"[{'covered' if p.covered else 'missed'}] {p.key_point} -- {p.reason}" for p in sorted(judgement.key_points, key=lambda p: p.covered)]
    return "\n".join([head, *lines])


def grounding_reasoning(judgement: RowJudgement) -> str | None:
    return judgement.grounding.reasoning if judgement.grounding is not None else None


def explanation(judgement: RowJudgement, column: str | None) -> str | None:
    """The text a metric's ``reasoning`` column holds for this row (``reasoning``, ``coverage_reasoning`` or
    ``grounding_reasoning``)."""
    explain = {"reasoning": reasoning, "coverage_reasoning": coverage_reasoning, "grounding_reasoning": grounding_reasoning}
    return explain[column](judgement) if column else None


def row_families(*, judged: bool = True, coverage: bool = True, grounding: bool = True, suspect: bool | None = None,
                 stability: bool = False, order: bool = False) -> tuple[str, ...]:
    """The registry families a result's rows carry: the judge's (and coverage) when a judge was asked, grounding
    when the check is on, the suspect verdicts when the check second-guessed the judge (``suspect``; by default
    with grounding: an answer's claims are checked against its passages with no row grounding), the unstable
    claims when each verification was asked more than once (``stability``), the order check's counts when the
    judge checks the order (``order``)."""
    return (
        *(("judge",) if judged else ()),
        *(("coverage",) if judged and coverage else ()),
        *(("grounding",) if grounding else ()),
        *(("suspect",) if judged and (grounding if suspect is None else suspect) else ()),
        *(("stability",) if judged and stability else ()),
        *(("order",) if judged and order else ()),
    )


def key_points_key(judgement: RowJudgement) -> str | None:
    """The fingerprint of the key points a row's coverage was measured against (their texts, case and whitespace
    normalised, in any order); None when there are none. Two runs' rows compare on coverage only when it matches:
    a judge that listed other key points measured another thing."""
    if judgement.error is not None or not judgement.key_points:
        return None
    points = sorted(" ".join(normalised(p.key_point).lower().split()) for p in judgement.key_points)
    return hashlib.sha256("\n".join(points).encode("utf-8")).hexdigest()[:16]


def rows_table(
    judgements: Sequence[RowJudgement],
    *,
    coverage: bool = True,
    judged: bool = True,
    grounding: bool = True,
    suspect: bool | None = None,
    registry: MetricRegistry = METRICS,
    stability: bool = False,
    order: bool = False,
) -> pd.DataFrame:
    """One row per input, in input order: id, the source's fingerprint (``source_key``: rows of two runs pair
    only when it matches), with coverage the key points' fingerprint (``key_points_key``), every per-row value of the registry's families (``row_families``), the reasoning
    columns, error and judge usage."""
    specs = registry.rows(*row_families(judged=judged, coverage=coverage, grounding=grounding, suspect=suspect, stability=stability, order=order))
    reasons = [
        *(["reasoning"] if judged else []),
        *(["coverage_reasoning"] if judged and coverage else []),
        *(["grounding_reasoning"] if grounding else []),
    ]
    records = []
    for judgement in judgements:
        usage = judgement.usage
        facts = row_facts(judgement)
        record: dict[str, object] = {"id": judgement.id, "source_key": judgement.source_key}
        if judged and coverage:
            record["key_points_key"] = key_points_key(judgement)
        record.update((spec.name, spec.row_value(facts)) for spec in specs)
        record.update((column, explanation(judgement, column)) for column in reasons)
        record["error"] = str(judgement.error) if judgement.error is not None else ""
        record.update(
            judge_calls=usage.calls,
            judge_cache_hits=usage.cache_hits,
            judge_prompt_tokens=usage.prompt_tokens,
            judge_completion_tokens=usage.completion_tokens,
            judge_latency_s=usage.latency_s,
            judge_cost_usd=usage.cost_usd,
        )
        records.append(record)
    keys = ["id", "source_key", *(["key_points_key"] if judged and coverage else [])]
    columns = [*keys, *(s.name for s in specs), *reasons, "error", *USAGE_COLUMNS]
    table = pd.DataFrame.from_records(records, columns=columns)
    for spec in specs:  # integers stay integers, empty for failed rows
        table[spec.name] = table[spec.name].astype("Int64" if spec.integer else "float64")
    table["judge_cost_usd"] = table["judge_cost_usd"].astype("float64")
    return table


CLAIM_COLUMNS = ["id", "claim_index", "claim", "verdict", "reason", "duplicates_removed", "lexical_support", "suspect", "agreement"]


def claims_table(judgements: Sequence[RowJudgement]) -> pd.DataFrame:
    """One row per (summary, distinct claim): the verdict, its reason, how many repeats of the claim were removed,
    the model-free second opinion (``lexical_support``, ``suspect``; empty when the check is off), and the share of
    repeated verifications that gave the verdict (``agreement``; empty when each was asked once)."""
    records = [
        (j.id, number, c.claim, c.verdict, c.reason, c.duplicates, c.lexical_support, c.suspect, c.agreement)
        for j in judgements
        for number, c in enumerate(j.claims, start=1)
    ]
    table = pd.DataFrame.from_records(records, columns=CLAIM_COLUMNS)
    table["lexical_support"] = table["lexical_support"].astype("float64")
    table["suspect"] = table["suspect"].astype("boolean")
    table["agreement"] = table["agreement"].astype("float64")
    return table


def key_points_table(judgements: Sequence[RowJudgement]) -> pd.DataFrame:
    """One row per (summary, key point of its source): the source's key points and whether the summary covers each."""
    records = [
        {
            "id": j.id,
            "source_key": j.source_key,
            "key_point_index": number,
            "key_point": p.key_point,
            "covered": p.covered,
            "reason": p.reason,
        }
        for j in judgements
        for number, p in enumerate(j.key_points or [], start=1)
    ]
    return pd.DataFrame.from_records(
        records, columns=["id", "source_key", "key_point_index", "key_point", "covered", "reason"]
    )


def rate_statistics(rows: pd.DataFrame, registry: MetricRegistry = METRICS) -> dict[str, RatioStatistic]:
    """Each registered aggregate the rows can give, as a ratio of row sums over all rows (a failed row counts in
    no judge aggregate's denominator), in the registry's order."""
    statistics = {}
    for spec in registry.aggregates():
        needed = spec.columns or (("claim_count", "error") if spec.family == "judge" else ())
        if spec.has_interval and all(column in rows.columns for column in needed):
            statistics[spec.name] = spec.ratio_statistic(rows)
    return statistics


def aggregate_names() -> list[str]:
    """Every aggregate with an interval and n, in the registry's order."""
    return [spec.name for spec in METRICS.aggregates() if spec.has_interval]


def usage_metrics(usage: Usage, prices: Prices | None) -> dict[str, float]:
    metrics = {
        "judge/calls": float(usage.calls),
        "judge/prompt_tokens": float(usage.prompt_tokens),
        "judge/completion_tokens": float(usage.completion_tokens),
        "judge/cached_prompt_tokens": float(usage.cached_prompt_tokens),
        "judge/cache_hit_rate": usage.cache_hit_rate if usage.cache_hit_rate is not None else float("nan"),
    }
    if usage.batched_calls:  # batch mode: how many calls were answered (and priced) through a batch
        metrics["judge/batched_calls"] = float(usage.batched_calls)
    if usage.implausible_usage:  # replies that miscounted their tokens, priced at their worst case instead
        metrics["judge/implausible_usage"] = float(usage.implausible_usage)
    if prices is not None:
        metrics["judge/cost_usd"] = float(usage.cost_usd or 0.0)
    return metrics


def corpus_names() -> list[str]:
    """The registered aggregates computed over the whole corpus, not from row sums (corpus BLEU, chrF, TER)."""
    return [spec.name for spec in METRICS.aggregates() if spec.kind == "corpus"]


def result_metrics(
    histograms: dict[str, RatioHistogram],
    usage: Usage | None,
    *,
    prices: Prices | None = None,
    corpus: dict[str, float] | None = None,
    statistics: StatisticsOptions = StatisticsOptions(),
) -> tuple[dict[str, Estimate], dict[str, float]]:
    """The one way from counted rows to a result's numbers, for one process and for Spark alike: each registered
    aggregate's ``Estimate`` (from its histogram, in the registry's order), and every number under its MLflow name
    (the estimates, the judge's usage unless no judge was asked (``usage=None``), the corpus statistics)."""
    ordered = {name: histograms[name] for name in aggregate_names() if name in histograms}
    found = estimates(ordered, statistics)
    metrics: dict[str, float] = {}
    for estimate in found.values():
        metrics.update(estimate.as_metrics())
    if usage is not None:
        metrics.update(usage_metrics(usage, prices))
    metrics.update({name: value for name, value in (corpus or {}).items() if name in corpus_names()})
    return found, metrics


def aggregate_metrics(
    rows: pd.DataFrame,
    usage: Usage,
    *,
    prices: Prices | None = None,
    statistics: StatisticsOptions = StatisticsOptions(),
) -> dict[str, float]:
    """Every aggregate with its interval and n (``interval_names``), then the judge's usage."""
    histograms = {name: statistic.histogram() for name, statistic in rate_statistics(rows).items()}
    metrics = rate_metrics(histograms, statistics)
    metrics.update(usage_metrics(usage, prices))
    return metrics


def interval_names(name: str) -> tuple[str, str, str]:
    """The names of an aggregate's interval bounds and row count: ``alignment`` -> ``alignment_ci_low``,
    ``alignment_ci_high``, ``alignment_n``. Beside the value's own name in every MLflow store (the file store
    cannot hold a metric ``X`` and a metric ``X/ci_low``: ``X`` would have to be a file and a folder)."""
    return f"{name}_ci_low", f"{name}_ci_high", f"{name}_n"


@dataclass(frozen=True)
class Estimate:
    """One aggregate: its value, its interval (Clopper-Pearson for a proportion, BCa for a mean, the logit delta
    method for a ratio) and the rows it stands on."""

    name: str
    value: float
    ci_low: float
    ci_high: float
    n: int
    method: str  # "clopper-pearson" (proportions), "bca" (means), "logit delta" (ratios), "bootstrap" (percentile), "exact" (balanced accuracy, kappa)

    def as_metrics(self) -> dict[str, float]:
        """``{name: value, name_ci_low: .., name_ci_high: .., name_n: ..}``: the names every MLflow store accepts."""
        low, high, n = interval_names(self.name)
        return {self.name: self.value, low: self.ci_low, high: self.ci_high, n: float(self.n)}


def estimates(histograms: dict[str, RatioHistogram], statistics: StatisticsOptions = StatisticsOptions()) -> dict[str, Estimate]:
    """Each aggregate's ``Estimate`` from its histogram (the rows' (numerator, denominator) pairs counted), so that
    rows judged in parts (Spark partitions) give exactly the single-process numbers."""
    found = {}
    for name, histogram in histograms.items():
        spec = METRICS.aggregate(name)
        if spec is not None and spec.kind == "proportion":
            (low, high), method = proportion_interval(histogram, confidence=statistics.confidence), "clopper-pearson"
        elif spec is not None and spec.kind == "ratio":
            (low, high), method = ratio_interval(histogram, confidence=statistics.confidence), "logit delta"
        else:
            interval = bootstrap_interval(histogram, resamples=statistics.resamples, seed=statistics.seed, confidence=statistics.confidence)
            (low, high), method = interval, "bca"
        found[name] = Estimate(name, histogram.value, low, high, histogram.counted_rows, method)
    return found


def rate_metrics(histograms: dict[str, RatioHistogram], statistics: StatisticsOptions = StatisticsOptions()) -> dict[str, float]:
    """Every aggregate's value, interval and n under its MLflow names (``Estimate.as_metrics``)."""
    metrics: dict[str, float] = {}
    for estimate in estimates(histograms, statistics).values():
        metrics.update(estimate.as_metrics())
    return metrics
