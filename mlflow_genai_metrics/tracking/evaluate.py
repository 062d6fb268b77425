"""``evaluate``: the one door into a run for every task: judge every row once, run ``mlflow.genai.evaluate``, log
the run's results once; ``log_results``: the full report of a run plain ``mlflow.genai.evaluate`` made.

    from mlflow_genai_metrics import Judge, evaluate_summaries
    from mlflow_genai_metrics.tracking import ClaimAlignment, KeyPointCoverage, evaluate

    judge = Judge("gpt-4o-mini")
    evaluation = evaluate(data, [ClaimAlignment(judge), KeyPointCoverage(judge)])
    evaluation.metrics["alignment"], evaluation.metrics["alignment_ci_low"], evaluation.run_id

The task is the judges' (summaries', rewrites' or answers'; ``evaluate_summaries``, ``evaluate_rewrites`` and
``evaluate_answers`` are ``evaluate`` with that task's default judges). Whatever subset of a task's judges is
chosen, the run gets every result the rows give (for summaries ``alignment``, the defect rates, richness, coverage
when ``KeyPointCoverage`` is among them, the grounding check, ROUGE/BLEU/chrF when the rows' ``expectations`` hold
a reference; each with its interval and n; the judge's usage; tables and plots), logged once, and MLflow logs no
``<judge>/mean`` beside them. Plain ``mlflow.genai.evaluate`` with the same judges gives the cards and MLflow's own
aggregates; ``log_results(run_id, judges)`` logs its full report afterwards, from the run's traces (the judge's
cache answers what was asked), or nothing but the run's ``mgm.error`` tag and ``RunRowsMismatch`` when rows are
missing.

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
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.environment_variables import MLFLOW_GENAI_EVAL_MAX_WORKERS
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient

from ..judge import Judge
from ..stats import StatisticsOptions
from ..summarization.options import resolve
from ..summarization.warnings import RunWarning
from .genai import evaluated_row_count, trace_rows
from .judge_sets import rewrite_scorers
from .judges import ClaimAlignment, Grounding, KeyPointCoverage, _TaskScorer
from .pipeline import TaskPipeline, root_span
from .plain_cards import add_the_cards_spend, say_where_the_cards_and_the_report_differ, the_judges_cards
from .rows import ERROR_TAG, EvaluationRows, fail
from .run_logging import SIGNATURE_TAG, log_result

log = logging.getLogger(__name__)

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
class Evaluation:
    """An evaluation run: its id, its result (the task's: ``SummarizationResult``, ``rag.AnswersResult``; per-row
    tables, every aggregate with its interval, the signature) and MLflow's own ``EvaluationResult`` (``result_df``:
    one feedback per judge per row)."""

    run_id: str
    result: Any
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


def task_of(judges: Sequence[Any], door: str) -> tuple[type[_TaskScorer], list[_TaskScorer]]:
    """The task of ``judges``' own scorers (the base class their ``set_pipeline`` is on) and those scorers: one task
    per evaluation, else ``ValueError``."""
    ours = [j for j in judges if isinstance(j, _TaskScorer)]
    if not ours:
        raise ValueError(f"{door} needs at least one of this package's judges (ClaimAlignment, KeyPointCoverage, Grounding, "
                         "InstructionFollowing; or the answers' judges)")
    of = {id(j): next(c for c in type(j).__mro__ if "set_pipeline" in vars(c)) for j in ours}
    tasks = set(of.values())
    if len(tasks) > 1:  # named by their judges (the task's class is internal: '_SummaryScorer' once said nothing)
        groups = sorted(" + ".join(sorted(j.name for j in ours if of[id(j)] is task)) for task in tasks)
        raise ValueError(f"{door} judges one task at a time; these judges are of {len(tasks)} tasks: {' | '.join(groups)}")
    return tasks.pop(), ours


def record_row(record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A row of ``data`` as MLflow hands it to a scorer: a trace's root span gives the inputs and outputs it lacks."""
    trace = record.get("trace")
    inputs, outputs = record.get("inputs"), record.get("outputs")
    if trace is not None and hasattr(trace, "data"):
        root = root_span(trace)
        if root is not None:
            inputs = root.inputs if inputs is None else inputs
            outputs = root.outputs if outputs is None else outputs
    return inputs, outputs, record.get("expectations"), trace


def parsed_rows(pipeline: TaskPipeline, records: Sequence[dict[str, Any]]) -> list[Any]:
    """Each record as ``pipeline`` reads it; bad rows refused together before any judge call (``ValueError`` naming
    each row by its position and id, and what is wrong with it)."""
    return named_rows(records, lambda record: pipeline.read(*record_row(record)), pipeline.keys.id)


def check_rows(data: Any, judges: Sequence[Any]) -> None:
    """What ``evaluate`` refuses in ``data`` before any judge call (rows it cannot read, repeated ids), for a caller
    that says it before starting a run (the command line: a refusal once left a FAILED run behind at each try)."""
    task, ours = task_of(judges, "evaluate")
    pipeline = task.set_pipeline(ours, statistics=StatisticsOptions())
    pipeline.unique(parsed_rows(pipeline, _records(data)))


def named_rows(records: Sequence[dict[str, Any]], parse: Callable[[dict[str, Any]], Any], id_key: str) -> list[Any]:
    """``parse`` of each record; the records it refuses (``ValueError``) refused together, each named by its position
    and its ``inputs[id_key]`` (``parsed_rows``, and the command line's check of the ids before a run starts)."""
    parsed, bad = [], []
    for position, record in enumerate(records):
        try:
            parsed.append(parse(record))
        except ValueError as error:
            inputs = record.get("inputs")
            row_id = inputs.get(id_key) if isinstance(inputs, dict) else None
            bad.append(f"row {position}{f' (id {row_id!r})' if row_id is not None else ''}: {error}")
    if bad:
        more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise ValueError("cannot judge these rows:\n  " + "\n  ".join(bad[:20]) + more)
    return parsed


def evaluate(
    data: Any, judges: Sequence[Any], *, predict_fn: Any = None, model_id: str | None = None, all_metrics: bool = False,
    ter: bool = False, statistics: StatisticsOptions | None = None, **keywords: Any,
) -> Evaluation:
    """Judge the rows of ``data`` with ``judges`` (one task's, sharing one judge's settings; other MLflow scorers are
    passed on as they are) and log one MLflow evaluation run (the active run, else a new one).

    ``data``: what ``mlflow.genai.evaluate`` takes (a list of ``{"inputs": ..., "outputs": ..., "expectations":
    ...}``, a DataFrame of those columns, an MLflow evaluation dataset, or traces); the task's judges say where the
    texts are. Rows that can be read before the evaluation are checked first: a row that cannot be read, or ids that
    repeat, raise ``ValueError`` naming each (by position and id) before any judge call or run (a row without an id
    is known by its texts' hash, so two rows of one source need ids). The judge is checked next (its model listing:
    a wrong model, a refused key or an unreachable endpoint raises ``JudgeConfigError`` in seconds, before any run),
    then every given row is judged in one batch, then ``mlflow.genai.evaluate`` runs with judges that read those
    judgements (rows ``predict_fn`` produces are judged as they come), and the run's results are logged once.

    ``model_id``: the logged model the outputs are from, linked to the run as MLflow links an evaluated model.
    ``all_metrics``: log every figure as a run metric, not only the headline ones (the report table holds them all
    either way). ``ter``: TER against the references too (summaries; sacreBLEU; about 0.8 s per row).
    ``statistics`` (a ``stats.StatisticsOptions``, or its fields as keywords: ``resamples=200``) sets the intervals.
    """
    statistics = resolve("evaluate", keywords, statistics=statistics, judging=False).statistics
    task, ours = task_of(judges, "evaluate")
    pipeline = task.set_pipeline(ours, statistics=statistics, ter=ter)
    records = _records(data)
    if not records:
        raise ValueError("data has no rows: nothing to evaluate")
    if predict_fn is None or task.inputs_suffice:
        parsed = parsed_rows(pipeline, records)
        pipeline.unique(parsed)
    pipeline.check()
    if predict_fn is None:
        pipeline.judge_all(parsed)
    evaluation_rows = EvaluationRows(pipeline, all_metrics=all_metrics)
    scorers = [j.bound_to(evaluation_rows, aggregations=[]) if isinstance(j, _TaskScorer) else j for j in judges]
    with _ONE_EVALUATION, _workers(EVALUATION_WORKERS):
        evaluation = mlflow.genai.evaluate(data=data, predict_fn=predict_fn, scorers=scorers, model_id=model_id)
    # The run's result is that of the rows the judges were handed, once they are the rows of ``data``, of MLflow's
    # ``result_df`` and of the run's traces; else the run is tagged and RunRowsMismatch says why.
    listed = len(evaluation.result_df) if evaluation.result_df is not None else 0
    outcome = evaluation_rows.settle(evaluation.run_id, expected=(len(records), listed))
    if outcome.result is None:
        raise RunRowsMismatch(outcome.error or "", evaluation.run_id)
    return Evaluation(run_id=evaluation.run_id, result=outcome.result, mlflow_result=evaluation)


def evaluate_summaries(data: Any, judges: Sequence[Any] | None = None, **keywords: Any) -> Evaluation:
    """``evaluate`` for summaries: ``data``'s rows are ``{"inputs": {"text": ..., "id": ...}, "outputs": summary,
    "expectations": {"expected_response": reference}}``, ``judges`` default ``ClaimAlignment``, ``KeyPointCoverage``
    and ``Grounding`` with the judge from the environment."""
    return task_door("evaluate_summaries", data, judges, lambda: [ClaimAlignment(), KeyPointCoverage(), Grounding()], keywords)


def evaluate_rewrites(data: Any, judges: Sequence[Any] | None = None, **keywords: Any) -> Evaluation:
    """``evaluate`` for rewrites: ``data``'s rows are ``{"inputs": {"input": text, "instruction": what was asked,
    "id": ...}, "outputs": rewrite}``, ``judges`` default ``rewrite_scorers(Judge())``. One trace per row with its
    claim-alignment, coverage and instruction cards; the run's figures are ``judge_rewrites``' (no new facts, nothing
    lost, ``instruction_following``), each row paired across runs by its input and its instruction."""
    return task_door("evaluate_rewrites", data, judges, lambda: rewrite_scorers(Judge()), keywords)


_EVALUATE_KEYWORDS = ("predict_fn", "model_id", "all_metrics", "ter", "statistics")


def task_door(door: str, data: Any, judges: Sequence[Any] | None, default: Any, keywords: dict[str, Any]) -> Evaluation:
    """``evaluate`` under a task's own name: its keywords checked first (an unknown one is a ``TypeError`` naming
    ``door``, before a default judge is made), ``judges`` defaulting to ``default()``."""
    fields = {k: v for k, v in keywords.items() if k not in _EVALUATE_KEYWORDS}
    statistics = resolve(door, fields, statistics=keywords.get("statistics"), judging=False).statistics
    given = {k: v for k, v in keywords.items() if k in _EVALUATE_KEYWORDS}
    return evaluate(data, judges if judges is not None else default(), **{**given, "statistics": statistics})


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


def log_results(run_id: str, judges: Sequence[Any], *, data: Any = None) -> Any:
    """Log the full report of ``run_id``, a run plain ``mlflow.genai.evaluate`` made with ``judges`` (one task's, one
    judge's): the run's traces are read once MLflow's trace writers are done, judged again by the judges' judge in
    the passes these judges ask and the claims every result needs (``report_pipeline``; its cache answers what was
    asked: no call when it is on), checked to be the rows MLflow evaluated (the ``num_rows`` of the dataset it logged
    as the run's input; ``data``: what was evaluated, so that rows MLflow did not store are named by their ids), and
    every figure is logged with its interval and n, the tables, the signature and the plots. Returns the task's
    result. The report signs one judge: scorers made with different Judges (a cheaper one for coverage) give their
    cards in the plain run, and their report one judge at a time."""
    task, ours = task_of(list(judges or []), "log_results")
    refuse_a_run_with_results(run_id)
    pipeline = task.report_pipeline(ours, statistics=StatisticsOptions())  # no pass that none of ``judges`` asked
    rows, traces = run_trace_rows(run_id, pipeline, data)
    said_on_the_run(run_id, pipeline.unique, rows)
    cards = said_on_the_run(run_id, the_judges_cards, traces, ours)
    pipeline.judge_all(rows)
    result = pipeline.result(rows)
    add_the_cards_spend(result, cards, rows)
    log_result(result, run_id=run_id, log_metrics=True)
    say_where_the_cards_and_the_report_differ(run_id, cards, rows, result.rows)
    if ERROR_TAG in MlflowClient().get_run(run_id).data.tags:  # an earlier call's refusal, mended by this one
        MlflowClient().delete_tag(run_id, ERROR_TAG)
    return result


def said_on_the_run(run_id: str, check: Any, *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)``'s value; its ``ValueError`` (rows that cannot be read, ids that repeat) also goes on
    the run, as ``mgm.error``."""
    try:
        return check(*args, **kwargs)
    except ValueError as error:
        fail(run_id, str(error))
        raise


def refuse_a_run_with_results(run_id: str) -> None:
    if SIGNATURE_TAG in MlflowClient().get_run(run_id).data.tags:  # params are logged once: another result cannot be
        raise ValueError(f"run {run_id} holds the results of an evaluation already; evaluate again into a new run")


def run_trace_rows(run_id: str, pipeline: TaskPipeline, data: Any = None) -> tuple[list[Any], list[Any]]:
    """The rows of ``run_id``'s traces as ``pipeline`` reads them, and the traces (read once: their cards too), once
    MLflow's trace writers are done; exactly the rows MLflow evaluated, else ``RunRowsMismatch`` (and the run's
    ``mgm.error`` tag) with both counts, and with ``data`` (what was evaluated) the ids of the rows MLflow did not
    store."""
    mlflow.flush_trace_async_logging()
    experiment_id = MlflowClient().get_run(run_id).info.experiment_id  # the run's own, whatever experiment is set now
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    evaluated = said_on_the_run(run_id, evaluated_row_count, run_id)  # what MLflow evaluated: the rows logged must be those
    if data is not None:
        given = [str(parsed.row.id) for parsed in said_on_the_run(run_id, parsed_rows, pipeline, _records(data))]
        evaluated = len(given)
    # The traces MLflow tagged as evaluation rows, when they are exactly the rows it evaluated: a trace the application
    # made in the run before (a smoke call) was counted as a row, a false alarm. (A tag MLflow failed to write leaves
    # them short: then every trace is read, and a lost row is said as before.)
    tagged = [trace for trace in traces if TraceTagKey.EVAL_REQUEST_ID in trace.info.tags]
    if tagged and len(tagged) == evaluated:
        traces = tagged
    rows, unusable = trace_rows(traces, pipeline)
    lost: list[str] = []
    other = False  # rows stored that data does not give: the same count over other rows is not the rows evaluated
    if data is not None:
        stored = {str(row.row.id) for row in rows}
        lost = [row_id for row_id in given if row_id not in stored]
        other = bool(stored - set(given))
    elif evaluated is None:  # an evaluation dataset's run carries no row count: a lost trace could not be seen
        log.warning("run %s does not say how many rows it evaluated (its dataset has no row count): rows MLflow failed "
                    "to store cannot be told apart from rows never given; pass data= to log_results to check them", run_id)
    if not rows and (traces or not evaluated):  # (no trace left of the rows it evaluated: they were lost, below)
        raise ValueError(f"run {run_id} has no trace with {pipeline.holding} to judge ({len(unusable)} traces that are not)")
    if len(rows) != (len(traces) if evaluated is None else evaluated) or lost or other:
        named = f" (not stored: ids {', '.join(lost[:20])}{' ...' if len(lost) > 20 else ''})" if lost else ""
        raise RunRowsMismatch(fail(run_id, (
            f"the run evaluated {'its' if evaluated is None else evaluated} rows, {len(traces)} of their traces can be read "
            f"back{named} and {len(rows)} of those hold {pipeline.holding}"
            + (f" (not: {'; '.join(unusable[:5])}{'; ...' if len(unusable) > 5 else ''}); mend those rows and evaluate the data "
               "again into a new run" if unusable else "; evaluate the data again into a new run"))), run_id)
    return rows, traces


SummaryEvaluation = AnswerEvaluation = Evaluation  # the task's own names for an evaluation run
