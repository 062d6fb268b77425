"""``SummarizationResult``: what ``judge_summaries`` returns (B against A, paired, is in ``comparison``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from ..judge import Usage, same_model
from ..signature import parse_signature
from .ids import canonical_id
from .records import RowJudgement
from .scoring import Estimate
from .warnings import RunWarning, run_warnings


class RunResult(Protocol):
    """What a logger needs of a result, whether one process (``SummarizationResult``, ``rag.AnswersResult``) or Spark
    (``spark.SparkSummarizationResult``) made it."""

    TABLE_NAMES: tuple[str, ...]  # the tables it writes: rows and claims, then key points (summaries) or facts (answers)
    metrics: dict[str, float]
    signature: str

    @property
    def warnings(self) -> list[RunWarning]: ...

    def write_tables(self, folder: Path) -> None: ...

    def verdict_counts(self) -> pd.Series: ...

    def category_rows(self) -> pd.DataFrame | None: ...

    def report(self) -> dict[str, Any]: ...


def run_report(
    signature: str, rows: int, failed: int, reported_models: dict[str, int], metrics: dict[str, float], warnings: list[RunWarning] = (),
) -> dict[str, Any]:
    """The run report both result types write (``mgm/report.json``): signature, row counts, the models that
    answered, the run's warnings (kind -> sentence) and every number (NaN as None)."""
    return {
        "signature": signature,
        "rows": rows,
        "judged_rows": rows - failed,
        "failed_rows": failed,
        "judge_reported_models": dict(reported_models),
        "judge_model_mismatch": model_mismatch(signature, reported_models),
        "warnings": {w.kind: w.message for w in warnings},
        "metrics": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()},
    }


def model_mismatch(signature: str, reported_models: dict[str, int]) -> bool:
    """Did a reply name another model than the judge the signature names (a dated snapshot of it is the same)?"""
    requested = parse_signature(signature).get("judge", "")
    return any(not same_model(requested, reported) for reported in reported_models)


class JudgedTables:
    """What a result of judged rows does with its tables, whichever the task: a summary's (``SummarizationResult``)
    or an answer's (``rag.AnswersResult``). Needs ``rows``, ``claims``, ``metrics``, ``usage``, ``signature``,
    ``reported_models`` and the names of the tables it writes (``TABLE_NAMES``)."""

    TABLE_NAMES: tuple[str, ...] = ()
    rows: pd.DataFrame
    claims: pd.DataFrame
    metrics: dict[str, float]
    signature: str
    usage: Usage
    reported_models: dict[str, int]

    @property
    def judge_model_mismatch(self) -> bool:
        """Did any reply name another model than the one the signature names (the endpoint routed it elsewhere)?"""
        return model_mismatch(self.signature, self.reported_models)

    @property
    def warnings(self) -> list[RunWarning]:
        """The run's warnings, from its per-row claim counts and its usage: e.g. ``low_verification`` when the judge
        answered idk for 80% of the claims or more, or supported none, ``implausible_usage`` when replies reported more
        tokens than their requests could produce (``summarization.warnings``); empty when none applies."""
        return run_warnings(self.rows, self.usage)

    def write_tables(self, folder: Path) -> None:
        """Each of ``TABLE_NAMES`` as Parquet (``rows.parquet``, ...; typed: nullable integers stay integers), the
        copies a logger reads and logs. Ids are stored in their canonical text form, the form every comparison pairs
        them in, so ``1`` in one run pairs with ``1`` in another."""
        for name in self.TABLE_NAMES:
            columnar = getattr(self, name).copy()
            if "id" in columnar:
                columnar["id"] = columnar["id"].map(canonical_id)
            columnar.to_parquet(folder / f"{name}.parquet", index=False)

    def verdict_counts(self) -> pd.Series:
        """How many claims got each verdict."""
        return self.claims["verdict"].value_counts()

    def category_rows(self) -> pd.DataFrame | None:
        """The per-row table when its rows carry a category (for the per-category plot), else None."""
        return self.rows if "category" in self.rows and self.rows["category"].notna().any() else None

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary: signature, row counts and every aggregate (NaN as None)."""
        failed = int((self.rows["error"] != "").sum())
        return run_report(self.signature, len(self.rows), failed, self.reported_models, self.metrics, self.warnings)


@dataclass(frozen=True)
class SummarizationResult(JudgedTables):
    """Per-row values, claims, key points, aggregates and the signature of one judged set of summaries.

    - ``rows``: one row per input, in input order: ``id``, every per-row value, ``reasoning`` (claims with
      verdicts and reasons, contradicted first), ``coverage_reasoning``, ``error`` ("" when judged), judge usage,
      and the traditional metrics when references were given;
    - ``claims``: one row per claim (``id``, ``claim_index``, ``claim``, ``verdict``, ``reason``, ``duplicates_removed``);
    - ``key_points``: one row per (summary, key point of its source), with ``covered`` and the reason;
    - ``metrics``: every aggregate, with ``_ci_low``, ``_ci_high`` and ``_n`` (``scoring.interval_names``), and the ``judge/...`` usage;
    - ``signature``: what produced the numbers;
    - ``warnings``: what the user must know before reading the numbers (``summarization.warnings``), e.g. a judge
      that verified almost nothing.
    """

    TABLE_NAMES = ("rows", "claims", "key_points")
    rows: pd.DataFrame
    claims: pd.DataFrame
    key_points: pd.DataFrame
    metrics: dict[str, float]
    signature: str
    judgements: list[RowJudgement] = field(repr=False)
    usage: Usage = field(repr=False)
    reported_models: dict[str, int] = field(default_factory=dict, repr=False)  # model id -> replies naming it
    estimates: dict[str, Estimate] = field(default_factory=dict, repr=False)  # each aggregate, typed

    def __repr__(self) -> str:
        headline = ", ".join(
            f"{name}={self.metrics[name]:.3f}" for name in ("alignment", "richness", "coverage") if name in self.metrics
        )
        return f"SummarizationResult({len(self.rows)} rows, {headline}, signature={self.signature!r})"
