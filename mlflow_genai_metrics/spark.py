"""The summarization judgement over a Spark DataFrame, for when one machine is not enough.

>>> result = judge_summaries_spark(df, judge=Judge("gpt-4o-mini", max_concurrency=64), id_col="id")
>>> result.rows.filter("aligned = 0").select("id", "reasoning").show()      # Spark DataFrames
>>> result.metrics["alignment"], result.metrics["alignment_ci_low"]         # computed by Spark, not collected
>>> result.warnings                      # e.g. the judge verified almost nothing (three sums reach the driver)
>>> log_spark_result(result)                                                # from mlflow_genai_metrics.tracking

How it runs (``docs/scale.md``):

- rows are hash-partitioned by their source text, and sorted by it within each partition, so every summary of
  one source is judged in the same Python worker, in the same batch: its key points are extracted once, as in a
  single process;
- each partition runs ``mapInPandas`` over the same code a single process runs (``prepare_rows``,
  ``judge_rows``, ``rows_table``), with its own copy of the ``Judge`` (settings travel, connections do not);
  the judge's ``max_concurrency`` and ``max_requests_per_s`` are the totals for the whole job, split evenly over
  the partitions that run at once (``min(partitions, spark.default.parallelism)``), and its budget (``max_calls``,
  ``max_cost_usd``) is split over the partitions in proportion to their rows (``spark_budget``);
- the judged rows are persisted, and the rows, claims and key points are views of them, so no row is judged twice;
- aggregates and their confidence intervals come from each rate's histogram of (numerator, denominator) pairs,
  counted by Spark; only those few counts reach the driver, and they give exactly the single-process numbers
  (``stats.RatioHistogram``).

A row the judge fails on carries its error, as everywhere else; a job-wide configuration error (HTTP 401/403/404)
fails the Spark job. Reruns make no calls when the judge's cache directory is shared by the workers (one machine:
the default; a cluster: a directory on shared storage, see ``docs/scale.md``).
"""

from __future__ import annotations

import functools
import json
import uuid
from pathlib import Path
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .grounding.model import model_tag
from .judge import Judge, Usage
from .judge.records import USAGE_SUMS
from .signature import summarization_signature
from .spark_budget import BudgetShares, keep_to_partition_share, partition_budgets
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, RatioHistogram
from .summarization.api import response_mode_of, source_token_budget
from .summarization.grounded import grounding_cache
from .tables import MissingColumnError
from .summarization.judging import judge_rows, prepare_rows
from .summarization.result import run_report
from .summarization.metrics import METRICS, MetricRegistry
from .summarization.scoring import USAGE_COLUMNS, Estimate, rate_statistics, result_metrics, row_families, rows_table
from .summarization.warnings import RunWarning, implausible_usage_warning, verification_warning
from .traditional import ROUGE_TYPES, corpus_scores, statistics_column, traditional_metrics, traditional_signatures

__all__ = ["SparkSummarizationResult", "judge_summaries_spark"]

_USAGE_COUNTS = ("reported_models", "response_modes")  # per-row counts summed into the result's usage
# Every usage sum without a column of the rows table (judge_requests is Spark's own), carried hidden so the
# result's usage has them all: one added to Usage later is summed here too, never a silent 0.
_USAGE_SUMS = tuple(name for name in USAGE_SUMS if f"judge_{name}" not in (*USAGE_COLUMNS, "judge_requests"))
_INTERNAL = ["_claims", "_key_points", "_usage_counts", *(f"_usage_{name}" for name in _USAGE_SUMS)]
_CLAIMS = T.ArrayType(T.StructType([
    T.StructField("claim_index", T.IntegerType()),
    T.StructField("claim", T.StringType()),
    T.StructField("verdict", T.StringType()),
    T.StructField("reason", T.StringType()),
    T.StructField("duplicates_removed", T.IntegerType()),
    T.StructField("lexical_support", T.DoubleType()),
    T.StructField("suspect", T.BooleanType()),
]))
_KEY_POINTS = T.ArrayType(T.StructType([
    T.StructField("key_point_index", T.IntegerType()),
    T.StructField("key_point", T.StringType()),
    T.StructField("covered", T.BooleanType()),
    T.StructField("reason", T.StringType()),
]))
_ID_TYPES = (T.StringType, T.IntegerType, T.LongType, T.ShortType, T.ByteType)


def _corpus(ter: bool) -> tuple[str, ...]:
    """The corpus metrics computed with references (TER only on request: it is slow)."""
    return ("bleu", "chrf", *(("ter",) if ter else ()))


def _judged_schema(
    id_type: T.DataType, carried: list[T.StructField], coverage: bool, references: bool, ter: bool = False, grounding: bool = True
) -> T.StructType:
    long, double, text = T.LongType(), T.DoubleType(), T.StringType()
    fields = [T.StructField("id", id_type), *carried]
    families = row_families(coverage=coverage, grounding=grounding)
    fields += [T.StructField(s.name, long if s.integer else double) for s in METRICS.rows(*families)]
    fields += [T.StructField("reasoning", text)]
    fields += [T.StructField("coverage_reasoning", text)] if coverage else []
    fields += [T.StructField("grounding_reasoning", text)] if grounding else []
    fields += [T.StructField("error", text)]
    fields += [T.StructField(name, double if name in ("judge_latency_s", "judge_cost_usd") else long) for name in USAGE_COLUMNS]
    fields += [T.StructField("judge_requests", long), T.StructField("source_key", text)]
    fields += [T.StructField("key_points_key", text)] if coverage else []
    if references:
        fields += [T.StructField(name, double) for name in (*ROUGE_TYPES, *_corpus(ter), "summary_words", "compression_ratio")]
        # sacreBLEU's per-row statistics stay in the rows, as in one process: corpus scores and paired tests use them
        fields += [T.StructField(statistics_column(name), T.ArrayType(double)) for name in _corpus(ter)]
        fields += [T.StructField("reference_key", text)]
    fields += [T.StructField("_claims", text), T.StructField("_key_points", text), T.StructField("_usage_counts", text)]
    fields += [T.StructField(f"_usage_{name}", long) for name in _USAGE_SUMS]
    return T.StructType(fields)


@dataclass(frozen=True)
class _PartitionPlan:
    """Everything one partition needs; pickled into each task."""

    judge: Judge
    source_col: str
    summary_col: str
    id_col: str
    reference_col: str | None
    coverage: bool
    max_source_tokens: int | None
    columns: list[str]
    carry_cols: tuple[str, ...]
    run: str  # unique per call: Spark never mistakes this judging for an earlier one it has persisted
    registry: MetricRegistry  # the driver's metrics travel with the task (a worker imports the package afresh)
    ter: bool = False
    grounding: bool = True
    budgets: BudgetShares | None = None  # per partition, its part of the judge's budget (None: the judge has none)

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        # Every store the partition uses is open before its first call (the judge's since the plan was unpickled),
        # so a file that cannot be read fails the task before anything is paid; each batch's stores share them.
        store = grounding_cache(self.judge) if self.grounding else None
        try:
            yield from self._judged(batches)
        finally:
            if store is not None:
                store.close()

    def _judged(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        held: pd.DataFrame | None = None
        for batch in batches:
            # Rows arrive sorted by source; the last source of a batch may go on in the next one, so it waits and
            # every source's rows are judged together (its key points extracted once).
            batch = batch if held is None else pd.concat([held, batch], ignore_index=True)
            last = batch[self.source_col].iloc[-1] if len(batch) else None
            complete = batch[self.source_col] != last
            held = batch[~complete]
            if complete.any():
                yield self._judge(batch[complete].reset_index(drop=True))
        if held is not None and len(held):
            yield self._judge(held.reset_index(drop=True))

    def _judge(self, batch: pd.DataFrame) -> pd.DataFrame:
        keep_to_partition_share(self.judge, self.budgets)  # the task's judge came with the whole budget
        rows = prepare_rows(batch[self.source_col], batch[self.summary_col], batch[self.id_col])
        judgements = judge_rows(
            rows, self.judge, coverage=self.coverage, max_source_tokens=self.max_source_tokens, progress=False, grounding=self.grounding
        )
        table = rows_table(judgements, coverage=self.coverage, grounding=self.grounding, registry=self.registry)
        table["id"] = batch[self.id_col].to_numpy()  # the input's own ids and type
        for name in self.carry_cols:
            table[name] = batch[name].to_numpy()
        table["judge_requests"] = [j.usage.requests for j in judgements]
        table["_usage_counts"] = [json.dumps(j.usage.model_dump(include=set(_USAGE_COUNTS))) for j in judgements]
        for name in _USAGE_SUMS:
            table[f"_usage_{name}"] = [getattr(j.usage, name) for j in judgements]
        table["source_key"] = [row.source_key for row in rows]
        table["_claims"] = [
            json.dumps([
                {"claim_index": n, "claim": c.claim, "verdict": c.verdict, "reason": c.reason, "duplicates_removed": c.duplicates,
                 "lexical_support": c.lexical_support, "suspect": c.suspect}
                for n, c in enumerate(j.claims, start=1)
            ])
            for j in judgements
        ]
        table["_key_points"] = [
            json.dumps([{"key_point_index": n, "key_point": p.key_point, "covered": p.covered, "reason": p.reason}
                        for n, p in enumerate(j.key_points or [], start=1)])
            for j in judgements
        ]
        if self.reference_col is not None:
            traditional = traditional_metrics(
                [r.summary for r in rows], batch[self.reference_col].tolist(), [r.source for r in rows], ter=self.ter, n_jobs=1
            )
            for name in traditional.rows.columns:
                table[name] = traditional.rows[name].to_numpy(dtype=float)
            for name, values in traditional.statistics.items():
                table[statistics_column(name)] = [list(map(float, s)) for s in values]
            table["reference_key"] = traditional.reference_keys
        return table[self.columns]


def _count_histograms(batches: Iterator[pd.DataFrame], registry: MetricRegistry) -> Iterator[pd.DataFrame]:
    """A partition's rows -> one record per (rate, numerator, denominator): how many rows have that pair."""
    for batch in batches:
        records = []
        for name, statistic in rate_statistics(batch, registry).items():
            histogram = statistic.histogram()
            records += zip([name] * len(histogram.counts), histogram.numerators, histogram.denominators, histogram.counts)
        yield pd.DataFrame.from_records(records, columns=["name", "numerator", "denominator", "rows"])


@dataclass
class SparkSummarizationResult:
    """What ``judge_summaries_spark`` returns. ``rows`` (one row per input, the per-row columns of
    ``docs/metrics.md``, as ``SummarizationResult.rows``), ``claims`` (one row per claim) and ``key_points`` (one row
    per summary and key point) are Spark DataFrames over the persisted judged rows; ``metrics`` are computed by
    Spark on first use and are the same numbers, with the same names, as ``judge_summaries`` gives."""

    judged: DataFrame = field(repr=False)
    judge: Judge = field(repr=False)
    registry: MetricRegistry = field(repr=False)
    max_source_tokens: int | None
    coverage: bool
    references: bool
    ter: bool = False
    grounding: bool = True
    prices: Any = field(default=None, repr=False)
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = 0.95

    @cached_property
    def signature(self) -> str:
        """As one process signs: the response mode the workers' replies came in is known once they are judged."""
        return summarization_signature(
            self.judge, coverage=self.coverage, max_source_tokens=self.max_source_tokens,
            response_mode=response_mode_of(self.usage), resamples=self.resamples, confidence=self.confidence,
            reference=traditional_signatures(self.ter) if self.references else None,
            grounding=model_tag() if self.grounding else None, bootstrap_seed=self.seed,
        )

    @property
    def rows(self) -> DataFrame:
        return self.judged.drop(*[c for c in _INTERNAL if c in self.judged.columns])

    @property
    def claims(self) -> DataFrame:
        exploded = self.judged.select("id", F.explode(F.from_json("_claims", _CLAIMS)).alias("c"))
        return exploded.select(
            "id", "c.claim_index", "c.claim", "c.verdict", "c.reason", "c.duplicates_removed", "c.lexical_support", "c.suspect"
        )

    @property
    def key_points(self) -> DataFrame:
        exploded = self.judged.select("id", "source_key", F.explode(F.from_json("_key_points", _KEY_POINTS)).alias("p"))
        return exploded.select("id", "source_key", "p.key_point_index", "p.key_point", "p.covered", "p.reason")

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
        names += [f"_usage_{name}" for name in _USAGE_SUMS]
        totals = self.judged.agg(*[F.sum(n).alias(n) for n in names]).collect()[0]
        cost = totals["judge_cost_usd"]
        counts: dict[str, dict[str, int]] = {name: {} for name in _USAGE_COUNTS}
        for record in self.judged.groupBy("_usage_counts").count().collect():  # a few distinct values
            for name, values in json.loads(record["_usage_counts"] or "{}").items():
                for key, replies in values.items():
                    counts[name][key] = counts[name].get(key, 0) + replies * record["count"]
        return Usage(
            requests=int(totals["judge_requests"] or 0), calls=int(totals["judge_calls"] or 0),
            cache_hits=int(totals["judge_cache_hits"] or 0), prompt_tokens=int(totals["judge_prompt_tokens"] or 0),
            completion_tokens=int(totals["judge_completion_tokens"] or 0), latency_s=float(totals["judge_latency_s"] or 0.0),
            cost_usd=None if cost is None or self.prices is None else float(cost), **counts,
            **{name: int(totals[f"_usage_{name}"] or 0) for name in _USAGE_SUMS},
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
        corpus = self._corpus_metrics() if self.references else None
        return result_metrics(
            self.histograms, self.usage, prices=self.prices, corpus=corpus, resamples=self.resamples, seed=self.seed,
            confidence=self.confidence,
        )

    def _corpus_metrics(self) -> dict[str, float]:
        summed = {}
        for name in _corpus(self.ter):
            column = statistics_column(name)
            by_position = self.judged.select(F.posexplode(column)).groupBy("pos").agg(F.sum("col").alias("total")).collect()
            summed[name] = [total for _, total in sorted((r["pos"], r["total"]) for r in by_position)]
        return corpus_scores(summed)

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
        for name in ("rows", "claims", "key_points"):
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


def _validate(
    df: DataFrame, source_col: str, summary_col: str, id_col: str, reference_col: str | None, carry_cols: tuple[str, ...]
) -> None:
    """Problems that would stop a single-process run stop this one too, before any call, naming the rows."""
    wanted = [c for c in (source_col, summary_col, id_col, reference_col, *carry_cols) if c is not None]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise MissingColumnError(f"the DataFrame has no column {missing}; it has {df.columns}")
    clashes = [c for c in carry_cols if c in _judged_schema(T.StringType(), [], True, True).fieldNames()]
    if clashes:
        raise ValueError(f"carry_cols {clashes} would overwrite result columns of the same name; rename them first")
    types = {f.name: f.dataType for f in df.schema.fields}
    if not isinstance(types[id_col], _ID_TYPES):
        raise TypeError(f"the id column {id_col!r} is {types[id_col].simpleString()}; use strings or integers (cast it)")
    for name in (source_col, summary_col, *([reference_col] if reference_col else [])):
        if not isinstance(types[name], T.StringType):
            raise TypeError(f"the column {name!r} is {types[name].simpleString()}, not string")
    source = F.col(source_col)
    problems = [
        (F.col(id_col).isNull(), "the id is missing"),
        (source.isNull(), "the source is missing"),
        (source.isNotNull() & (F.trim(source) == ""), "the source is empty"),
    ]
    if reference_col:
        problems.append((F.col(reference_col).isNull(), "the reference is missing"))
    problem = F.coalesce(*[F.when(test, F.lit(text)) for test, text in problems])
    found = [f"id {r[id_col]!r}: {r['_problem']}" for r in df.select(id_col, problem.alias("_problem")).where("_problem IS NOT NULL").limit(20).collect()]
    repeated = df.groupBy(id_col).count().where("count > 1").limit(20).collect()
    found += [f"id {r[id_col]!r}: the id appears {r['count']} times; ids must be unique" for r in repeated]
    if found:
        raise ValueError("cannot judge these rows (at most 20 of each kind shown):\n  " + "\n  ".join(found))


def judge_summaries_spark(
    df: DataFrame,
    *,
    judge: Judge,
    source_col: str = "source",
    summary_col: str = "summary",
    id_col: str = "id",
    reference_col: str | None = None,
    coverage: bool = True,
    grounding: bool = True,
    ter: bool = False,
    max_source_tokens: int | None = None,
    partitions: int | None = None,
    carry_cols: Sequence[str] = (),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> SparkSummarizationResult:
    """Judge each summary of ``df`` against its source on Spark; see the module's documentation.

    ``carry_cols`` (e.g. ``["model", "category"]``) are carried into ``rows`` after ``id``, so the result can be
    grouped without a join. ``grounding`` adds the model-free check, as ``judge_summaries`` does.
    ``judge.max_concurrency`` and ``judge.max_requests_per_s`` are the totals for the job: each of the partitions
    that run at once gets an equal share (at least one call in flight); its ``max_calls`` and ``max_cost_usd`` are
    the job's too, what is left of them split over the partitions by their rows (``spark_budget``), never
    multiplied. ``partitions`` defaults to Spark's default
    parallelism. The judging runs when the result is first used (``metrics``, an action on ``rows``...); the judged
    rows are persisted (memory, then disk) so that it runs once. Bad input raises before any call, naming rows.
    """
    carry_cols = tuple(c for c in carry_cols if c not in (id_col, source_col, summary_col, reference_col))
    _validate(df, source_col, summary_col, id_col, reference_col, carry_cols)
    if grounding and (store := grounding_cache(judge)) is not None:
        store.close()  # opened once here: a grounding cache that cannot be read stops the job before any call
    spark = df.sparkSession
    parallelism = spark.sparkContext.defaultParallelism
    partitions = partitions or parallelism
    at_once = max(1, min(partitions, parallelism))
    share = judge.with_limits(
        max_concurrency=max(1, judge.max_concurrency // at_once),
        max_requests_per_s=None if judge.max_requests_per_s is None else judge.max_requests_per_s / at_once,
    )
    if max_source_tokens is None:
        max_source_tokens = source_token_budget(judge)
    carried = [df.schema[name] for name in carry_cols]
    schema = _judged_schema(df.schema[id_col].dataType, carried, coverage, reference_col is not None, ter, grounding)
    registry = METRICS.snapshot()
    plan = _PartitionPlan(
        share, source_col, summary_col, id_col, reference_col, coverage, max_source_tokens, schema.fieldNames(), carry_cols,
        uuid.uuid4().hex, registry, ter, grounding, partition_budgets(df, judge, partitions, source_col),
    )
    wanted = [c for c in dict.fromkeys([id_col, source_col, summary_col, reference_col, *carry_cols]) if c is not None]
    judged = (
        df.select(*wanted)
        .repartition(partitions, source_col)
        .sortWithinPartitions(source_col)
        .mapInPandas(plan, schema)
        .persist()
    )
    return SparkSummarizationResult(
        judged=judged,
        judge=judge,
        registry=registry,
        max_source_tokens=max_source_tokens,
        coverage=coverage,
        references=reference_col is not None,
        ter=ter,
        grounding=grounding,
        prices=judge.prices,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
