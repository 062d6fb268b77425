"""``judge_summaries_spark``: checks the DataFrame, partitions it by source and plans the judging (lazily)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..judge import Judge
from ..stats import StatisticsOptions
from ..summarization.grounded import grounding_cache
from ..summarization.metrics import METRICS, MetricRegistry
from ..summarization.options import JudgingOptions, resolve
from ..tables import MissingColumnError
from .budget import BudgetShares, partition_budgets
from .plan import PartitionPlan, judged_schema
from .result import SparkSummarizationResult

ID_TYPES = (T.StringType, T.IntegerType, T.LongType, T.ShortType, T.ByteType)


def check_columns(
    df: DataFrame, id_col: str, texts: Sequence[str | None], carry_cols: tuple[str, ...], schema: T.StructType, others: Sequence[str] = (),
) -> dict[str, T.DataType]:
    """Every task's first checks, before any call: the columns exist (``others`` too), carried ones do not overwrite
    the judged rows' (``schema``), the ids are strings or integers and the ``texts`` columns strings (None: not
    given). Returns the columns' types."""
    wanted = [c for c in (id_col, *texts, *others, *carry_cols) if c is not None]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise MissingColumnError(f"the DataFrame has no column {missing}; it has {df.columns}")
    carried_clashes(carry_cols, schema)
    types = {f.name: f.dataType for f in df.schema.fields}
    if not isinstance(types[id_col], ID_TYPES):
        raise TypeError(f"the id column {id_col!r} is {types[id_col].simpleString()}; use strings or integers (cast it)")
    for name in texts:
        if name is not None and not isinstance(types[name], T.StringType):
            raise TypeError(f"the column {name!r} is {types[name].simpleString()}, not string")
    return types


def _validate(
    df: DataFrame, source_col: str, summary_col: str, id_col: str, reference_col: str | None, carry_cols: tuple[str, ...]
) -> None:
    """Problems that would stop a single-process run stop this one too, before any call, naming the rows."""
    check_columns(df, id_col, (source_col, summary_col, reference_col), carry_cols, judged_schema(T.StringType(), [], True, True))
    source = F.col(source_col)
    problems = [
        (F.col(id_col).isNull(), "the id is missing"),
        (source.isNull(), "the source is missing"),
        # No letter or digit (blank, "\n\t", "...", zero-width spaces) is refused in one process: here too, before any
        # call (F.trim strips spaces alone, and such a source failed every partition it reached after paying).
        (source.isNotNull() & ~source.rlike(r"[\p{L}\p{N}]"), "the source is empty or has no letter or digit"),
    ]
    if reference_col:
        problems.append((F.col(reference_col).isNull(), "the reference is missing"))
    refuse_problems(df, id_col, problems)


def blank(text: Column) -> Column:
    """Whitespace alone (Unicode's, as Python's ``str.strip``; Spark's ``trim`` strips spaces only)."""
    return text.rlike(r"(?U)^\s*$")


def carried_clashes(carry_cols: tuple[str, ...], schema: T.StructType) -> None:
    """Refuse carried columns that would overwrite the judged rows' own columns."""
    clashes = [c for c in carry_cols if c in schema.fieldNames()]
    if clashes:
        raise ValueError(f"carry_cols {clashes} would overwrite result columns of the same name; rename them first")


def refuse_problems(df: DataFrame, id_col: str, problems: list[tuple[Column, str]]) -> None:
    """Raise naming the rows (at most 20 of each kind) where a test of ``problems`` holds, and every repeated id;
    one Spark job each, before any judge call."""
    problem = F.coalesce(*[F.when(test, F.lit(text)) for test, text in problems])
    found = [f"id {r[id_col]!r}: {r['_problem']}" for r in df.select(id_col, problem.alias("_problem")).where("_problem IS NOT NULL").limit(20).collect()]
    repeated = df.groupBy(id_col).count().where("count > 1").limit(20).collect()
    found += [f"id {r[id_col]!r}: the id appears {r['count']} times; ids must be unique" for r in repeated]
    if found:
        raise ValueError("cannot judge these rows (at most 20 of each kind shown):\n  " + "\n  ".join(found))


def judge_share(df: DataFrame, judge: Judge, partitions: int | None) -> tuple[int, Judge]:
    """The partitions to use (default: Spark's default parallelism) and the judge each task gets: the job's
    ``max_concurrency`` and ``max_requests_per_s`` split evenly over the partitions that run at once."""
    parallelism = df.sparkSession.sparkContext.defaultParallelism
    partitions = partitions or parallelism
    at_once = max(1, min(partitions, parallelism))
    return partitions, judge.with_limits(
        max_concurrency=max(1, judge.max_concurrency // at_once),
        max_requests_per_s=None if judge.max_requests_per_s is None else judge.max_requests_per_s / at_once,
    )


def judged_rows(
    df: DataFrame, judge: Judge, partitions: int | None, *, wanted: Sequence[str | None], key: str, sort: bool, grounding: bool,
    schema: T.StructType, plan: Callable[[Judge, MetricRegistry, str, BudgetShares | None], Any],
) -> tuple[DataFrame, MetricRegistry]:
    """The one Spark job of every task, after its checks: the grounding cache opened once (one that cannot be read
    stops the job before any call), the ``wanted`` columns hash-partitioned by ``key`` (sorted by it within a
    partition with ``sort``), each partition judged into ``schema`` by ``plan(the judge's share of the limits, the
    registry, a run id, the partitions' budgets)``, the judged rows persisted so that they are judged once. Returns
    them and the metric registry the tasks carry (the driver's at the call)."""
    if grounding and (store := grounding_cache(judge)) is not None:
        store.close()
    partitions, share = judge_share(df, judge, partitions)
    registry = METRICS.snapshot()
    task = plan(share, registry, uuid.uuid4().hex, partition_budgets(df, judge, partitions, key))
    spread = df.select(*[c for c in dict.fromkeys(wanted) if c is not None]).repartition(partitions, key)
    return (spread.sortWithinPartitions(key) if sort else spread).mapInPandas(task, schema).persist(), registry


def judge_summaries_spark(
    df: DataFrame,
    *,
    judge: Judge,
    source_col: str = "source",
    summary_col: str = "summary",
    id_col: str = "id",
    reference_col: str | None = None,
    options: JudgingOptions | None = None,
    statistics: StatisticsOptions | None = None,
    partitions: int | None = None,
    carry_cols: Sequence[str] = (),
    **keywords: Any,
) -> SparkSummarizationResult:
    """Judge each summary of ``df`` against its source on Spark; see the module's documentation.

    ``carry_cols`` (e.g. ``["model", "category"]``) are carried into ``rows`` after ``id``, so the result can be
    grouped without a join. ``options`` and ``statistics`` (or their fields as keywords) are ``judge_summaries``'.
    ``judge.max_concurrency`` and ``judge.max_requests_per_s`` are the totals for the job: each of the partitions
    that run at once gets an equal share (at least one call in flight); its ``max_calls`` and ``max_cost_usd`` are
    the job's too, what is left of them split over the partitions by their rows (``spark.budget``), never
    multiplied. ``partitions`` defaults to Spark's default
    parallelism. The judging runs when the result is first used (``metrics``, an action on ``rows``...); the judged
    rows are persisted (memory, then disk) so that it runs once. Bad input raises before any call, naming rows.
    """
    options, statistics = resolve("judge_summaries_spark", keywords, options, statistics)
    if options.method.examples is not None:  # each partition sees its own rows only: it could show an example from another's
        raise ValueError("examples: a partition knows only its own rows, so it could show an example drawn from rows "
                         "another partition judges; judge with examples in one process (judge_summaries)")
    carry_cols = tuple(c for c in carry_cols if c not in (id_col, source_col, summary_col, reference_col))
    _validate(df, source_col, summary_col, id_col, reference_col, carry_cols)
    options = options.for_judge(judge)
    schema = judged_schema(df.schema[id_col].dataType, [df.schema[name] for name in carry_cols], options.coverage, reference_col is not None,
                           options.ter, options.grounding, options.method.repeated, options.method.order_checked)
    judged, registry = judged_rows(
        df, judge, partitions, wanted=[id_col, source_col, summary_col, reference_col, *carry_cols], key=source_col, sort=True,
        grounding=options.grounding, schema=schema, plan=lambda share, registry, run, budgets: PartitionPlan(
            share, source_col, summary_col, id_col, reference_col, options, schema.fieldNames(), carry_cols, run, registry, budgets))
    return SparkSummarizationResult(
        judged=judged,
        judge=judge,
        registry=registry,
        options=options,
        references=reference_col is not None,
        prices=judge.prices,
        statistics=statistics,
    )
