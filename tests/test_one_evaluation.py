"""One evaluation, one run, its own rows (issues 25 and 46): on a real SQLite store, a run's n is the rows it
evaluated, as many as its Traces tab lists, or the run fails saying so with both counts; plain
``mlflow.genai.evaluate`` gives every card and MLflow's aggregates, and ``log_results`` the full report; a new Judge
is the judge used; a judge made elsewhere changes nothing; Grounding alone logs its results; no registry in the
tracking package and no state on MLflow's objects."""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import mlflow
import pytest
import sqlalchemy
from helpers import judge_for
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import evaluate_summaries
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, log_results
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch
from mlflow_genai_metrics.tracking.rows import ERROR_TAG

ROWS = 30
WORDS = "council budget mayor club striker phone screen update flaw shares profits market river bridge school".split()
TRACKING = Path(__file__).resolve().parents[1] / "mlflow_genai_metrics" / "tracking"


def rows_for(tag: str, count: int = ROWS) -> list[dict]:
    """``count`` distinct articles, each summarised by its first sentence (every fourth one with a made-up claim)."""
    rows = []
    for i in range(count):
        a, b, c = WORDS[i % len(WORDS)], WORDS[(i * 3 + 1) % len(WORDS)], WORDS[(i * 7 + 2) % len(WORDS)]
        text = f"The {a} of {tag} number {i} approved the {b} plan. The {c} welcomed it on day {i}. Critics of the {a} objected."
        summary = f"The {a} of {tag} number {i} approved the {b} plan." + (" The moon was blue." if i % 4 == 0 else "")
        rows.append({"inputs": {"text": text, "id": f"{tag}/{i:03d}", "category": a}, "outputs": summary})
    return rows


def articles() -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]


def evaluated_traces(run_id: str, tag: str | None = None) -> int:
    """The run's evaluated rows as its Traces tab lists them once MLflow's trace writers are done (``tag``: only those
    of rows whose id starts with it)."""
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(run_id=run_id, include_spans=False, return_type="list")
    evaluated = [t for t in traces if TraceTagKey.EVAL_REQUEST_ID in t.info.tags]
    return sum(tag is None or f'"{tag}/' in (t.info.request_preview or "") for t in evaluated)


def kept_every_row(run_id: str, rows: int, n_metric: str = "alignment_n", *, tag: str | None = None) -> bool:
    """True when the run's n is ``rows``, as many as its traces; False when it has no figures and its ``mgm.error``
    tag gives both counts. Anything else (a smaller n, figures beside an error) fails the test. ``tag``: evaluations
    still running in other threads may file their traces under the run after it settled, so a run that logged
    figures must list exactly ``rows`` traces of its own rows (and may list others' besides), and the count an
    error gives is at most the traces listed now."""
    run = MlflowClient().get_run(run_id)
    traces = evaluated_traces(run_id)
    error = run.data.tags.get(ERROR_TAG)
    if error is None:
        own = traces if tag is None else evaluated_traces(run_id, tag)
        assert run.data.metrics[n_metric] == rows == own <= traces
        return True
    listed = int(re.search(r"the run lists (\d+) evaluated traces", error).group(1)) if tag else traces
    assert f"{rows} rows" in error and str(listed) in error and listed <= traces, error
    assert n_metric not in run.data.metrics
    return False


@pytest.fixture
def judge_server(scripted_server):
    return scripted_server(SummarizationJudgeScript(), models=("scripted-judge",))


@pytest.fixture
def evaluations_may_start_at_once(monkeypatch):
    """MLflow looks for IPython, dbruntime and openai.resources.beta.chat again on every evaluate, through its
    import-hook finder; evaluations starting in several threads at once deadlock there (its post-import-hook lock
    against the import lock: mlflow/utils/import_hooks/__init__.py:156 and :301). None in sys.modules makes the
    import fail at once, without the finders. Only tests that start plain mlflow.genai.evaluate in several threads
    need it (evaluate_summaries runs one MLflow evaluation at a time)."""
    for name in ("IPython", "dbruntime", "openai.resources.beta.chat"):
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, None)


def test_thirty_rows_through_evaluate_summaries_five_times_in_a_row_keep_every_row(judge_server, mlflow_store):
    judge = judge_for(judge_server)
    for run in range(5):
        evaluation = evaluate_summaries(rows_for(f"r{run}"), judges=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
        assert kept_every_row(evaluation.run_id, ROWS) and len(evaluation.result.rows) == ROWS


def plain_run(data: list[dict], scorers: list) -> str:
    """Plain ``mlflow.genai.evaluate``, then ``log_results`` with the same scorers: the run's id (its figures, or its
    ``mgm.error`` tag when MLflow lost rows)."""
    run_id = mlflow.genai.evaluate(data=data, scorers=scorers).run_id
    try:
        log_results(run_id, scorers)
    except RunRowsMismatch as mismatch:
        assert mismatch.run_id == run_id
    return run_id


@contextlib.contextmanager
def mlflow_warnings():
    """The warnings MLflow's loggers give inside the block (MLflow's loggers do not propagate to pytest's)."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler, logger = Keep(logging.WARNING), logging.getLogger("mlflow")
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)


# Ten evaluations at MLflow's default workers (10 threads on SQLite's 15 connections), each in a process of its own on
# a store of its own (MLflow's tracking store is the process's), all at once: six runs in ten wait out SQLAlchemy's 30-s
# pool timeout, so ten in a row took 287-320 s of one worker (2026-12-06), 27 s of it CPU; each run is about 3 s of CPU.
TEN_RUNS_AT_ONCE = 10


def test_plain_mlflow_genai_evaluate_with_a_judge_per_scorer_at_mlflow_s_default_workers_ten_times(scripted_server, new_mlflow_database,
                                                                                                   warm_python, tmp_path):
    """Issue 46: at MLflow's default workers on SQLite, one Judge per scorer (a cheaper one for coverage, say): every
    row gets every card and MLflow's own aggregates, nothing is hung on MLflow's objects, and ``log_results`` gives
    the complete figures or names the rows MLflow did not store; never a false alarm. Each run is
    ``tests/plain_evaluation_run.py`` (its checks are there), in a process of its own."""
    server = scripted_server(SummarizationJudgeScript(), models=("scripted-judge",))
    script = Path(__file__).with_name("plain_evaluation_run.py")

    def one(run: int) -> subprocess.CompletedProcess:
        folder = tmp_path / f"run-{run}"
        store = new_mlflow_database(folder / "mlflow.db")
        return subprocess.run([warm_python.python, str(script), server.base_url, server.models[0], str(run), store,
                               (folder / "artifacts").as_uri()], cwd=folder, env={**os.environ, **warm_python.env},
                              capture_output=True, text=True, timeout=600)

    with concurrent.futures.ThreadPoolExecutor(TEN_RUNS_AT_ONCE) as pool:
        done = list(pool.map(one, range(10)))
    failed = {run: (d.returncode, d.stderr[-4000:]) for run, d in enumerate(done) if d.returncode != 0}
    assert not failed, failed
    ended = [json.loads(d.stdout.strip().splitlines()[-1]) for d in done]
    assert [(e["run"], e["rows"]) for e in ended] == [(run, 15 + run % 6) for run in range(10)]
    assert {e["ended"] for e in ended} <= {"complete", "rows named"}


def test_no_scorer_leaves_state_on_mlflow_s_objects(judge_server, mlflow_store):
    """A scorer judges its row and gives its card: the trace MLflow hands it keeps only MLflow's own attributes."""
    from mlflow.entities import Trace

    judge = judge_for(judge_server)
    handed: list = []

    class Watching(ClaimAlignment):
        def __call__(self, *, inputs=None, outputs=None, expectations=None, trace=None):
            before = dict(vars(trace)) if trace is not None else None
            feedback = super().__call__(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace)
            handed.append((trace, before))
            return feedback

    mlflow.genai.evaluate(data=rows_for("s", 6), scorers=[Watching(judge), KeyPointCoverage(judge), Grounding()])
    assert len(handed) == 6
    for trace, before in handed:
        assert isinstance(trace, Trace) and vars(trace) == before  # nothing added while scoring
        assert not [name for name in vars(trace) if "mgm" in name.lower()]
        assert not [name for name in vars(trace.info) if "mgm" in name.lower()]


def test_a_run_whose_rows_mlflow_could_not_store_fails_saying_so(judge_server, tmp_path, monkeypatch, new_mlflow_database):
    """MLflow's default of 10 predict and 10 score threads can run out of a SQLite store's connections: MLflow then
    warns "Failed to send trace to MLflow backend" and drops the trace, and the row is not in the run. The run says
    so, with both counts, instead of logging a smaller n. Which traces an exhausted pool drops depends on timing
    (under MLflow 3.18 a trace whose info failed was sometimes still stored through its spans, and a CI run lost
    none), so the store drops every fourth trace it meets here, on both of MLflow's ways in, with the pool's own
    error: 3 of 12, whatever the threads' order."""
    lost: dict[str, bool] = {}
    guard = threading.Lock()

    def dropped(trace_id: str) -> bool:
        with guard:
            return lost.setdefault(trace_id, len(lost) % 4 == 3)

    def refuse(trace_id: str) -> None:
        if dropped(trace_id):
            raise sqlalchemy.exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00")

    start_trace, log_spans = SqlAlchemyStore.start_trace, SqlAlchemyStore.log_spans
    monkeypatch.setattr(SqlAlchemyStore, "start_trace", lambda self, info, *a, **k: (refuse(info.trace_id), start_trace(self, info, *a, **k))[1])
    monkeypatch.setattr(SqlAlchemyStore, "log_spans", lambda self, location, spans, *a, **k: (
        [refuse(span.trace_id) for span in spans], log_spans(self, location, spans, *a, **k))[1])
    mlflow.set_tracking_uri(new_mlflow_database(tmp_path / "dropping.db"))
    try:
        mlflow.set_experiment(experiment_id=mlflow.create_experiment("dropping", artifact_location=(tmp_path / "a").as_uri()))
        judge = judge_for(judge_server)
        scorers = [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()]
        result = mlflow.genai.evaluate(data=rows_for("pool", 12), scorers=scorers)
        mlflow.flush_trace_async_logging()
        listed = len(mlflow.search_traces(run_id=result.run_id, include_spans=False, return_type="list"))
        assert listed == 9 and sum(lost.values()) == 3  # MLflow lost 3 rows
        with pytest.raises(RunRowsMismatch, match="the run evaluated 12 rows, 9 of their traces can be read back"):
            log_results(result.run_id, scorers)
        run = MlflowClient().get_run(result.run_id)
        assert "alignment_n" not in run.data.metrics and "the run evaluated 12 rows" in run.data.tags[ERROR_TAG]
    finally:
        mlflow.set_tracking_uri("")


def test_four_evaluate_summaries_at_once_each_keep_their_rows(judge_server, mlflow_store):
    judge = judge_for(judge_server)
    runs: dict[str, str] = {}
    failures: list[BaseException] = []

    def evaluate(tag: str) -> None:
        try:
            runs[tag] = evaluate_summaries(rows_for(tag), judges=[ClaimAlignment(judge), Grounding()]).run_id
        except BaseException as error:  # the test fails on it below
            failures.append(error)

    threads = [threading.Thread(target=evaluate, args=(f"t{k}",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and len(runs) == 4
    for tag, run_id in runs.items():
        assert kept_every_row(run_id, ROWS)
        ids = mlflow.artifacts.load_dict(f"runs:/{run_id}/mgm_rows.json")
        assert {row[ids["columns"].index("id")].split("/")[0] for row in ids["data"]} == {tag}  # its own rows only


def test_four_mlflow_genai_evaluations_at_once_never_log_a_smaller_n(judge_server, mlflow_store, monkeypatch,
                                                                   evaluations_may_start_at_once):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "1")  # 4 evaluations' threads within the store's connections
    judge = judge_for(judge_server)  # one Judge, shared; each evaluation its own scorers
    runs: dict[str, str] = {}

    def evaluate(tag: str) -> None:
        runs[tag] = mlflow.genai.evaluate(data=rows_for(tag), scorers=[ClaimAlignment(judge), Grounding()]).run_id

    threads = [threading.Thread(target=evaluate, args=(f"t{k}",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(runs) == 4
    # MLflow files a trace under the run started last in the process, so a run may list others' rows (how many
    # depends on the threads' timing): log_results then logs nothing and says so; none logs a smaller n.
    for run_id in runs.values():
        try:
            log_results(run_id, [ClaimAlignment(judge), Grounding()])
        except RunRowsMismatch:
            pass
        kept_every_row(run_id, ROWS)


def _every_claim_fails() -> Endpoint:
    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: Reply("garbage") if kind == "claims" else None
    return endpoint


@pytest.mark.parametrize("path", ["evaluate_summaries", "mlflow.genai.evaluate"])
def test_a_second_evaluation_with_a_new_judge_asks_that_judge(scripted_server, mlflow_store, path):
    failing = scripted_server(_every_claim_fails(), models=Endpoint.models)
    healthy = scripted_server(Endpoint(), models=Endpoint.models)
    front = scripted_server(models=Endpoint.models, forward_to=failing.base_url)  # one URL for both judges

    def evaluate(judge) -> dict[str, float]:
        judges = [ClaimAlignment(judge), Grounding()]
        if path == "evaluate_summaries":
            run_id = evaluate_summaries(articles(), judges=judges).run_id
        else:
            run_id = plain_run(articles(), judges)
        return MlflowClient().get_run(run_id).data.metrics

    assert evaluate(judge_for(front))["judge_error_rate"] == 1.0
    front.forward_to = healthy.base_url
    second = evaluate(judge_for(front))  # a new Judge with the same settings, on an endpoint that now answers
    asked = 1 if path == "evaluate_summaries" else 2  # log_results judges the traces again: no cache here
    assert healthy.request_count == asked * 2 * len(ARTICLES)  # claims and verdicts of every row: nothing reused
    assert second["judge_error_rate"] == 0 and second["alignment_n"] == len(ARTICLES)


def test_a_key_point_coverage_made_elsewhere_changes_nothing_in_a_claim_alignment_run(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    first = plain_run(articles(), [ClaimAlignment(judge)])
    calls = server.request_count
    KeyPointCoverage(judge)  # made, never used
    second = plain_run(articles(), [ClaimAlignment(judge)])
    assert server.request_count == 2 * calls and server.count(purpose="ExtractedKeyPoints") == 0
    names = [sorted(MlflowClient().get_run(r).data.metrics) for r in (first, second)]
    assert names[0] == names[1] and "coverage" not in names[1] and "alignment" in names[1]


@pytest.mark.parametrize("path", ["evaluate_summaries", "mlflow.genai.evaluate"])
def test_grounding_alone_logs_its_results(mlflow_store, path):
    if path == "evaluate_summaries":
        run_id = evaluate_summaries(articles(), judges=[Grounding()]).run_id
    else:
        run_id = plain_run(articles(), [Grounding()])
    assert kept_every_row(run_id, len(ARTICLES), n_metric="grounding_n")
    run = MlflowClient().get_run(run_id)
    assert "grounding" in run.data.metrics and "mgm.signature" in run.data.tags


def test_a_run_that_cannot_add_up_raises_with_both_counts(scripted_server, mlflow_store):
    """evaluate_summaries into a run that already lists other evaluated rows: its rows are not the run's."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with mlflow.start_run() as run:
        mlflow.genai.evaluate(data=articles()[:2], scorers=[Grounding()])
        with pytest.raises(RunRowsMismatch, match=r"handed 6 rows, the run lists 8 evaluated traces") as raised:
            evaluate_summaries(articles(), judges=[ClaimAlignment(judge_for(server))])
    assert raised.value.run_id == run.info.run_id
    tags = MlflowClient().get_run(run.info.run_id).data.tags
    assert "the run lists 8 evaluated traces" in tags[ERROR_TAG]


# -- no process-wide state ------------------------------------------------------------------------------------------

_MUTABLE_CALLS = {"dict", "set", "list", "OrderedDict", "defaultdict", "Counter", "deque", "WeakSet", "WeakKeyDictionary",
                  "WeakValueDictionary", "TTLCache", "LRUCache"}
_MUTATORS = {"add", "append", "extend", "update", "setdefault", "pop", "popitem", "clear", "insert", "remove", "discard"}


def _module_registries(source: str) -> list[str]:
    """Module-level names that hold state a later call could see: a mutable container that starts empty, is made by
    a call, or is changed by the module's code; an instance of the module's own class; a cache decorator."""
    tree = ast.parse(source)
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found, containers = [], {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in (t for t in targets if isinstance(t, ast.Name) and t.id != "__all__"):
            if isinstance(value, ast.Call):
                called = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
                if called in _MUTABLE_CALLS or called in classes:
                    found.append(f"{target.id} = {ast.unparse(value)[:60]}")
            elif isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
                containers[target.id] = value
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [f"@{ast.unparse(d)} {node.name}" for d in node.decorator_list if "cache" in ast.unparse(d)]
    for name, value in containers.items():
        empty = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not (getattr(value, "keys", None) or getattr(value, "elts", None))
        changed = any(
            (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MUTATORS
             and isinstance(n.func.value, ast.Name) and n.func.value.id == name)
            or (isinstance(n, (ast.Assign, ast.AugAssign, ast.Delete))
                and any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                        for t in (n.targets if hasattr(n, "targets") else [n.target])))
            for n in ast.walk(tree)
        )
        if empty or changed:
            found.append(f"{name} (a container {'that starts empty' if empty else 'the module changes'})")
    return found


def test_the_registry_check_finds_what_the_package_used_to_keep():
    """The control for the next test: the shapes of state the tracking package kept before issue 25."""
    old = (
        "import functools, weakref\nfrom collections import OrderedDict\n"
        "class _Pipelines:\n    pass\n"
        "PIPELINES = _Pipelines()\n_ALL = weakref.WeakSet()\n_RUNS = OrderedDict()\nSEEN = {}\n"
        "TABLE = {'a': 1}\ndef note(k):\n    TABLE[k] = 2\n"
        "@functools.lru_cache(maxsize=64)\ndef _rebuild(settings):\n    return settings\n"
    )
    assert len(_module_registries(old)) == 6
    assert _module_registries("import types\nKINDS = types.MappingProxyType({'a': 1})\n_ORDER = {'no': 0}\n") == []


def test_the_tracking_package_keeps_no_registry_at_module_level():
    found = {path.name: _module_registries(path.read_text()) for path in sorted(TRACKING.glob("*.py"))}
    assert {name: names for name, names in found.items() if names} == {}
