"""Custom metrics for ``mlflow.models.evaluate`` (and its deprecated alias ``mlflow.evaluate``): a thin adapter over
one judged result.

    metrics = summarization_metrics(judge, source_col="article")
    mlflow.models.evaluate(data=df, predictions="summary", targets="reference", extra_metrics=metrics)

MLflow calls every metric function on its own. The metrics of one ``summarization_metrics`` call share one adapter,
which answers each call from the result of the dataset it was handed (keyed by its content): the rows are validated
and judged once, and the adapter logs the run's tables, report and plots once (``run_logging.log_result``). Which
calls are on the evaluation's rows MLflow itself says: ``mlflow.models.evaluate`` logs the data it evaluates as the
run's dataset input, with its ``num_rows``, before any metric runs. A call on another number of rows (MLflow's test
of every metric on the first row) gets well-formed empty values and costs nothing; data MLflow logs no dataset for
is judged as each call gives it (each distinct dataset once).

Per-row values appear in ``eval_results_table`` as ``<name>/score`` with the judge's reasoning in
``<name>/justification``; a row the judge failed on has an empty score and the error as justification. MLflow logs
the run metrics from the metrics' aggregates, under exactly the names of ``docs/metrics.md`` (``alignment``,
``alignment_ci_low``, ``alignment_n``, ``defect_rate/contradiction``, ``judge/calls``, ...): the headline figures
of ``summarization.metrics.run_metrics`` by default, every aggregate with ``all_metrics=True``. The run's report
(``mgm/report.json``) holds every figure either way.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import threading
from collections.abc import Callable
from typing import Any

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.metrics import MetricValue, make_metric
from mlflow.models import EvaluationMetric
from mlflow.tracking import MlflowClient

from ..grounding.model import calibration_note
from ..judge import Judge
from ..stats import StatisticsOptions
from ..summarization.api import build_result
from ..summarization.judging import judge_rows, prepare_rows
from ..summarization.metrics import METRICS, RUN_USAGE, MetricSpec, run_metrics
from ..summarization.options import JudgingOptions, resolve
from ..summarization.result import SummarizationResult
from ..summarization.scoring import interval_names, row_families
from .genai import category_text
from .run_logging import log_result


def _cell(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return float(value)


def _content_key(columns: dict[str, Any]) -> str:
    """What a call was handed, by value: MLflow passes fresh copies of the columns to every metric."""
    digest = hashlib.sha256()
    for name in sorted(columns):
        values = columns[name]
        digest.update(repr((name, None if values is None else list(values))).encode("utf-8"))
    return digest.hexdigest()


def evaluated_sizes(run_id: str | None) -> set[int]:
    """The row counts of the datasets logged as the run's inputs: what ``mlflow.models.evaluate`` evaluates, logged
    before any metric runs. Empty when there is no run or no dataset with a row count."""
    if run_id is None:
        return set()
    sizes = set()
    for dataset_input in MlflowClient().get_run(run_id).inputs.dataset_inputs:
        try:
            rows = json.loads(dataset_input.dataset.profile or "{}").get("num_rows")
        except (ValueError, AttributeError):  # a profile that is not a JSON object says no row count
            continue
        if isinstance(rows, int):
            sizes.add(rows)
    return sizes


class _ClassicAdapter:
    """The judged result of each dataset MLflow hands the metrics, computed once, for the run being evaluated.

    The state is this object's, kept per run (the run active in the calling thread): runs evaluated at once in several
    threads with the same metrics each read their own answers (one reset whenever the run changed made every metric
    call judge its rows again); a run's answers are let go once it is over and a call comes from another run."""

    def __init__(self, judge: Judge | None, *, options: JudgingOptions, statistics: StatisticsOptions, progress: bool | None,
                 traditional: bool, id_col: str | None, category_col: str | None, all_metrics: bool):
        self.judge, self.traditional, self.all_metrics = judge, traditional, all_metrics
        self.id_col, self.category_col, self.progress = id_col, category_col, progress
        self.options, self.statistics = options.for_judge(judge), statistics  # what judge_rows and build_result take
        self._lock = threading.Lock()
        # run id -> content key -> the result, None (not the evaluation's rows) or the error its rows raised
        self._runs: dict[str | None, dict[str, SummarizationResult | Exception | None]] = {}

    def answer(self, columns: dict[str, Any]) -> SummarizationResult | None:
        """The result for the dataset of this call, or None when it is not the evaluation's rows."""
        if len(columns["predictions"]) == 0:
            raise ValueError("the evaluation data has no rows: nothing to judge (is the DataFrame empty?)")
        run = mlflow.active_run()
        run_id = run.info.run_id if run else None
        key = _content_key(columns)
        with self._lock:  # one computation per dataset, even when metrics are called from several threads
            answers = self._runs.get(run_id)
            if answers is None:  # a run met for the first time: the answers of runs that are over are let go
                self._runs = {other: kept for other, kept in self._runs.items() if other is not None and _running(other)}
                answers = self._runs[run_id] = {}
            if key not in answers:
                answers[key] = self._compute(run_id, columns)
            answer = answers[key]
        if isinstance(answer, Exception):  # the rows were refused once: every metric says the same
            raise answer
        return answer

    def _compute(self, run_id: str | None, columns: dict[str, Any]) -> SummarizationResult | Exception | None:
        predictions = columns["predictions"]
        sizes = evaluated_sizes(run_id)
        if sizes and len(predictions) not in sizes:
            return None
        ids = columns.get(self.id_col) if self.id_col else None
        categories = columns.get(self.category_col) if self.category_col else None
        targets = columns.get("targets")
        try:
            if categories is not None:  # text, as on every path: a list or a dict once failed the run's tables at the end
                categories = [_category(position, value, self.category_col) for position, value in enumerate(categories)]
            rows = prepare_rows(list(columns["source"]), list(predictions), list(ids) if ids is not None else None)
            result = build_result(
                rows, judge_rows(rows, self.judge, self.options, progress=self.progress), judge=self.judge, options=self.options,
                statistics=self.statistics, references=list(targets) if (self.traditional and targets is not None) else None,
                extra_columns={"category": list(categories)} if categories is not None else None,
            )
            if run_id is not None:
                log_result(result, run_id=run_id)
        except Exception as error:  # kept: the next metric raises it without validating or judging again
            return error
        return result

    def eval_fn(self, compute: Callable[[SummarizationResult], MetricValue], source_col: str, *, rows: bool) -> Callable[..., MetricValue]:
        """A function whose parameters MLflow maps to columns: predictions, the source column, the id and category
        columns when named, and targets."""
        names = ["predictions", source_col, *(c for c in (self.id_col, self.category_col) if c), "targets"]

        def eval_fn(*args: Any, **kwargs: Any) -> MetricValue:
            given = {**dict(zip(names, args)), **kwargs}  # MLflow passes them positionally, in signature order
            columns = {name: given.get(name) for name in names if name != source_col}
            columns["source"] = given[source_col]
            result = self.answer(columns)
            if result is None:  # not the evaluation's rows: well-formed, empty, never logged
                count = len(columns["predictions"])
                return MetricValue(scores=[None] * count, aggregate_results={}) if rows else MetricValue(aggregate_results={})
            return compute(result)

        parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names[:-1]]
        parameters.append(inspect.Parameter("targets", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None))
        eval_fn.__signature__ = inspect.Signature(parameters)  # MLflow reads this to pick the columns
        return eval_fn

    def aggregates(self, result: SummarizationResult, name: str) -> dict[str, float]:
        """The run metrics the metric ``name`` gives MLflow: ``{name: value}``, logged as ``name``, and for a group
        (``defect_rate``, ``judge``) ``{key: value}`` for each ``name/key``, which MLflow logs as ``name/key``."""
        chosen = run_metrics(result.metrics, all_metrics=self.all_metrics)
        found = {key.removeprefix(f"{name}/"): value for key, value in chosen.items() if key.startswith(f"{name}/")}
        if name in chosen:
            found[name] = chosen[name]
        return {k: v for k, v in found.items() if v is not None and math.isfinite(v)}


def _running(run_id: str) -> bool:
    """Is ``run_id`` still running (another thread's evaluation may be reading its answers)?"""
    try:
        return MlflowClient().get_run(run_id).info.status == "RUNNING"
    except MlflowException:  # a run the store no longer has
        return False


def _category(position: int, value: Any, column: str) -> str | None:
    """Row ``position``'s category as every path stores it (``genai.category_text``), or a ``ValueError`` naming it."""
    try:
        return category_text(value, column, where=f"column {column!r}")
    except ValueError as error:
        raise ValueError(f"row {position}: {error}") from None


def _row_metric(adapter: _ClassicAdapter, spec: MetricSpec) -> Callable[[SummarizationResult], MetricValue]:
    def compute(result: SummarizationResult) -> MetricValue:
        rows = result.rows
        aggregates = adapter.aggregates(result, spec.name)  # e.g. coverage's mean; {} for claim_count
        if spec.name not in rows:  # a reference metric without targets
            return MetricValue(aggregate_results=aggregates)
        justifications = None
        if spec.row_value is not None and spec.reasoning is not None and spec.family != "grounding":
            # a failed row's justification is its "Not judged: <error>" reasoning
            justifications = rows["reasoning"].where(rows["error"] != "", rows[spec.reasoning].fillna("")).tolist()
        elif spec.row_value is not None and spec.reasoning is not None:  # the grounding check needs no judge
            note = calibration_note()  # what a scored row's number holds on, as its card says
            justifications = [f"{reason}\n{note}" if pd.notna(value) else reason
                              for reason, value in zip(rows[spec.reasoning].fillna(""), rows[spec.name])]
        return MetricValue(scores=[_cell(v) for v in rows[spec.name]], justifications=justifications, aggregate_results=aggregates)

    return compute


def _aggregate_metric(adapter: _ClassicAdapter, name: str) -> Callable[[SummarizationResult], MetricValue]:
    return lambda result: MetricValue(aggregate_results=adapter.aggregates(result, name))


def _run_metric_names(families: tuple[str, ...], *, judged: bool, all_metrics: bool) -> dict[str, bool]:
    """The run metrics these families can give, each with whether greater is better (an ``_n`` counts rows)."""
    names: dict[str, bool] = {name: False for name in RUN_USAGE} if judged else {}
    for spec in METRICS.aggregates(*families):
        for name in (spec.name, *(interval_names(spec.name) if spec.has_interval else ())):
            names[name] = name.endswith("_n") or spec.greater_is_better
    return {name: names[name] for name in run_metrics(names, all_metrics=all_metrics)}


def summarization_metrics(
    judge: Judge | None,
    *,
    options: JudgingOptions | None = None,
    statistics: StatisticsOptions | None = None,
    traditional: bool = True,
    source_col: str = "inputs",
    id_col: str | None = None,
    category_col: str | None = None,
    progress: bool | None = None,
    all_metrics: bool = False,
    **keywords: Any,
) -> list[EvaluationMetric]:
    """``EvaluationMetric``s for ``mlflow.models.evaluate(..., extra_metrics=...)``, all answered from one judged
    result per evaluation.

    ``source_col`` names the data column holding the source articles (or map it with
    ``evaluator_config={"col_mapping": {"inputs": "article"}}``); ``id_col`` (row ids, for comparing runs row by
    row; default: the row position) and ``category_col`` (for per-category plots) are optional columns.
    What is judged and how the intervals are computed are ``judge_summaries``': ``options`` (a
    ``summarization.options.JudgingOptions``) and ``statistics`` (a ``stats.StatisticsOptions``), or their fields
    as keywords (``coverage=False``, ``ter=True``). With ``targets``, ``traditional=True`` adds ROUGE, BLEU and
    chrF (and TER with ``ter=True``) per row and to the report. The run also gets the tables, report, signature and
    plots described in ``run_logging``. ``judge=None`` logs the grounding check (and the reference metrics) with no
    judge call. The run metrics are the headline figures with their intervals
    and n, and the judge's calls and cost (``summarization.metrics.run_metrics``); ``all_metrics=True`` logs every
    aggregate. Every metric is also a per-row column of ``eval_results_table``.
    """
    options, statistics = resolve("summarization_metrics", keywords, options, statistics)
    adapter = _ClassicAdapter(
        judge, options=options, statistics=statistics, traditional=traditional, id_col=id_col, category_col=category_col,
        all_metrics=all_metrics, progress=progress,
    )
    families = (
        *row_families(judged=judge is not None, coverage=options.coverage, grounding=options.grounding,
                      stability=judge is not None and options.method.repeated, order=judge is not None and options.method.order_checked),
        *(("reference",) if traditional else ()), "length",
    )
    metrics = []
    row_names = set()
    for spec in METRICS.rows(*families):
        if spec.name == "ter" and not options.ter:
            continue
        row_names.add(spec.name)
        eval_fn = adapter.eval_fn(_row_metric(adapter, spec), source_col, rows=True)
        metrics.append(make_metric(eval_fn=eval_fn, greater_is_better=spec.greater_is_better, name=spec.name))
    logged = _run_metric_names(families, judged=judge is not None, all_metrics=all_metrics)
    # One metric per logged name: MLflow would log an aggregate key other than the metric's name as
    # "<name>/<key>", a name the file store cannot hold beside "<name>" itself. A name with a "/" goes through
    # its group's metric; a row metric of the same name carries its aggregate (coverage, rougeL, ...).
    groups = {}
    for name, better in logged.items():
        if "/" in name:
            groups.setdefault(name.split("/")[0], False)
        elif name not in row_names:
            metrics.append(make_metric(eval_fn=adapter.eval_fn(_aggregate_metric(adapter, name), source_col, rows=False), greater_is_better=better, name=name))
    for group in sorted(groups):
        metrics.append(make_metric(eval_fn=adapter.eval_fn(_aggregate_metric(adapter, group), source_col, rows=False), greater_is_better=False, name=group))
    return metrics
