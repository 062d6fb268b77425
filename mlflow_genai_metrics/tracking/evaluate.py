"""``evaluate_summaries``: judge every row once, run ``mlflow.genai.evaluate``, log the run's results once.

    from mlflow_genai_metrics import Judge, evaluate_summaries
    from mlflow_genai_metrics.tracking import ClaimAlignment, KeyPointCoverage

    judge = Judge("gpt-4o-mini")
    evaluation = evaluate_summaries(data, judges=[ClaimAlignment(judge), KeyPointCoverage(judge)])
    evaluation.metrics["alignment"], evaluation.metrics["alignment_ci_low"], evaluation.run_id

Whatever subset of the judges is chosen, the run gets every result the rows give (``alignment``, the defect rates,
richness, coverage when ``KeyPointCoverage`` is among them, the grounding check, ROUGE/BLEU/chrF when the rows'
``expectations`` hold a reference; each with its interval and n; the judge's usage; tables and plots), logged
once, and MLflow logs no ``<judge>/mean`` beside them. ``log_summary_results(run_id)`` completes a run that plain
``mlflow.genai.evaluate`` left without them (MLflow skips its aggregation hook when no row has a value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd

from ..summarization.result import SummarizationResult
from ..summarization.warnings import RunWarning
from .genai import finish_run, logged_result, trace_rows
from .judge_sets import shared_pipeline
from .judges import ClaimAlignment, Grounding, KeyPointCoverage, _SummaryScorer

__all__ = ["SummaryEvaluation", "evaluate_summaries", "log_summary_results"]


@dataclass(frozen=True)
class SummaryEvaluation:
    """An evaluation run: its id, its result (per-row tables, every aggregate with its interval, the signature) and
    MLflow's own ``EvaluationResult`` (``result_df``: one feedback per judge per row)."""

    run_id: str
    result: SummarizationResult
    mlflow_result: Any

    @property
    def metrics(self) -> dict[str, float]:
        """Every number logged to the run, under its name."""
        return self.result.metrics

    @property
    def warnings(self) -> list[RunWarning]:
        """The run's warnings (also its ``mgm.warning.*`` tags), e.g. a judge that verified almost nothing."""
        return self.result.warnings

    @property
    def result_df(self) -> pd.DataFrame | None:
        return self.mlflow_result.result_df


def _records(data: Any) -> list[dict[str, Any]]:
    """The rows of ``data`` as MLflow reads them: a list of dicts, a DataFrame, or an MLflow evaluation dataset."""
    if hasattr(data, "to_df") and not isinstance(data, pd.DataFrame):
        data = data.to_df()
    if isinstance(data, pd.DataFrame):
        return data.to_dict(orient="records")
    if isinstance(data, Sequence) and not isinstance(data, str) and all(isinstance(r, dict) for r in data):
        return list(data)
    raise TypeError(f"data must be a list of dicts, a pandas DataFrame or an MLflow evaluation dataset, not {type(data).__name__}")


def evaluate_summaries(data: Any, judges: Sequence[Any] | None = None, *, predict_fn: Any = None) -> SummaryEvaluation:
    """Judge the summaries of ``data`` and log one MLflow evaluation run (the active run, else a new one).

    ``data``: what ``mlflow.genai.evaluate`` takes (a list of ``{"inputs": {"text": ..., "id": ...}, "outputs":
    summary, "expectations": {"expected_response": reference}}``, a DataFrame of those columns, an MLflow evaluation
    dataset). ``judges``: any of ``ClaimAlignment``, ``KeyPointCoverage``, ``Grounding`` (default: all three, the
    judge from the environment), sharing one judge's settings; other MLflow scorers are passed on as they are.

    The judge is checked first (its model listing: a wrong model, a refused key or an unreachable endpoint raises
    ``JudgeConfigError`` in seconds, before any run is started), then every row with a summary is judged in one
    batch, then ``mlflow.genai.evaluate`` runs with judges that read those judgements (one feedback per judge per
    row; rows ``predict_fn`` summarises are judged as they come), and the run's results are logged once.
    """
    judges = list(judges) if judges is not None else [ClaimAlignment(), KeyPointCoverage(), Grounding()]
    ours = [j for j in judges if isinstance(j, _SummaryScorer)]
    if not ours:
        raise ValueError("evaluate_summaries needs at least one of ClaimAlignment, KeyPointCoverage or Grounding in judges")
    pipeline = shared_pipeline(ours)
    records = _records(data)
    if not records:
        raise ValueError("data has no rows: nothing to evaluate")
    pipeline.check()
    ready = [pipeline.parse(r.get("inputs"), r.get("outputs"), r.get("expectations")) for r in records if "outputs" in r and predict_fn is None]
    if ready:
        pipeline.judge_all(ready)
    scorers = [j.bound_to(pipeline, aggregations=[]) if isinstance(j, _SummaryScorer) else j for j in judges]
    evaluation = mlflow.genai.evaluate(data=data, predict_fn=predict_fn, scorers=scorers)
    result = pipeline.finish(evaluation.run_id)
    if result is None:
        raise RuntimeError(f"no row of run {evaluation.run_id} reached the judges (see the run's traces for why)")
    return SummaryEvaluation(run_id=evaluation.run_id, result=result, mlflow_result=evaluation)


def log_summary_results(run_id: str, judges: Sequence[_SummaryScorer] | None = None) -> SummarizationResult:
    """Log the run-level results of an evaluation run that plain ``mlflow.genai.evaluate`` left without them
    (MLflow calls no aggregation hook when no row has a value, e.g. every row failed, or for ``Grounding`` alone).

    Without ``judges``, the rows the judges scored in this process make the results. With ``judges``, the run's
    traces are read back and judged by them (the judge's cache answers what was asked before): the way from another
    process. A run whose results are logged already is returned as it is.
    """
    logged = logged_result(run_id)
    if logged is not None:
        return logged
    if not judges:
        result = finish_run(run_id)
        if result is None:
            raise ValueError(f"no evaluation of run {run_id} ran in this process: pass judges=[...] to judge its traces again")
        return result
    pipeline = shared_pipeline(list(judges))
    traces = mlflow.search_traces(run_id=run_id, return_type="list")
    rows, unusable = trace_rows(traces, pipeline)
    if not rows:
        raise ValueError(f"run {run_id} has no trace with a source and a summary to judge ({len(unusable)} traces that are not)")
    pipeline.judge_all(rows)
    pipeline.remember(rows, run_id)
    return pipeline.finish(run_id)
