"""``judge_answers_spark``: answers from retrieved passages judged on Spark, as ``rag.judge_answers`` judges them in
one process (``docs/rag.md``, ``docs/scale.md``).

Each partition runs ``mapInPandas`` over the one-process code (``prepare_answer_rows``, ``judge_answer_rows``,
``answer_rows_table``) with its own copy of the ``Judge``, its concurrency, request rate and budget split over the
partitions as for summaries (``spark.budget``). An answer shares no judge call with another row (no key points), so
rows are hash-partitioned by id. The claims (passage, quote, whether it was found) and the expected answers' facts
travel in the judged rows as JSON and are Spark DataFrames of the result; the aggregates come from the rates'
histograms, as for summaries, and are the single-process numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..judge import Judge
from ..rag.api import answers_signature, checked_arguments, judge_answer_rows, prepare_answer_rows
from ..rag.scoring import ANSWER_CLAIM_COLUMNS, ANSWER_COLUMNS, FACT_COLUMNS, INTEGER_COLUMNS, answer_claims_table, answer_rows_table, facts_table
from ..stats import StatisticsOptions
from ..summarization.metrics import METRICS, MetricRegistry
from ..summarization.scoring import row_families
from .budget import BudgetShares, keep_to_partition_share
from .job import blank, check_columns, judged_rows, refuse_problems
from .plan import INTERNAL_COLUMNS, TaskPlan, add_usage_columns, usage_fields
from .result import CLAIM_FIELDS, SparkJudged

_TYPES = {"passage": T.LongType(), "quote": T.StringType(), "quote_found": T.BooleanType(), "judge_verdict": T.StringType()}
ANSWER_CLAIM_FIELDS = T.StructType([*CLAIM_FIELDS.fields, *(T.StructField(name, _TYPES[name]) for name in ANSWER_CLAIM_COLUMNS[len(CLAIM_FIELDS.fields) + 1:])])
_FACT_TYPES = {"fact_index": T.IntegerType(), "passage": T.LongType(), "quote_found": T.BooleanType()}
FACT_FIELDS = T.StructType([T.StructField(name, _FACT_TYPES.get(name, T.StringType())) for name in FACT_COLUMNS[1:]])


def answers_schema(id_type: T.DataType, carried: list[T.StructField], grounding: bool) -> T.StructType:
    """The judged rows: ``AnswersResult.rows``' columns typed, then the claims and facts as JSON and the usage."""
    long, double, text = T.LongType(), T.DoubleType(), T.StringType()
    specs = METRICS.rows(*row_families(coverage=False, grounding=False, suspect=grounding))
    return T.StructType([
        T.StructField("id", id_type), *carried, T.StructField("source_key", text),
        *(T.StructField(s.name, long if s.integer else double) for s in specs),
        *(T.StructField(name, long if name in INTEGER_COLUMNS else double) for name in ANSWER_COLUMNS),
        *(T.StructField(name, text) for name in ("reasoning", "relevance_reasoning", "facts_reasoning", "error")),
        *usage_fields(), T.StructField("_claims", text), T.StructField("_facts", text),
    ])


def _nested_json(table: pd.DataFrame, ids: Sequence[Any]) -> list[str]:
    """Each id's rows of ``table`` (claims or facts, by their ``id``) as one JSON list, in the order of ``ids``; floats
    to their last bit (``json``, not pandas' 10 digits), missing values as null."""
    items = table.drop(columns="id").astype(object)
    items = items.where(items.notna(), None)
    parts = {key: json.dumps(items.loc[part.index].to_dict("records")) for key, part in table.groupby("id", sort=False)}
    return [parts.get(key, "[]") for key in ids]


@dataclass(frozen=True)
class AnswerPartitionPlan(TaskPlan):
    """Everything one partition needs; pickled into each task."""

    judge: Judge
    columns: dict[str, str | None]  # question, passages, answer, id, expected -> the DataFrame's column (None: not given)
    carry_cols: tuple[str, ...]
    max_source_tokens: int | None
    grounding: bool
    schema: list[str]
    run: str  # unique per call: Spark never mistakes this judging for an earlier one it has persisted
    registry: MetricRegistry  # the driver's metrics travel with the task
    budgets: BudgetShares | None = None

    def _judge(self, batch: pd.DataFrame) -> pd.DataFrame:
        keep_to_partition_share(self.judge, self.budgets)
        given = {name: batch[column] if column is not None else None for name, column in self.columns.items()}
        rows = prepare_answer_rows(given["question"], given["passages"], given["answer"], given["id"], given["expected"])
        judgements = judge_answer_rows(rows, self.judge, max_source_tokens=self.max_source_tokens, grounding=self.grounding, progress=False)
        table = answer_rows_table(judgements, suspect=self.grounding)
        ids = list(table["id"])
        table["_claims"] = _nested_json(answer_claims_table(judgements), ids)
        table["_facts"] = _nested_json(facts_table(judgements), ids)
        table["id"] = given["id"].to_numpy()  # the input's own ids and type
        for name in self.carry_cols:
            table[name] = batch[name].to_numpy()
        add_usage_columns(table, judgements)
        return table[self.schema]


def _validate(df: DataFrame, columns: dict[str, str | None], carry_cols: tuple[str, ...]) -> None:
    """What would stop ``judge_answers`` stops this job too, before any call, naming the rows."""
    id_col, question, passages = columns["id"], F.col(columns["question"]), F.col(columns["passages"])
    types = check_columns(df, id_col, (columns["question"], columns["answer"], columns["expected"]), carry_cols,
                          answers_schema(T.StringType(), [], True), others=[columns["passages"]])
    kind = types[columns["passages"]]
    if not (isinstance(kind, T.ArrayType) and isinstance(kind.elementType, T.StringType)):
        raise TypeError(f"the passages column {columns['passages']!r} is {kind.simpleString()}, not array<string> (a list of texts per row)")
    refuse_problems(df, id_col, [
        (F.col(id_col).isNull(), "the id is missing"),
        (question.isNull(), "the question is missing"),
        (question.isNotNull() & blank(question), "the question is empty"),
        (passages.isNull(), "the passages are missing (give an empty list when nothing was retrieved)"),
        (F.exists(passages, lambda p: p.isNull() | blank(p)), "a passage is missing or empty"),
    ])


def judge_answers_spark(
    df: DataFrame,
    *,
    judge: Judge,
    question_col: str = "question",
    passages_col: str = "passages",
    answer_col: str = "answer",
    id_col: str = "id",
    expected_col: str | None = None,
    max_source_tokens: int | None = None,
    statistics: StatisticsOptions | None = None,
    grounding: bool = True,
    partitions: int | None = None,
    carry_cols: Sequence[str] = (),
) -> SparkAnswersResult:
    """``judge_answers`` over a Spark DataFrame (``passages_col`` an ``array<string>`` per row); see the module's
    documentation. The judge's concurrency, request rate and budget are the job's totals, as in
    ``judge_summaries_spark``; ``carry_cols`` are carried into ``rows``. The judging runs when the result is first
    used and the judged rows are persisted, so it runs once. Bad input raises before any call, naming rows."""
    statistics, chunk = checked_arguments("judge_answers_spark", judge, statistics, max_source_tokens)
    columns = {"question": question_col, "passages": passages_col, "answer": answer_col, "id": id_col, "expected": expected_col}
    carry_cols = tuple(c for c in carry_cols if c not in columns.values())
    _validate(df, columns, carry_cols)
    schema = answers_schema(df.schema[id_col].dataType, [df.schema[name] for name in carry_cols], grounding)
    judged, registry = judged_rows(
        df, judge, partitions, wanted=[*columns.values(), *carry_cols], key=id_col, sort=False, grounding=grounding, schema=schema,
        plan=lambda share, registry, run, budgets: AnswerPartitionPlan(share, columns, carry_cols, chunk, grounding, schema.fieldNames(),
                                                                        run, registry, budgets))
    return SparkAnswersResult(judged=judged, judge=judge, registry=registry, prices=judge.prices, statistics=statistics,
                              max_source_tokens=chunk, grounding=grounding)


@dataclass(kw_only=True)
class SparkAnswersResult(SparkJudged):
    """What ``judge_answers_spark`` returns: ``rows``, ``claims`` (with passage, quote, ``quote_found``) and ``facts``
    as Spark DataFrames, the columns of ``rag.AnswersResult``'s tables; ``metrics`` the same numbers it gives."""

    TABLE_NAMES: ClassVar[tuple[str, ...]] = ("rows", "claims", "facts")
    INTERNAL: ClassVar[tuple[str, ...]] = (*INTERNAL_COLUMNS, "_facts")
    CLAIM_FIELDS: ClassVar[T.StructType] = ANSWER_CLAIM_FIELDS
    max_source_tokens: int | None
    grounding: bool

    @cached_property
    def signature(self) -> str:
        return answers_signature(self.judge, max_source_tokens=self.max_source_tokens, usage=self.usage, statistics=self.statistics,
                                 grounding=self.grounding)

    @property
    def facts(self) -> DataFrame:
        return self._nested("_facts", FACT_FIELDS)
