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
  ``max_cost_usd``) is split over the partitions in proportion to their rows (``spark.budget``);
- the judged rows are persisted, and the rows, claims and key points are views of them, so no row is judged twice;
- aggregates and their confidence intervals come from each rate's histogram of (numerator, denominator) pairs,
  counted by Spark; only those few counts reach the driver, and they give exactly the single-process numbers
  (``stats.RatioHistogram``).

A row the judge fails on carries its error, as everywhere else; a job-wide configuration error (HTTP 401/403/404)
fails the Spark job. Reruns make no calls when the judge's cache directory is shared by the workers (one machine:
the default; a cluster: a directory on shared storage, see ``docs/scale.md``).

Answers from retrieved passages run the same way (``judge_answers_spark``, module ``answers``), partitioned by id.

Modules: ``job`` (``judged_rows``, the one job every task runs after its checks, and ``judge_summaries_spark``),
``plan`` (what a partition runs: ``TaskPlan``, and the summaries' plan), ``result`` (``SparkJudged``, what every
Spark result does, and ``SparkSummarizationResult``), ``answers`` (``judge_answers_spark``, its plan and
``SparkAnswersResult``), ``budget`` (each partition's share of the judge's budget).
"""

from .answers import SparkAnswersResult, judge_answers_spark
from .job import judge_summaries_spark
from .result import SparkJudged, SparkSummarizationResult

__all__ = ["SparkAnswersResult", "SparkJudged", "SparkSummarizationResult", "judge_answers_spark", "judge_summaries_spark"]
