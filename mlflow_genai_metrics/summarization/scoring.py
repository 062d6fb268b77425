"""Judgement records -> per-row values and aggregates, exactly as ``docs/metrics.md`` defines them.

Rows the judge failed on get no value (empty, never 0): they are left out of every denominator and counted in
``judge_error_rate``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..judge import Prices, Usage
from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED, RatioHistogram, RatioStatistic, bootstrap_interval, wilson_interval
from .records import RowJudgement

__all__ = [
    "AGGREGATE_RATES",
    "PROPORTIONS",
    "interval_names",
    "PER_ROW_COLUMNS",
    "aggregate_metrics",
    "claims_table",
    "key_points_table",
    "rate_metrics",
    "rate_statistics",
    "reasoning",
    "row_values",
    "rows_table",
]

COUNT_COLUMNS = ["claim_count", "supported_claims", "contradicted_claims", "unverifiable_claims"]
FLAG_COLUMNS = ["aligned", "strictly_aligned", "defect_contradiction", "defect_unverifiable", "defect_empty"]
PER_ROW_COLUMNS = COUNT_COLUMNS + ["support_rate"] + FLAG_COLUMNS[:2] + ["coverage"] + FLAG_COLUMNS[2:]
USAGE_COLUMNS = [
    "judge_calls",
    "judge_cache_hits",
    "judge_prompt_tokens",
    "judge_completion_tokens",
    "judge_latency_s",
    "judge_cost_usd",
]
# The aggregates that get an interval and n, in report order.
AGGREGATE_RATES = [
    "alignment",
    "defect_rate/contradiction",
    "defect_rate/unverifiable",
    "defect_rate/empty",
    "strict_alignment",
    "claim_support_rate",
    "richness",
    "coverage",
    "judge_error_rate",
]
# Shares of rows: Wilson score interval. The others (means and ratios) get the bootstrap.
PROPORTIONS = frozenset(
    {"alignment", "defect_rate/contradiction", "defect_rate/unverifiable", "defect_rate/empty", "strict_alignment", "judge_error_rate"}
)
_VERDICT_ORDER = {"no": 0, "idk": 1, "yes": 2}  # contradicted claims first in the reasoning


def row_values(judgement: RowJudgement) -> dict[str, float | int | None]:
    """The per-row values of one judged row; all None for a row the judge failed on."""
    if judgement.error is not None:
        return dict.fromkeys(PER_ROW_COLUMNS)
    verdicts = [c.verdict for c in judgement.claims]
    claim_count = len(verdicts)
    supported, contradicted, unverifiable = (verdicts.count(v) for v in ("yes", "no", "idk"))
    coverage = None
    if judgement.key_points:
        coverage = sum(p.covered for p in judgement.key_points) / len(judgement.key_points)
    return {
        "claim_count": claim_count,
        "supported_claims": supported,
        "contradicted_claims": contradicted,
        "unverifiable_claims": unverifiable,
        "support_rate": supported / claim_count if claim_count else None,
        "aligned": int(claim_count > 0 and contradicted == 0),
        "strictly_aligned": int(claim_count > 0 and supported == claim_count),
        "coverage": coverage,
        "defect_contradiction": int(contradicted > 0),
        "defect_unverifiable": int(unverifiable > 0),
        "defect_empty": int(claim_count == 0),
    }


def reasoning(judgement: RowJudgement) -> str:
    """Every claim with its verdict and reason, contradicted first, then unverifiable, then supported."""
    if judgement.error is not None:
        return f"Not judged: {judgement.error}"
    if not judgement.claims:
        return "The summary makes no claim (defect: empty)."
    ordered = sorted(enumerate(judgement.claims, start=1), key=lambda item: (_VERDICT_ORDER[item[1].verdict], item[0]))
    counts = {v: sum(c.verdict == v for c in judgement.claims) for v in ("no", "idk", "yes")}
    head = f"{len(judgement.claims)} claims: {counts['no']} contradicted, {counts['idk']} unverifiable, {counts['yes']} supported."
    lines = [f"[{claim.verdict}] claim {number}: {claim.claim} -- {claim.reason}" for number, claim in ordered]
    return "\n".join([head, *lines])


def coverage_reasoning(judgement: RowJudgement) -> str | None:
    if judgement.error is not None or judgement.key_points is None:
        return None
    missed = [p for p in judgement.key_points if not p.covered]
    head = f"{len(judgement.key_points) - len(missed)} of {len(judgement.key_points)} key points covered."
    lines = [f"[{'covered' if p.covered else 'missed'}] {p.key_point} -- {p.reason}" for p in sorted(judgement.key_points, key=lambda p: p.covered)]
    return "\n".join([head, *lines])


def rows_table(judgements: Sequence[RowJudgement], *, coverage: bool = True) -> pd.DataFrame:
    """One row per input, in input order: id, the source's fingerprint (``source_key``: rows of two runs pair
    only when it matches), every per-row value, reasoning, error and judge usage."""
    records = []
    for judgement in judgements:
        usage = judgement.usage
        record: dict[str, object] = {"id": judgement.id, "source_key": judgement.source_key, **row_values(judgement)}
        record["reasoning"] = reasoning(judgement)
        if coverage:
            record["coverage_reasoning"] = coverage_reasoning(judgement)
        record["error"] = judgement.error or ""
        record.update(
            judge_calls=usage.calls,
            judge_cache_hits=usage.cache_hits,
            judge_prompt_tokens=usage.prompt_tokens,
            judge_completion_tokens=usage.completion_tokens,
            judge_latency_s=usage.latency_s,
            judge_cost_usd=usage.cost_usd,
        )
        records.append(record)
    columns = ["id", "source_key", *PER_ROW_COLUMNS, "reasoning", *(["coverage_reasoning"] if coverage else []), "error", *USAGE_COLUMNS]
    table = pd.DataFrame.from_records(records, columns=columns)
    for column in COUNT_COLUMNS + FLAG_COLUMNS:
        table[column] = table[column].astype("Int64")  # integers, empty for failed rows
    for column in ("support_rate", "coverage", "judge_cost_usd"):
        table[column] = table[column].astype("float64")
    if not coverage:
        table = table.drop(columns=["coverage"])
    return table


def claims_table(judgements: Sequence[RowJudgement]) -> pd.DataFrame:
    """One row per (summary, distinct claim): the verdict, its reason and how many repeats of the claim were removed."""
    columns = ["id", "claim_index", "claim", "verdict", "reason", "duplicates_removed"]
    records = [
        (j.id, number, c.claim, c.verdict, c.reason, c.duplicates)
        for j in judgements
        for number, c in enumerate(j.claims, start=1)
    ]
    return pd.DataFrame.from_records(records, columns=columns)


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


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].to_numpy(dtype=float, na_value=np.nan)


def rate_statistics(rows: pd.DataFrame) -> dict[str, RatioStatistic]:
    """Each aggregate as a ratio of row sums over all rows (failed rows: numerator and denominator 0)."""
    failed = (rows["error"].fillna("") != "").to_numpy(dtype=float)
    scored = 1.0 - failed
    claim_count = np.nan_to_num(_column(rows, "claim_count"))
    statistics = {
        "alignment": RatioStatistic.mean_of(_column(rows, "aligned"), scored),
        "defect_rate/contradiction": RatioStatistic.mean_of(_column(rows, "defect_contradiction"), scored),
        "defect_rate/unverifiable": RatioStatistic.mean_of(_column(rows, "defect_unverifiable"), scored),
        "defect_rate/empty": RatioStatistic.mean_of(_column(rows, "defect_empty"), scored),
        "strict_alignment": RatioStatistic.mean_of(_column(rows, "strictly_aligned"), scored),
        "claim_support_rate": RatioStatistic(np.nan_to_num(_column(rows, "supported_claims")), claim_count),
        "richness": RatioStatistic.mean_of(_column(rows, "claim_count"), scored),
        "judge_error_rate": RatioStatistic.mean_of(failed),
    }
    if "coverage" in rows.columns:
        statistics["coverage"] = RatioStatistic.mean_of(_column(rows, "coverage"), scored)
    return {name: statistics[name] for name in AGGREGATE_RATES if name in statistics}


def usage_metrics(usage: Usage, prices: Prices | None) -> dict[str, float]:
    metrics = {
        "judge/calls": float(usage.calls),
        "judge/prompt_tokens": float(usage.prompt_tokens),
        "judge/completion_tokens": float(usage.completion_tokens),
        "judge/cache_hit_rate": usage.cache_hit_rate if usage.cache_hit_rate is not None else float("nan"),
    }
    if prices is not None:
        metrics["judge/cost_usd"] = float(usage.cost_usd or 0.0)
    return metrics


def aggregate_metrics(
    rows: pd.DataFrame,
    usage: Usage,
    *,
    prices: Prices | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> dict[str, float]:
    """Every aggregate with its interval and n (``interval_names``), then the judge's usage."""
    histograms = {name: statistic.histogram() for name, statistic in rate_statistics(rows).items()}
    metrics = rate_metrics(histograms, resamples=resamples, seed=seed, confidence=confidence)
    metrics.update(usage_metrics(usage, prices))
    return metrics


def interval_names(name: str) -> tuple[str, str, str]:
    """The names of an aggregate's interval bounds and row count: ``alignment`` -> ``alignment_ci_low``,
    ``alignment_ci_high``, ``alignment_n``. Beside the value's own name in every MLflow store (the file store
    cannot hold a metric ``X`` and a metric ``X/ci_low``: ``X`` would have to be a file and a folder)."""
    return f"{name}_ci_low", f"{name}_ci_high", f"{name}_n"


def rate_metrics(
    histograms: dict[str, RatioHistogram],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> dict[str, float]:
    """Each aggregate, its interval (Wilson for proportions, bootstrap for means and ratios) and the rows it stands
    on, from its histogram (the rows' (numerator, denominator) pairs counted), so that rows judged in parts (Spark
    partitions) give exactly the single-process numbers."""
    metrics: dict[str, float] = {}
    for name, histogram in histograms.items():
        low_name, high_name, n_name = interval_names(name)
        metrics[name] = histogram.value
        if name in PROPORTIONS:
            low, high = wilson_interval(histogram, confidence=confidence)
        else:
            low, high = bootstrap_interval(histogram, resamples=resamples, seed=seed, confidence=confidence)
        metrics[low_name], metrics[high_name] = low, high
        metrics[n_name] = float(histogram.counted_rows)
    return metrics
