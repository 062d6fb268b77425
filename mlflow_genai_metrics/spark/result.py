"""Spark results: the judged rows as Spark DataFrames, and the aggregates Spark counts from them. ``SparkJudged`` is
what every task's result does with them (histograms, usage, metrics, warnings, tables, report); the summaries'
(``SparkSummarizationResult``) adds key points, the reference metrics and its signature."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..grounding.model import model_tag
from ..judge import Judge, Usage
from ..reference import corpus_scores, statistics_column, traditional_signatures
from ..signature import summarization_signature
from ..stats import RatioHistogram, StatisticsOptions
from ..summarization.api import response_mode_of
from ..summarization.metrics import MetricRegistry
from ..summarization.options import JudgingOptions
from ..summarization.result import run_report
from ..summarization.scoring import Estimate, rate_statistics, result_metrics
from ..summarization.warnings import RunWarning, implausible_usage_warning, verification_warning
from .plan import HIDDEN_USAGE_SUMS, INTERNAL_COLUMNS, USAGE_COUNTS, corpus_names

CLAIM_FIELDS = T.StructType([
    T.StructField("claim_index", T.IntegerType()),
    T.StructField("claim", T.StringType()),
    T.StructField("verdict", T.StringType()),
    T.StructField("reason", T.StringType()),
    T.StructField("duplicates_removed", T.IntegerType()),
    T.StructField("lexical_support", T.DoubleType()),
    T.StructField("suspect", T.BooleanType()),
    T.StructField("agreement", T.DoubleType()),
])
KEY_POINT_FIELDS = T.StructType([
    T.StructField("key_point_index", T.IntegerType()),
    T.StructField("key_point", T.StringType()),
    T.StructField("covered", T.BooleanType()),
    T.StructField("reason", T.StringType()),
])

def _count_histograms(batches: Iterator[pd.DataFrame], registry: MetricRegistry) -> Iterator[pd.DataFrame]:
    """A partition's rows -> one record per (rate, numerator, denominator): how many rows have that pair."""
    for batch in batches:
        records = []
        for name, statistic in rate_statistics(batch, registry).items():
            histogram = statistic.histogram()
            records += zip([name] * len(histogram.counts), histogram.numerators, histogram.denominators, histogram.counts)
        yield pd.DataFrame.from_records(records, columns=["name", "numerator", "denominator", "rows"])


@dataclass(kw_only=True)
class SparkJudged:
    """What a Spark result does with its persisted judged rows, whichever the task: ``rows`` (the per-row columns, as
    one process gives them) and ``claims`` (one row per claim, from the rows' ``_claims`` JSON, typed by
    ``CLAIM_FIELDS``) are Spark DataFrames over them; ``metrics``, ``usage`` and ``warnings`` are computed by Spark
    on first use, only counts and sums reaching the driver, and are the numbers one process gives. A task's result
    adds its ``signature`` (and its own tables)."""

    TABLE_NAMES: ClassVar[tuple[str, ...]] = ("rows", "claims")
    INTERNAL: ClassVar[tuple[str, ...]] = tuple(INTERNAL_COLUMNS)  # the judged rows' columns that are not ``rows``'
    CLAIM_FIELDS: ClassVar[T.StructType] = CLAIM_FIELDS
    judged: DataFrame = field(repr=False)
    judge: Judge = field(repr=False)
    registry: MetricRegistry = field(repr=False)
    prices: Any = field(default=None, repr=False)
    statistics: StatisticsOptions = StatisticsOptions()

    @property
    def rows(self) -> DataFrame:
        return self.judged.drop(*[c for c in self.INTERNAL if c in self.judged.columns])

    @property
    def claims(self) -> DataFrame:
        return self._nested("_claims", self.CLAIM_FIELDS)

    def _nested(self, column: str, fields: T.StructType, *keys: str) -> DataFrame:
        """One row per item of the rows' JSON list ``column``: ``id`` (and ``keys``), then the item's ``fields``."""
        exploded = self.judged.select("id", *keys, F.explode(F.from_json(column, T.ArrayType(fields))).alias("item"))
        return exploded.select("id", *keys, *(f"item.{name}" for name in fields.fieldNames()))

    @cached_property
    def histograms(self) -> dict[str, RatioHistogram]:
        """Each rate's (numerator, denominator) pairs with their row counts, summed over partitions by Spark."""
        schema = "name string, numerator double, denominator double, rows long"
        counted = (
            self.judged.mapInPandas(functools.partial(_count_histograms, registry=self.registry), schema)
            .groupBy("name", "numerator", "denominator")
            .agg(F.sum("rows").alias("rows"))
            .collect()
        )
        parts: dict[str, list[tuple[float, float, int]]] = {}
        for record in counted:
            parts.setdefault(record["name"], []).append((record["numerator"], record["denominator"], record["rows"]))
        return {name: RatioHistogram.of(*map(np.array, zip(*values))) for name, values in parts.items()}

    @cached_property
    def usage(self) -> Usage:
        names = ["judge_requests", "judge_calls", "judge_cache_hits", "judge_prompt_tokens", "judge_completion_tokens", "judge_latency_s", "judge_cost_usd"]
        names += [f"_usage_{name}" for name in HIDDEN_USAGE_SUMS]
        totals = self.judged.agg(*[F.sum(n).alias(n) for n in names]).collect()[0]
        cost = totals["judge_cost_usd"]
        counts: dict[str, dict[str, int]] = {name: {} for name in USAGE_COUNTS}
        for record in self.judged.groupBy("_usage_counts").count().collect():  # a few distinct values
            for name, values in json.loads(record["_usage_counts"] or "{}").items():
                for key, replies in values.items():
                    counts[name][key] = counts[name].get(key, 0) + replies * record["count"]
        return Usage(
            requests=int(totals["judge_requests"] or 0), calls=int(totals["judge_calls"] or 0),
            cache_hits=int(totals["judge_cache_hits"] or 0), prompt_tokens=int(totals["judge_prompt_tokens"] or 0),
            completion_tokens=int(totals["judge_completion_tokens"] or 0), latency_s=float(totals["judge_latency_s"] or 0.0),
            cost_usd=None if cost is None or self.prices is None else float(cost), **counts,
            **{name: int(totals[f"_usage_{name}"] or 0) for name in HIDDEN_USAGE_SUMS},
        )

    @property
    def metrics(self) -> dict[str, float]:
        """Every aggregate with its interval and n (``scoring.interval_names``), the ``judge/...`` usage and, with
        references, the corpus statistics; only counts and sums reach the driver."""
        return self._numbers[1]

    @property
    def estimates(self) -> dict[str, Estimate]:
        return self._numbers[0]

    @cached_property
    def _numbers(self) -> tuple[dict[str, Estimate], dict[str, float]]:
        # The same function as one process: the histograms Spark counted, the usage, the corpus statistics.
        return result_metrics(
            self.histograms, self.usage, prices=self.prices, corpus=self._corpus_metrics(), statistics=self.statistics,
        )

    def _corpus_metrics(self) -> dict[str, float] | None:
        return None  # the corpus statistics of the reference metrics, for a task that has them

    @cached_property
    def warnings(self) -> list[RunWarning]:
        """As ``SummarizationResult.warnings``, from three sums Spark computes over the judged rows (``claim_count``,
        ``supported_claims``, ``unverifiable_claims``; a failed row's are empty and count in none) and the usage."""
        names = ("claim_count", "supported_claims", "unverifiable_claims")
        totals = self.judged.agg(*[F.sum(n).alias(n) for n in names]).collect()[0]
        found = (verification_warning(*(int(totals[n] or 0) for n in names)), implausible_usage_warning(self.usage.implausible_usage))
        return [warning for warning in found if warning is not None]

    def write_tables(self, folder: Path) -> None:
        """As ``SummarizationResult.write_tables``, written by Spark as Parquet folders (``rows.parquet/part-*``;
        ``pandas.read_parquet`` and ``tracking.load_run`` read them whole), never collected on the driver (the
        logger shows the first ``SPARK_TABLE_ROWS`` rows of each as an MLflow table)."""
        for name in self.TABLE_NAMES:
            target = folder / f"{name}.parquet"
            table = getattr(self, name)
            table.withColumn("id", table["id"].cast("string")).write.parquet(str(target))
            for extra in [*target.glob(".*"), *target.glob("_*")]:  # Spark's checksums and _SUCCESS marker
                extra.unlink()

    def verdict_counts(self) -> pd.Series:
        counted = {r["verdict"]: r["count"] for r in self.claims.groupBy("verdict").count().collect()}
        return pd.Series(counted, dtype="int64")

    def category_rows(self) -> pd.DataFrame | None:
        return None  # the per-category plot would bring every row to the driver

    def report(self) -> dict[str, Any]:
        """As ``SummarizationResult.report``: signature, row counts and every aggregate (NaN as None)."""
        errors = self.histograms["judge_error_rate"]
        failed = int(errors.counts @ errors.numerators)
        return run_report(self.signature, errors.rows, failed, self.usage.reported_models, self.metrics, self.warnings)

    def unpersist(self) -> None:
        self.judged.unpersist()


@dataclass(kw_only=True)
class SparkSummarizationResult(SparkJudged):
    """What ``judge_summaries_spark`` returns. ``rows`` (one row per input, the per-row columns of
    ``docs/metrics.md``, as ``SummarizationResult.rows``), ``claims`` (one row per claim) and ``key_points`` (one row
    per summary and key point) are Spark DataFrames over the persisted judged rows; ``metrics`` are computed by
    Spark on first use and are the same numbers, with the same names, as ``judge_summaries`` gives."""

    TABLE_NAMES: ClassVar[tuple[str, ...]] = ("rows", "claims", "key_points")
    options: JudgingOptions  # as judged: max_source_tokens settled (JudgingOptions.for_judge)
    references: bool

    @cached_property
    def signature(self) -> str:
        """As one process signs: the response mode the workers' replies came in is known once they are judged."""
        options = self.options
        return summarization_signature(
            self.judge, coverage=options.coverage, max_source_tokens=options.max_source_tokens,
            response_mode=response_mode_of(self.usage), statistics=self.statistics,
            reference=traditional_signatures(options.ter) if self.references else None,
            grounding=model_tag() if options.grounding else None, method=options.method,
        )

    @property
    def key_points(self) -> DataFrame:
        return self._nested("_key_points", KEY_POINT_FIELDS, "source_key")

    def _corpus_metrics(self) -> dict[str, float] | None:
        if not self.references:
            return None
        summed = {}
        for name in corpus_names(self.options.ter):
            column = statistics_column(name)
            by_position = self.judged.select(F.posexplode(column)).groupBy("pos").agg(F.sum("col").alias("total")).collect()
            summed[name] = [total for _, total in sorted((r["pos"], r["total"]) for r in by_position)]
        return corpus_scores(summed)
