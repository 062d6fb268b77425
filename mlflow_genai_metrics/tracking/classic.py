"""Custom metrics for ``mlflow.models.evaluate`` (and its deprecated alias ``mlflow.evaluate``).

    metrics = summarization_metrics(judge, source_col="article")
    mlflow.models.evaluate(data=df, predictions="summary", targets="reference", extra_metrics=metrics)

Per-row metrics appear in ``eval_results_table`` as ``<name>/score`` with the judge's reasoning in
``<name>/justification``; a row the judge failed on has an empty score and the error as justification. The
aggregates of ``docs/metrics.md`` are run metrics under exactly their names (``alignment``, ``alignment_ci_low``,
``alignment_n``, ``defect_rate/contradiction``, ``judge/calls``, ...). Every metric reads one shared judgement per row.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import mlflow
import pandas as pd
from mlflow.metrics import MetricValue, make_metric
from mlflow.models import EvaluationMetric

from ..judge import Judge
from ..summarization.judging import prepare_rows
from ..summarization.result import SummarizationResult
from ..summarization.metrics import METRICS
from ..summarization.scoring import interval_names, row_families
from .run_logging import log_result
from .shared import SharedJudgement

__all__ = ["summarization_metrics"]

# MLflow metric names cannot contain "/": grouped aggregates use the group as the metric name and the rest of
# the name as the aggregate key, which MLflow logs as "<group>/<key>" ("judge" holds the judge's usage).
_USAGE_GROUP = "judge"


def _cell(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return float(value)


class _ClassicAdapter:
    """Turns MLflow's per-metric calls into one shared ``SummarizationResult`` per evaluated dataset."""

    def __init__(self, shared: SharedJudgement, *, traditional: bool, id_col: str | None, category_col: str | None):
        self.shared = shared
        self.traditional = traditional
        self.id_col = id_col
        self.category_col = category_col
        self._logged: set[tuple[str, str]] = set()
        self._seen_single_rows: set[tuple[str, str | None, str]] = set()

    def result(
        self, metric: str, predictions: pd.Series, targets: pd.Series | None, sources: pd.Series, ids: Any, categories: Any, *, logs: bool = False
    ) -> SummarizationResult | None:
        """The shared result for this dataset; None for MLflow's one-row probe, which is answered without judging so
        that the full pass validates every row (duplicate ids, bad text) before any judge call."""
        if len(predictions) == 0:
            raise ValueError("the evaluation data has no rows: nothing to judge (is the DataFrame empty?)")
        id_values = list(ids) if ids is not None else list(range(len(predictions)))
        run = mlflow.active_run()
        run_id = run.info.run_id if run else None
        if self._is_probe(metric, run_id, predictions, sources, id_values):
            return None
        rows = prepare_rows(list(sources), list(predictions), id_values)
        extra = {"category": list(categories)} if categories is not None else None
        references = list(targets) if (self.traditional and targets is not None) else None
        self.shared.begin_session(run_id)
        result = self.shared.result(rows, references=references, extra_columns=extra)
        if logs and run_id is not None and (run_id, len(rows)) not in self._logged:
            log_result(result, run_id=run_id)
            self._logged.add((run_id, len(rows)))
        return result

    def _is_probe(self, metric: str, run_id: str | None, predictions: Any, sources: Any, ids: list[Any]) -> bool:
        """MLflow first tests every metric on the dataset's first row, then runs the full pass. Only the full pass
        judges and logs, so a run killed in between never holds a one-row report that looks whole. (A one-row
        dataset is seen twice by each metric: the second time is the full pass.)"""
        if len(ids) > 1:
            return False
        key = (metric, run_id, repr((list(predictions), list(sources), ids)))
        if key in self._seen_single_rows:
            return False
        self._seen_single_rows.add(key)
        return True

    def eval_fn(
        self, compute: Callable[[SummarizationResult], MetricValue], source_col: str, *, metric: str, logs: bool = False
    ) -> Callable[..., MetricValue]:
        """A function whose parameters MLflow maps to columns: predictions, targets, the source column, and the
        id and category columns when named."""

        names = ["predictions", source_col, *(c for c in (self.id_col, self.category_col) if c), "targets"]

        def eval_fn(*args: Any, **kwargs: Any) -> MetricValue:
            columns = {**dict(zip(names, args)), **kwargs}  # MLflow passes them positionally, in signature order
            result = self.result(
                metric,
                columns["predictions"],
                columns.get("targets"),
                columns[source_col],
                columns.get(self.id_col) if self.id_col else None,
                columns.get(self.category_col) if self.category_col else None,
                logs=logs,
            )
            if result is None:  # the probe: a well-formed value, never logged
                return MetricValue(scores=[None] * len(columns["predictions"]), aggregate_results={})
            return compute(result)

        parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names[:-1]]
        parameters.append(inspect.Parameter("targets", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None))
        eval_fn.__signature__ = inspect.Signature(parameters)  # MLflow reads this to pick the columns
        return eval_fn


def _row_metric(column: str, justification: str | None, *, needs_judge: bool = True) -> Callable[[SummarizationResult], MetricValue]:
    def compute(result: SummarizationResult) -> MetricValue:
        rows = result.rows
        justifications = None
        if justification is not None and needs_judge:  # a failed row's justification is its "Not judged: <error>" reasoning
            chosen = rows["reasoning"].where(rows["error"] != "", rows[justification].fillna(""))
            justifications = chosen.tolist()
        elif justification is not None:  # the grounding check needs no judge: its reasoning stands on every row
            justifications = rows[justification].fillna("").tolist()
        aggregates = _aggregates(result, column)  # e.g. coverage's mean and interval; {} for claim_count
        return MetricValue(scores=[_cell(v) for v in rows[column]], justifications=justifications, aggregate_results=aggregates)

    return compute


def _aggregates(result: SummarizationResult, name: str) -> dict[str, float]:
    """The aggregate results MLflow logs for the metric ``name``: ``alignment`` -> {alignment}; a group
    (``defect_rate``, ``judge``) -> {contradiction, contradiction_ci_low, ...}, logged as ``defect_rate/contradiction``,
    ``defect_rate/contradiction_ci_low``, ... (MLflow logs a key equal to the metric's name as the name itself and
    any other key as ``<name>/<key>``)."""
    if METRICS.aggregate(name) is None and name not in result.metrics:  # a group: defect_rate, judge
        aggregates = {key.removeprefix(f"{name}/"): value for key, value in result.metrics.items() if key.startswith(f"{name}/")}
    else:
        aggregates = {name: result.metrics[name]} if name in result.metrics else {}
    return {k: v for k, v in aggregates.items() if v is not None and math.isfinite(v)}


def _aggregate_metric(name: str) -> Callable[[SummarizationResult], MetricValue]:
    return lambda result: MetricValue(aggregate_results=_aggregates(result, name))


def summarization_metrics(
    judge: Judge | None,
    *,
    coverage: bool = True,
    grounding: bool = True,
    traditional: bool = True,
    ter: bool = False,
    source_col: str = "inputs",
    id_col: str | None = None,
    category_col: str | None = None,
    max_source_tokens: int | None = None,
    progress: bool | None = None,
) -> list[EvaluationMetric]:
    """``EvaluationMetric``s for ``mlflow.models.evaluate(..., extra_metrics=...)``, all sharing one judgement per row.

    ``source_col`` names the data column holding the source articles (or map it with
    ``evaluator_config={"col_mapping": {"inputs": "article"}}``); ``id_col`` (row ids, for comparing runs row by
    row; default: the row position) and ``category_col`` (for per-category plots) are optional columns.
    With ``targets``, ``traditional=True`` adds ROUGE, BLEU and chrF per row and as run metrics. The run also gets
    the tables, report, signature and plots described in ``run_logging``. ``grounding=True`` adds the model-free
    check (``grounding``, ``grounded``, ``grounded_rate``, and ``suspect_verdicts`` / ``judge/suspect_rate`` on
    the judge's verdicts); ``judge=None`` logs the grounding check (and the reference metrics) with no judge call.
    """
    shared = SharedJudgement(judge, coverage=coverage, grounding=grounding, ter=ter, max_source_tokens=max_source_tokens, progress=progress)
    adapter = _ClassicAdapter(shared, traditional=traditional, id_col=id_col, category_col=category_col)
    families = (
        *row_families(judged=judge is not None, coverage=coverage, grounding=grounding), *(("reference",) if traditional else ()), "length"
    )
    metrics = []
    for spec in METRICS.rows(*families):
        needs_judge = spec.family != "grounding"
        compute = _row_metric(spec.name, spec.reasoning, needs_judge=needs_judge) if spec.row_value else _traditional_metric(spec.name)
        logs = not metrics  # the first metric logs the run's tables, report and plots
        metrics.append(make_metric(eval_fn=adapter.eval_fn(compute, source_col, metric=spec.name, logs=logs), greater_is_better=spec.greater_is_better, name=spec.name))
    groups = {_USAGE_GROUP}
    for spec in METRICS.aggregates(*families):
        if "/" in spec.name:  # e.g. defect_rate/contradiction: logged through its group's metric
            groups.add(spec.name.split("/")[0])
            continue
        # One metric per logged name: MLflow would log an aggregate key other than the metric's name as
        # "<name>/<key>", a name the file store cannot hold beside "<name>" itself.
        for logged in (spec.name, *(interval_names(spec.name) if spec.has_interval else ())):
            if logged == spec.name and METRICS.row(spec.name) is not None:
                continue  # the row metric of the same name carries the aggregate (coverage, rouge1, ...)
            better = logged.endswith("_n") or spec.greater_is_better
            metrics.append(make_metric(eval_fn=adapter.eval_fn(_aggregate_metric(logged), source_col, metric=logged), greater_is_better=better, name=logged))
    for group in sorted(groups):
        metrics.append(make_metric(eval_fn=adapter.eval_fn(_aggregate_metric(group), source_col, metric=group), greater_is_better=False, name=group))
    return metrics


def _traditional_metric(column: str) -> Callable[[SummarizationResult], MetricValue]:
    def compute(result: SummarizationResult) -> MetricValue:
        if column not in result.rows:  # no targets given: reference metrics cannot be computed
            return MetricValue(aggregate_results={})
        return MetricValue(scores=[_cell(v) for v in result.rows[column]], aggregate_results=_aggregates(result, column))

    return compute
