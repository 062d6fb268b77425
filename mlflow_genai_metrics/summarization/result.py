"""``SummarizationResult`` (what ``judge_summaries`` returns) and ``compare_results`` (B against A, paired)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..judge import Usage
from ..signature import signature_differences
from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED, RatioStatistic, paired_bootstrap
from .records import RowJudgement
from .scoring import rate_statistics

__all__ = ["Comparison", "SignatureMismatchError", "SummarizationResult", "aligned_rows", "compare_results", "paired_table"]


@dataclass(frozen=True)
class SummarizationResult:
    """Per-row values, claims, key points, aggregates and the signature of one judged set of summaries.

    - ``rows``: one row per input, in input order: ``id``, every per-row value, ``reasoning`` (claims with
      verdicts and reasons, contradicted first), ``coverage_reasoning``, ``error`` ("" when judged), judge usage,
      and the traditional metrics when references were given;
    - ``claims``: one row per claim (``id``, ``claim_index``, ``claim``, ``verdict``, ``reason``);
    - ``key_points``: one row per (summary, key point of its source), with ``covered`` and the reason;
    - ``metrics``: every aggregate, with ``/ci_low`` and ``/ci_high``, and the ``judge/...`` usage;
    - ``signature``: what produced the numbers.
    """

    rows: pd.DataFrame
    claims: pd.DataFrame
    key_points: pd.DataFrame
    metrics: dict[str, float]
    signature: str
    judgements: list[RowJudgement] = field(repr=False)
    usage: Usage = field(repr=False)

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary: signature, row counts and every aggregate (NaN as None)."""
        return {
            "signature": self.signature,
            "rows": len(self.rows),
            "judged_rows": int((self.rows["error"] == "").sum()),
            "failed_rows": int((self.rows["error"] != "").sum()),
            "metrics": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.metrics.items()},
        }

    def __repr__(self) -> str:
        headline = ", ".join(
            f"{name}={self.metrics[name]:.3f}" for name in ("alignment", "richness", "coverage") if name in self.metrics
        )
        return f"SummarizationResult({len(self.rows)} rows, {headline}, signature={self.signature!r})"


class SignatureMismatchError(ValueError):
    """Two results were produced by different judges or prompts; their numbers are not comparable."""


@dataclass(frozen=True)
class Comparison:
    """B minus A for every aggregate, over the row ids both share.

    ``table`` columns: ``metric``, ``a``, ``b``, ``difference`` (b - a), ``ci_low``, ``ci_high`` (the paired
    bootstrap interval of the difference), ``p_value`` (two-sided), ``significant`` (p < 1 - confidence).
    """

    table: pd.DataFrame
    shared_rows: int
    signature_a: str
    signature_b: str
    signature_differences: list[str]

    @property
    def signatures_match(self) -> bool:
        return not self.signature_differences

    @property
    def label(self) -> str:
        if self.signatures_match:
            return f"paired comparison over {self.shared_rows} shared rows"
        return (
            f"NOT COMPARABLE AS IS: signatures differ ({'; '.join(self.signature_differences)}); compared on request "
            f"over {self.shared_rows} shared rows"
        )

    def difference(self, metric: str) -> pd.Series:
        return self.table.set_index("metric").loc[metric]


def aligned_rows(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of both tables whose ids both have, in A's order."""
    ids_b = set(b["id"])
    shared = [row_id for row_id in a["id"] if row_id in ids_b]
    if len(shared) == 0:
        raise ValueError("the two results share no row id: nothing to compare")
    return (
        a.set_index("id").loc[shared].reset_index(),
        b.set_index("id").loc[shared].reset_index(),
    )


def paired_table(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """B minus A for every aggregate both row tables support; row i of each table is the same id."""
    stats_a, stats_b = rate_statistics(rows_a), rate_statistics(rows_b)
    for column in ("rouge1", "rouge2", "rougeL", "rougeLsum", "summary_words"):
        if column in rows_a and column in rows_b:  # reference metrics whose aggregate is the mean of rows
            stats_a[column] = RatioStatistic.mean_of(rows_a[column].to_numpy(dtype=float, na_value=np.nan))
            stats_b[column] = RatioStatistic.mean_of(rows_b[column].to_numpy(dtype=float, na_value=np.nan))
    records = []
    for name in stats_a:
        if name not in stats_b:
            continue
        paired = paired_bootstrap(stats_a[name], stats_b[name], resamples=resamples, seed=seed, confidence=confidence)
        significant = bool(np.isfinite(paired.p_value) and paired.p_value < 1 - confidence)
        records.append({"metric": name, **asdict(paired), "significant": significant})
    return pd.DataFrame.from_records(records)


def compare_results(
    a: SummarizationResult,
    b: SummarizationResult,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    allow_signature_mismatch: bool = False,
) -> Comparison:
    """Compare B with A by the paired bootstrap over the ids both share.

    Refuses (``SignatureMismatchError``) when the signatures differ, unless ``allow_signature_mismatch=True``;
    then the comparison is made and its ``label`` says the signatures differ.
    """
    differences = signature_differences(a.signature, b.signature)
    if differences and not allow_signature_mismatch:
        raise SignatureMismatchError(
            "these results come from different judge settings or prompts and are not comparable: "
            + "; ".join(differences)
            + ". Rejudge both with the same judge, or pass allow_signature_mismatch=True to compare anyway."
        )
    rows_a, rows_b = aligned_rows(a.rows, b.rows)
    table = paired_table(rows_a, rows_b, resamples=resamples, seed=seed, confidence=confidence)
    return Comparison(
        table=table,
        shared_rows=len(rows_a),
        signature_a=a.signature,
        signature_b=b.signature,
        signature_differences=differences,
    )

