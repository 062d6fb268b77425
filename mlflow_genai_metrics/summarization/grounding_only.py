"""``grounding_metrics``: the grounding check (``grounding`` package) on rows, alone (no judge), with aggregates and
intervals; the same numbers as ``judge_summaries(..., judge=None)`` gives, in a smaller result.

    from mlflow_genai_metrics import grounding_metrics
    result = grounding_metrics(articles, summaries, ids=ids)
    result.rows[["id", "grounding", "grounded", "grounding_reasoning"]]
    result.metrics["grounding"], result.metrics["grounded_rate_ci_low"]

Aggregates, named as every other aggregate (``summarization.scoring.interval_names``): ``grounding`` (the mean
over rows, bootstrap interval) and ``grounded_rate`` (the share of rows grounded, Clopper-Pearson interval), each with
``_ci_low``, ``_ci_high`` and ``_n``. A summary with no sentence has no grounding (empty, never 0) and is left out
of both. Results are cached on disk by (model tag, source, summary), so a rerun recomputes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..grounding.cache import GroundingCache, cached_groundings
from ..grounding.model import model_tag
from ..stats import RatioHistogram, RatioStatistic, StatisticsOptions
from .judging import prepare_rows
from .metrics import METRICS
from .options import resolve
from .scoring import rate_metrics

GROUNDING_COLUMNS = ["grounding", "grounded", "grounding_reasoning"]
GROUNDING_AGGREGATES = ["grounding", "grounded_rate"]


@dataclass(frozen=True)
class GroundingResult:
    """``rows``: id, source_key, grounding, grounded, grounding_reasoning, in input order; ``metrics``: the
    aggregates; ``model_tag``: the model file's tag (a signature part); ``computed_rows`` and ``cache_hits``:
    how many rows were scored now and how many were read from the cache."""

    rows: pd.DataFrame
    metrics: dict[str, float]
    model_tag: str
    computed_rows: int
    cache_hits: int


def grounding_statistics(rows: pd.DataFrame) -> dict[str, RatioStatistic]:
    """Each aggregate of the registry's grounding family as a ratio of row sums (rows without a grounding count in
    neither part)."""
    return {spec.name: spec.ratio_statistic(rows) for spec in METRICS.aggregates("grounding")}


def grounding_aggregates(histograms: dict[str, RatioHistogram], statistics: StatisticsOptions = StatisticsOptions()) -> dict[str, float]:
    """``grounding`` with its bootstrap interval, ``grounded_rate`` with its Clopper-Pearson interval (the registry says which
    is a proportion), each with n, from the histograms (so that rows scored in parts give the single-process numbers)."""
    return rate_metrics(histograms, statistics)


def grounding_metrics(
    sources: Sequence[str],
    summaries: Sequence[str],
    *,
    ids: Sequence[Any] | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    statistics: StatisticsOptions | None = None,
    **keywords: Any,
) -> GroundingResult:
    """The grounding check on every (source, summary) row, with no judge call.

    Inputs are validated as ``judge_summaries`` validates them (every bad row named, before anything is scored).
    ``cache=False`` scores every row afresh and stores nothing; ``cache_dir`` defaults to the judge cache's folder
    (``$MGM_CACHE_DIR`` or the user cache dir). ``statistics`` (a ``stats.StatisticsOptions``, or its fields as
    keywords) sets the intervals.
    """
    statistics = resolve("grounding_metrics", keywords, statistics=statistics, judging=False).statistics
    inputs = prepare_rows(sources, summaries, ids)
    store = GroundingCache(cache_dir) if cache else None
    try:
        results, computed, hits = cached_groundings([r.source for r in inputs], [r.summary for r in inputs], store)
    finally:
        if store is not None:
            store.close()
    rows = pd.DataFrame(
        {
            "id": [r.id for r in inputs],
            "source_key": [r.source_key for r in inputs],
            "grounding": pd.array([r.grounding for r in results], dtype="float64"),
            "grounded": pd.array([r.grounded for r in results], dtype="Int64"),
            "grounding_reasoning": [r.reasoning for r in results],
        }
    )
    histograms = {name: statistic.histogram() for name, statistic in grounding_statistics(rows).items()}
    metrics = grounding_aggregates(histograms, statistics)
    return GroundingResult(rows=rows, metrics=metrics, model_tag=model_tag(), computed_rows=computed, cache_hits=hits)
