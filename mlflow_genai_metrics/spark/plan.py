"""What each Spark task runs: the judged rows' schema and the partition plan, which judges a partition's rows with
the same code one process runs (``prepare_rows``, ``judge_rows``, ``rows_table``) and adds the reference metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import types as T

from ..judge import USAGE_SUMS, Judge
from ..reference import ROUGE_TYPES, statistics_column, traditional_metrics
from ..summarization.grounded import grounding_cache
from ..summarization.judging import judge_rows, prepare_rows, source_key
from ..summarization.metrics import METRICS, MetricRegistry
from ..summarization.options import JudgingOptions
from ..summarization.records import RowJudgement
from ..summarization.scoring import USAGE_COLUMNS, row_families, rows_table
from .budget import BudgetShares, keep_to_partition_share

USAGE_COUNTS = ("reported_models", "response_modes")  # per-row counts summed into the result's usage
# Every usage sum without a column of the rows table (judge_requests is Spark's own), carried hidden so the
# result's usage has them all: one added to Usage later is summed here too, never a silent 0.
HIDDEN_USAGE_SUMS = tuple(name for name in USAGE_SUMS if f"judge_{name}" not in (*USAGE_COLUMNS, "judge_requests"))
INTERNAL_COLUMNS = ["_claims", "_key_points", "_usage_counts", *(f"_usage_{name}" for name in HIDDEN_USAGE_SUMS)]


def usage_fields() -> list[T.StructField]:
    """The judged rows' usage columns: the rows table's (``USAGE_COLUMNS``), Spark's own request count, and the
    hidden ones (``add_usage_columns``) the result sums into its usage."""
    long = T.LongType()
    fields = [T.StructField(name, T.DoubleType() if name in ("judge_latency_s", "judge_cost_usd") else long) for name in USAGE_COLUMNS]
    fields += [T.StructField("judge_requests", long), T.StructField("_usage_counts", T.StringType())]
    return fields + [T.StructField(f"_usage_{name}", long) for name in HIDDEN_USAGE_SUMS]


def add_usage_columns(table: pd.DataFrame, judgements: Sequence[RowJudgement]) -> None:
    """Each row's usage beyond the rows table's own columns, for ``SparkJudged.usage`` to sum: requests, the
    per-model and per-mode counts (JSON), and every other usage sum (``HIDDEN_USAGE_SUMS``)."""
    table["judge_requests"] = [j.usage.requests for j in judgements]
    table["_usage_counts"] = [json.dumps(j.usage.model_dump(include=set(USAGE_COUNTS))) for j in judgements]
    for name in HIDDEN_USAGE_SUMS:
        table[f"_usage_{name}"] = [getattr(j.usage, name) for j in judgements]


def corpus_names(ter: bool) -> tuple[str, ...]:
    """The corpus metrics computed with references (TER only on request: it is slow)."""
    return ("bleu", "chrf", *(("ter",) if ter else ()))


def judged_schema(
    id_type: T.DataType, carried: list[T.StructField], coverage: bool, references: bool, ter: bool = False, grounding: bool = True,
    stability: bool = False, order: bool = False,
) -> T.StructType:
    long, double, text = T.LongType(), T.DoubleType(), T.StringType()
    fields = [T.StructField("id", id_type), *carried]
    families = row_families(coverage=coverage, grounding=grounding, stability=stability, order=order)
    fields += [T.StructField(s.name, long if s.integer else double) for s in METRICS.rows(*families)]
    fields += [T.StructField("reasoning", text)]
    fields += [T.StructField("coverage_reasoning", text)] if coverage else []
    fields += [T.StructField("grounding_reasoning", text)] if grounding else []
    fields += [T.StructField("error", text), *usage_fields(), T.StructField("source_key", text), T.StructField("output_key", text)]
    fields += [T.StructField("key_points_key", text)] if coverage else []
    if references:
        fields += [T.StructField(name, double) for name in (*ROUGE_TYPES, *corpus_names(ter), "summary_words", "compression_ratio")]
        # sacreBLEU's per-row statistics stay in the rows, as in one process: corpus scores and paired tests use them
        fields += [T.StructField(statistics_column(name), T.ArrayType(double)) for name in corpus_names(ter)]
        fields += [T.StructField("reference_key", text)]
    fields += [T.StructField("_claims", text), T.StructField("_key_points", text)]
    return T.StructType(fields)


class TaskPlan:
    """What every task's partition plan does: the stores it uses open before its first call (the judge's since the
    plan was unpickled, the grounding cache's here), so that a file that cannot be read fails the task before anything
    is paid, and each batch judged (``_judge``) with them."""

    judge: Judge
    grounding: bool

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        store = grounding_cache(self.judge) if self.grounding else None
        try:
            yield from self._judged(batches)
        finally:
            if store is not None:
                store.close()

    def _judged(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            yield self._judge(batch.reset_index(drop=True))  # each task's own


@dataclass(frozen=True)
class PartitionPlan(TaskPlan):
    """Everything one partition of summaries needs; pickled into each task."""

    judge: Judge
    source_col: str
    summary_col: str
    id_col: str
    reference_col: str | None
    options: JudgingOptions  # with max_source_tokens settled (JudgingOptions.for_judge), as the driver signs it
    columns: list[str]
    carry_cols: tuple[str, ...]
    run: str  # unique per call: Spark never mistakes this judging for an earlier one it has persisted
    registry: MetricRegistry  # the driver's metrics travel with the task (a worker imports the package afresh)
    budgets: BudgetShares | None = None  # per partition, its part of the judge's budget (None: the judge has none)

    @property
    def grounding(self) -> bool:
        return self.options.grounding

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
        judgements = judge_rows(rows, self.judge, self.options, progress=False)
        table = rows_table(judgements, coverage=self.options.coverage, grounding=self.options.grounding, registry=self.registry,
                           stability=self.options.method.repeated, order=self.options.method.order_checked)
        table["id"] = batch[self.id_col].to_numpy()  # the input's own ids and type
        for name in self.carry_cols:
            table[name] = batch[name].to_numpy()
        add_usage_columns(table, judgements)
        table["source_key"] = [row.source_key for row in rows]
        table["output_key"] = [source_key(row.summary) for row in rows]  # the summary's fingerprint, as in one process
        table["_claims"] = [
            json.dumps([
                {"claim_index": n, "claim": c.claim, "verdict": c.verdict, "reason": c.reason, "duplicates_removed": c.duplicates,
                 "lexical_support": c.lexical_support, "suspect": c.suspect, "agreement": c.agreement}
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
                [r.summary for r in rows], batch[self.reference_col].tolist(), [r.source for r in rows], ter=self.options.ter, n_jobs=1
            )
            for name in traditional.rows.columns:
                table[name] = traditional.rows[name].to_numpy(dtype=float)
            for name, values in traditional.statistics.items():
                table[statistics_column(name)] = [list(map(float, s)) for s in values]
            table["reference_key"] = traditional.reference_keys
        return table[self.columns]
