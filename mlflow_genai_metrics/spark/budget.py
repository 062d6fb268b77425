"""Spark's shares of a Judge's budget: each partition judges with a part of what is left of ``max_calls`` and
``max_cost_usd``, in proportion to its rows, so the job as a whole never spends more than the Judge was given.

Each Spark task gets its own copy of the Judge (settings travel, budgets in use do not): a copy keeping the whole
budget would multiply it by the partitions. The rows per partition are counted first (one small Spark job over the
source column, run only when the Judge has a budget); a partition with no rows gets nothing, one with a third of the
rows a third. Within its part a partition finishes its rows depth-first, as one process does.
"""

from __future__ import annotations

from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..judge import Judge

BudgetShares = tuple[tuple[int | None, float | None], ...]  # per partition: (max_calls, max_cost_usd)


def partition_budgets(df: DataFrame, judge: Judge, partitions: int, source_col: str) -> BudgetShares | None:
    """Each partition's part of what is left of ``judge``'s budget when ``df`` is hash-partitioned by its source
    into ``partitions`` (as ``judge_summaries_spark`` partitions it); None when the Judge has no budget."""
    if judge.budget is None:
        return None
    rows = df.select(source_col).repartition(partitions, source_col).select(F.spark_partition_id().alias("partition"))
    counted = {record["partition"]: record["count"] for record in rows.groupBy("partition").count().collect()}
    return tuple(judge.budget.shares([counted.get(partition, 0) for partition in range(partitions)]))


def keep_to_partition_share(judge: Judge, budgets: BudgetShares | None) -> None:
    """In a Spark task: ``judge`` (the task's own copy) spends at most its partition's part of the budget."""
    if budgets is not None and judge.budget is not None:
        judge.budget.restrict(*budgets[TaskContext.get().partitionId()])
