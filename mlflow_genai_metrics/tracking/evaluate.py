"""``evaluate_summaries``: judge every row once, run ``mlflow.genai.evaluate``, log the run's results once.

    from mlflow_genai_metrics import Judge, evaluate_summaries
    from mlflow_genai_metrics.tracking import ClaimAlignment, KeyPointCoverage

    judge = Judge("gpt-4o-mini")
    evaluation = evaluate_summaries(data, judges=[ClaimAlignment(judge), KeyPointCoverage(judge)])
    evaluation.metrics["alignment"], evaluation.metrics["alignment_ci_low"], evaluation.run_id

Whatever subset of the judges is chosen, the run gets every result the rows give (``alignment``, the defect rates,
richness, coverage when ``KeyPointCoverage`` is among them, the grounding check, ROUGE/BLEU/chrF when the rows'
``expectations`` hold a reference; each with its interval and n; the judge's usage; tables and plots), logged
once, and MLflow logs no ``<judge>/mean`` beside them. Plain ``mlflow.genai.evaluate`` with the same judges gives
the cards and MLflow's own aggregates; ``log_results(run_id, judges)`` (``results``) logs its full report afterwards,
from the run's traces, through ``log_summary_results`` here.

The run's numbers are those of the rows of *this* call: the rows its judges were handed (every call, whether or
not MLflow could store its trace), which must be the rows of ``data``, the rows of MLflow's ``result_df`` and the
run's evaluated traces; when they are not, ``RunRowsMismatch`` says so with the counts (and so does the run's
``mgm.error`` tag) instead of logging a smaller n. One MLflow evaluation runs at a time in a process, with
``EVALUATION_WORKERS`` threads (MLflow's ``MLFLOW_GENAI_EVAL_MAX_WORKERS``, unless it is set): MLflow files each
trace under the run started last in the process, so evaluations at once mix their Traces tabs, and its default of
10 predict and 10 score threads runs out of the SQLite store's 15 connections, leaving rows without a trace. The
judging before it (all the judge's calls) is not held back: evaluations in several threads judge at once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.environment_variables import MLFLOW_GENAI_EVAL_MAX_WORKERS
from mlflow.tracking import MlflowClient

from ..judge import Judge
from ..stats import StatisticsOptions
from ..summarization.options import resolve
from ..summarization.result import SummarizationResult
from ..summarization.warnings import RunWarning
from .genai import evaluated_row_count, trace_rows, unique_ids
from .judge_sets import rewrite_scorers, shared_pipeline
from .judges import ClaimAlignment, Grounding, KeyPointCoverage, _SummaryScorer
from .run_logging import SIGNATURE_TAG, log_result
from .scored_rows import ScoredRows, fail, settle

# MLflow's predict and score threads for evaluate_summaries' evaluation: 5 runs of 30 rows in a row all complete on
# a SQLite store with 4 (9 connections at most), where MLflow's default of 10 loses rows' traces in most runs.
EVALUATION_WORKERS = 4
# One MLflow evaluation at a time in this process (a lock, holding nothing): see the module's docstring.
_ONE_EVALUATION = threading.Lock()


class RunRowsMismatch(RuntimeError):
    """The rows an evaluation logged would not be the rows it evaluated: the message gives both counts, ``run_id``
    the run (tagged ``mgm.error`` with the same sentence, and given no figures)."""

    def __init__(self, message: str, run_id: str):
        super().__init__(message)
        self.run_id = run_id


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


def parsed_rows(pipeline: Any, records: Sequence[dict[str, Any]]) -> list[Any]:
    """Each record as ``pipeline`` reads it; bad rows refused together before any judge call (``ValueError`` naming
    each row by its position and id, and what is wrong with it)."""
    parsed, bad = [], []
    for position, record in enumerate(records):
        try:
            parsed.append(pipeline.parse(record.get("inputs"), record.get("outputs"), record.get("expectations")))
        except ValueError as error:
            inputs = record.get("inputs")
            row_id = inputs.get(pipeline.keys.id) if isinstance(inputs, dict) else None
            bad.append(f"row {position}{f' (id {row_id!r})' if row_id is not None else ''}: {error}")
    if bad:
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise ValueError("cannot judge these rows:\n  " + "\n  ".join(bad[:20]) + more)
    return parsed


def evaluate_summaries(
    data: Any, judges: Sequence[Any] | None = None, *, predict_fn: Any = None, model_id: str | None = None, all_metrics: bool = False,
    ter: bool = False, statistics: StatisticsOptions | None = None, **keywords: Any,
) -> SummaryEvaluation:
    """Judge the summaries of ``data`` and log one MLflow evaluation run (the active run, else a new one).

    ``data``: what ``mlflow.genai.evaluate`` takes (a list of ``{"inputs": {"text": ..., "id": ...}, "outputs":
    summary, "expectations": {"expected_response": reference}}``, a DataFrame of those columns, an MLflow evaluation
    dataset). ``judges``: any of ``ClaimAlignment``, ``KeyPointCoverage``, ``Grounding`` (default: all three, the
    judge from the environment), sharing one judge's settings; other MLflow scorers are passed on as they are.

    Rows whose ids repeat are refused first (``ValueError`` naming them, before any judge call or run; a row without
    an id is known by its source's hash, so two rows of one article need ids). The judge is checked next (its model
    listing: a wrong model, a refused key or an unreachable endpoint raises ``JudgeConfigError`` in seconds, before
    any run is started), then every row with a summary is judged in one batch, then ``mlflow.genai.evaluate`` runs
    with judges that read those judgements (one feedback per judge per row; rows ``predict_fn`` summarises are
    judged as they come), and the run's results are logged once.

    ``model_id``: the logged model the summaries are from (``SummarizerModel.log(...).model_id``), linked to the run
    as MLflow links an evaluated model. ``all_metrics``: log every figure as a run metric, not only the headline
    ones (``summarization.metrics.run_metrics``; the report table holds them all either way). ``ter``: TER against
    the references too (sacreBLEU; about 0.8 s per row). ``statistics`` (a ``stats.StatisticsOptions``, or its
    fields as keywords: ``resamples=200``) sets the intervals. What else is judged the judges say (coverage with
    ``KeyPointCoverage``, ``max_source_tokens`` theirs).
    """
    statistics = resolve("evaluate_summaries", keywords, statistics=statistics, judging=False).statistics
    judges = list(judges) if judges is not None else [ClaimAlignment(), KeyPointCoverage(), Grounding()]
    ours = [j for j in judges if isinstance(j, _SummaryScorer)]
    if not ours:
        raise ValueError("evaluate_summaries needs at least one of ClaimAlignment, KeyPointCoverage or Grounding in judges")
    pipeline = shared_pipeline(ours, ter=ter, statistics=statistics)
    records = _records(data)
    if not records:
        raise ValueError("data has no rows: nothing to evaluate")
    parsed = parsed_rows(pipeline, records)
    unique_ids(parsed, id_key=pipeline.keys.id)
    pipeline.check()
    ready = [p for p, r in zip(parsed, records) if "outputs" in r and predict_fn is None]
    if ready:
        pipeline.judge_all(ready)
    needs = frozenset().union(*(j.needs for j in ours))
    scored = ScoredRows(pipeline.judge, needs=needs, keys=pipeline.keys, pipeline=pipeline, all_metrics=all_metrics)
    scorers = [j.bound_to(scored, aggregations=[]) if isinstance(j, _SummaryScorer) else j for j in judges]
    with _ONE_EVALUATION, _workers(EVALUATION_WORKERS):
        evaluation = mlflow.genai.evaluate(data=data, predict_fn=predict_fn, scorers=scorers, model_id=model_id)
    # The run's result is that of the rows the judges were handed, once they are the rows of ``data``, of MLflow's
    # ``result_df`` and of the run's traces; else the run is tagged and RunRowsMismatch says why.
    listed = len(evaluation.result_df) if evaluation.result_df is not None else 0
    outcome = settle(scored, evaluation.run_id, expected=(len(records), listed))
    if outcome.result is None:
        raise RunRowsMismatch(outcome.error or "", evaluation.run_id)
    return SummaryEvaluation(run_id=evaluation.run_id, result=outcome.result, mlflow_result=evaluation)


def evaluate_rewrites(data: Any, judges: Sequence[Any] | None = None, **keywords: Any) -> SummaryEvaluation:
    """``evaluate_summaries`` for rewrites: ``data``'s rows are ``{"inputs": {"input": text, "instruction": what was
    asked, "id": ...}, "outputs": rewrite}``, ``judges`` default ``rewrite_scorers(Judge())``. One trace per row with
    its claim-alignment, coverage and instruction cards; the run's figures are ``judge_rewrites``' (no new facts,
    nothing lost, ``instruction_following``), each row paired across runs by its input and its instruction."""
    return evaluate_summaries(data, judges if judges is not None else rewrite_scorers(Judge()), **keywords)


@contextlib.contextmanager
def _workers(count: int) -> Iterator[None]:
    """MLflow's evaluation threads for the block (unless the user set them), restored after it."""
    if MLFLOW_GENAI_EVAL_MAX_WORKERS.is_set():
        yield
        return
    os.environ[MLFLOW_GENAI_EVAL_MAX_WORKERS.name] = str(count)
    try:
        yield
    finally:
        os.environ.pop(MLFLOW_GENAI_EVAL_MAX_WORKERS.name, None)


def log_summary_results(run_id: str, judges: Sequence[_SummaryScorer], data: Any = None) -> SummarizationResult:
    """``log_results`` for summary scorers: the run's traces judged again by ``judges``' judge, the full report logged."""
    judges = list(judges or [])
    if not judges or not all(isinstance(j, _SummaryScorer) for j in judges):
        raise ValueError("log_results needs judges=[...]: the scorers the evaluation ran with (ClaimAlignment, KeyPointCoverage, "
                         "Grounding; or the answers' judges), whose judge judges the run's traces again")
    refuse_a_run_with_results(run_id)
    pipeline = shared_pipeline(judges)
    rows = run_trace_rows(run_id, pipeline, "a source and a summary", data)
    said_on_the_run(run_id, unique_ids, rows, id_key=pipeline.keys.id)
    pipeline.judge_all(rows)
    result = pipeline.result(rows)
    log_result(result, run_id=run_id, log_metrics=True)
    return result


def said_on_the_run(run_id: str, check: Any, *args: Any, **kwargs: Any) -> None:
    """``check(*args, **kwargs)``; its ``ValueError`` (rows whose ids repeat) also goes on the run, as ``mgm.error``."""
    try:
        check(*args, **kwargs)
    except ValueError as error:
        fail(run_id, str(error))
        raise


def refuse_a_run_with_results(run_id: str) -> None:
    if SIGNATURE_TAG in MlflowClient().get_run(run_id).data.tags:  # params are logged once: another result cannot be
        raise ValueError(f"run {run_id} holds the results of an evaluation already; evaluate again into a new run")


def run_trace_rows(run_id: str, pipeline: Any, holding: str, data: Any = None) -> list[Any]:
    """The rows of ``run_id``'s traces as ``pipeline`` reads them, once MLflow's trace writers are done; exactly the
    rows MLflow evaluated, else ``RunRowsMismatch`` (and the run's ``mgm.error`` tag) with both counts, and with
    ``data`` (what was evaluated) the ids of the rows MLflow did not store."""
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(run_id=run_id, return_type="list")
    rows, unusable = trace_rows(traces, pipeline)
    if not rows:
        raise ValueError(f"run {run_id} has no trace with {holding} to judge ({len(unusable)} traces that are not)")
    evaluated = evaluated_row_count(run_id)  # what MLflow says it evaluated: the rows logged must be those
    if data is not None:
        given = [str(pipeline.parse(r.get("inputs"), r.get("outputs"), r.get("expectations")).row.id) for r in _records(data)]
        evaluated = len(given)
        stored = {str(row.row.id) for row in rows}
        lost = [row_id for row_id in given if row_id not in stored]
    if len(rows) != (len(traces) if evaluated is None else evaluated):
        named = f" (not stored: ids {', '.join(lost[:20])}{' ...' if len(lost) > 20 else ''})" if data is not None and lost else ""
        raise RunRowsMismatch(fail(run_id, (
            f"the run evaluated {'its' if evaluated is None else evaluated} rows, {len(traces)} of their traces can be read "
            f"back{named} and {len(rows)} of those hold {holding}"
            + (f" (not: {', '.join(unusable[:5])}{', ...' if len(unusable) > 5 else ''})" if unusable else "")
            + "; evaluate the data again into a new run")), run_id)
    return rows
