"""Shared fixtures: a scripted OpenAI-compatible server on 127.0.0.1, an isolated cache, and a session-wide
check that no test wrote the API key to disk."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from mlflow_genai_metrics.testing import Reply, ScriptedJudgeServer, ScriptedRequest

# A distinctive key: the tests hand it to every Judge, and the session fails if it appears in any file.
SECRET_KEY = "sk-mgm-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
_STARTED = pytest.StashKey[tuple[float, set[str]]]()
_SERVERS = pytest.StashKey[list[ScriptedJudgeServer]]()

# Two workers on two cores: a local model server computes on one thread, not one per core. llama.cpp's threads wait
# for each other by spinning, so beside the other worker's test two threads took 12.1 s where one took 8.4 s (two
# SmolLM2 summaries, docs/testing.md). Set here, before any fixture starts a server, for every process of the run.
os.environ.setdefault("MGM_LOCAL_THREADS", "1")  # unless the run sets its own
# MLflow's telemetry is off, as it is under CI=true: beside sending nothing, its scorer-call event imports
# mlflow.server, which decides once, at import, that it runs as a server when uvicorn (the scripted server's) is
# loaded; every custom scorer loaded later in that process then refuses to run ("loaded without its code"), so one
# test calling a scorer directly would fail another that loads one, depending on their order on a worker.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
# MLflow's own judges (make_judge: tracking.one_call) look their model up in a catalogue they download from GitHub
# at first use in a process; offline that is about 7 s of retries and a network attempt a test must not make. An
# empty value is MLflow's documented switch for machines without network access.
os.environ["MLFLOW_MODEL_CATALOG_URI"] = ""


class Verdict(BaseModel):
    """A small answer schema for the judge-engine tests."""

    verdict: str = Field(description="yes, no or idk")
    reason: str


def verdict_json(verdict: str = "yes", reason: str = "the source says so") -> str:
    return json.dumps({"verdict": verdict, "reason": reason})


def always(content: str) -> Callable[[ScriptedRequest], Reply]:
    return lambda request: Reply(content)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's judge settings or writes to the user cache dir, and none inherits the MLflow
    experiment an earlier test set (``mlflow.set_experiment`` writes it into ``$MLFLOW_EXPERIMENT_ID``)."""
    for name in ("MGM_JUDGE_MODEL", "MGM_JUDGE_BASE_URL", "MGM_JUDGE_CONTEXT", "OPENAI_BASE_URL", "OPENAI_API_KEY", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mgm-cache"))


@pytest.fixture
def scripted_server(request: pytest.FixtureRequest) -> Iterator[Callable[..., ScriptedJudgeServer]]:
    """Factory: ``scripted_server(script, **options)`` starts a server that stops after the test. While it runs the
    judge's retries are logged (INFO), so a failed test's captured log says why a request was sent again, beside
    the requests the servers saw more than once (``pytest_runtest_makereport``)."""
    started: list[ScriptedJudgeServer] = request.node.stash.setdefault(_SERVERS, [])
    retries = logging.getLogger("mlflow_genai_metrics.judge.transport")
    level = retries.level
    retries.setLevel(logging.INFO)

    def start(script: Callable[[ScriptedRequest], object] = always(verdict_json()), **options) -> ScriptedJudgeServer:
        options.setdefault("models", ("scripted-judge",))
        server = ScriptedJudgeServer(script, **options).start()
        started.append(server)
        return server

    yield start
    retries.setLevel(level)
    for server in started:
        server.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test that started scripted servers reports the requests they saw more than once (when each came and
    went, its answer's status, the caller's port: a retry on a new connection has a new one)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for number, server in enumerate(item.stash.get(_SERVERS, [])):
        seen: dict[str, list] = {}
        for logged in server.requests:
            seen.setdefault(json.dumps(logged.body, sort_keys=True), []).append(logged)
        repeated = [
            f"#{r.index} {r.purpose} status {r.status} port {r.client_port} arrived {r.arrived:.3f} finished {r.finished:.3f}"
            for group in seen.values() if len(group) > 1 for r in group
        ]
        if repeated:
            report.sections.append((f"scripted server {number}: requests sent more than once", "\n".join(repeated)))


def files_containing(root: Path, needle: str) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            try:
                if needle.encode() in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found


PROJECT = Path(__file__).resolve().parents[1]
# What a test run may add to the project folder: the tools' caches (the set-up's .venv and the like are there before).
PROJECT_CACHES = {".pytest_cache", ".hypothesis", ".ruff_cache", "__pycache__"}
# What MLflow writes in the working directory when a test gives it no place of its own (a SQLite store's default
# artifact root is ./mlruns).
MLFLOW_DEFAULTS = ("mlruns", "mlartifacts", "mlflow.db")


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = (time.time(), {path.name for path in PROJECT.iterdir()})


def written_in_the_project(started: float, before: set[str]) -> list[str]:
    """The project's top-level entries that are new since ``before``, and the MLflow defaults written in since
    ``started``: a test's state outside its temp dir."""
    written = sorted(name for name in {path.name for path in PROJECT.iterdir()} - before - PROJECT_CACHES)
    for name in MLFLOW_DEFAULTS:
        path = PROJECT / name
        if name not in written and path.exists() and any(
            p.stat().st_mtime >= started for p in (path, *(path.rglob("*") if path.is_dir() else ()))
        ):
            written.append(name)
    return written


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if the API key reached any file the tests wrote (caches, logs, MLflow stores), or if a test
    wrote in the project folder (``written_in_the_project``). Under pytest-xdist the controller looks once, in the
    base folder that holds every worker's (``popen-gw0``, ...)."""
    if hasattr(session.config, "workerinput"):
        return
    started = session.config.stash.get(_STARTED, None)
    if started is not None and (written := written_in_the_project(*started)):
        session.exitstatus = 1
        print(f"\nWRITTEN IN THE PROJECT FOLDER by the tests (give MLflow a place in the test's temp dir): {', '.join(written)}")
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        base = factory.getbasetemp()
    except Exception:  # no test asked for a temp dir
        return
    leaks = files_containing(base, SECRET_KEY)
    if leaks:
        session.exitstatus = 1
        print(f"\nAPI KEY LEAK: the test API key was written to: {', '.join(map(str, leaks))}")
    if os.environ.get("MGM_PRINT_BASETEMP"):
        print(f"\nbasetemp: {base}")


# Session-wide fixtures that take long to start, and the pytest-xdist group of the tests that use each.
SHARED_ON_ONE_WORKER = {"spark": "spark", "mlflow_ui": "mlflow-ui"}
# Module-scoped fixtures that take seconds to a minute to make: the tests of a module that use one share a worker,
# so that it is made once (a module fixture is made once per worker that runs a test asking for it).
MADE_ONCE_PER_MODULE = ("uninterrupted", "whole_method", "evaluated_once", "evaluated", "shared_endpoint",
                        "custom_scorer_server", "judged_cache")


# The longest work first: xdist hands out work in collection order, so a group of minutes (the Spark session's
# tests, the UI's) or a test of a minute (a doc page on the local model) collected last kept one worker busy while
# the other had nothing left. Ahead of the rest, in this order; the rest keep theirs.
LONGEST_FIRST = ("spark", "mlflow-ui", "test_docs.py", "test_study.py", "test_local_model.py", "test_prefix_prompts.py",
                 "test_benchmarks_smoke.py", "test_examples.py", "test_one_evaluation.py", "test_reliability.py")


def longest_first(item: pytest.Item) -> int:
    """Where ``item`` goes in the run: its place in ``LONGEST_FIRST`` (by xdist group, else by file), else after."""
    group = next((m.args[0] for m in item.iter_markers("xdist_group") if m.args), None)
    for position, name in enumerate(LONGEST_FIRST):
        if name in (group, item.path.name):
            return position
    return len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) the tests that use one of ``SHARED_ON_ONE_WORKER`` run on one worker,
    so that one Spark session, or one ``mlflow ui``, serves them all, and the tests of a module that use one of its
    ``MADE_ONCE_PER_MODULE`` fixtures run on one worker; without xdist the mark does nothing. pytest 9 does not see
    pytest-xdist 3.8's groups (xdist sets ``item._nodeid``, pytest 9 reads ``item._id``): hence ``pytest<9``
    (``tests/test_suite_groups.py`` fails otherwise). Then the longest work goes first (``LONGEST_FIRST``)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        group = next((group for fixture, group in SHARED_ON_ONE_WORKER.items() if fixture in fixtures), None)
        if group is None:
            group = next((f"{item.path.stem}-{fixture}" for fixture in MADE_ONCE_PER_MODULE if fixture in fixtures), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=longest_first)  # stable: within a place, the collection order


@dataclasses.dataclass(frozen=True)
class WarmPython:
    """A running warm interpreter (``tests/warm_server.py``): ``python`` is a ``python`` whose scripts run forked
    from it, given ``env`` (the socket and the real interpreter's folder) in the command's environment."""

    python: str
    env: dict[str, str]
    socket: str


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory) -> Iterator[WarmPython]:
    """One warm interpreter per worker for the tests that run the project's scripts as a reader does (the doc
    pages, the examples, the benchmarks): each such command then skips the 3-9 s of imports a process of its own
    pays. ``tests/test_warm_server.py`` checks it behaves as the process would."""
    from warm_client import REAL_BIN_VARIABLE, SOCKET_VARIABLE, install_shims

    folder = tmp_path_factory.mktemp("warm-python")
    socket_folder = Path(tempfile.mkdtemp(prefix="mgm-warm-"))  # short: a Unix socket's path has 107 bytes at most
    real_bin = Path(sys.executable).parent
    env = {SOCKET_VARIABLE: str(socket_folder / "socket"), REAL_BIN_VARIABLE: str(real_bin)}
    with open(folder / "warm-server.log", "wb") as log:
        server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm_server.py")), env[SOCKET_VARIABLE]],
                                  env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Ready once it listens (after its imports); one that died (an import started a thread) says why here, not
        # as a client waiting minutes for it.
        deadline = time.monotonic() + 300
        while not os.path.exists(env[SOCKET_VARIABLE]):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the warm server is not listening: {(folder / 'warm-server.log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield WarmPython(str(install_shims(folder / "bin", real_bin) / "python"), env, env[SOCKET_VARIABLE])
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        shutil.rmtree(socket_folder, ignore_errors=True)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (``local[2]``, real Python workers running this interpreter) for every Spark test of
    the run: starting one takes 10-40 s on a 2-core machine. Small Arrow batches give several per partition."""
    pytest.importorskip("pyspark", reason="the Spark path needs pyspark (pip install -e '.[spark]')")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this interpreter, with this package
    on_interrupt = signal.getsignal(signal.SIGINT)  # SparkContext puts its own handler in; it outlives the session
    session = (
        SparkSession.builder.master("local[2]")
        .appName("mgm-tests")
        .config("spark.ui.enabled", "false")
        # A JVM that lives for the tests' minutes: its fast compiler only (no second tier's optimising compiles of
        # code the tests run a few times) and one garbage-collector thread. Spark's 190-200 s of CPU for the Spark
        # tests -> 140-147 (docs/testing.md); what Spark computes is the same.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "7")  # several batches per partition
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    signal.signal(signal.SIGINT, on_interrupt)


@pytest.fixture(scope="session")
def migrated_mlflow_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite database with every schema migration applied and no experiment, to copy: MLflow builds a
    new database by running its ~70 migrations (3-14 s on a 2-core machine), a copy takes milliseconds. The Default
    experiment is left out: MLflow adds it when it first opens a copy, with the artifact location it gives a new
    database opened there (``./mlruns/0`` of the working directory)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("mlflow-template")
    path = folder / "mlflow.db"
    SqlAlchemyStore(f"sqlite:///{path}", (folder / "artifacts").as_uri()).engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM experiments")
    return path


@pytest.fixture
def new_mlflow_database(migrated_mlflow_database: Path) -> Callable[[Path], str]:
    """Factory: ``new_mlflow_database(path)`` puts an empty, migrated MLflow database at ``path`` (a SQLite file)
    and returns its tracking URI; what MLflow would make of a new ``sqlite:///path``, made faster."""

    return lambda path: copy_mlflow_database(migrated_mlflow_database, path)


def copy_mlflow_database(template: Path, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


def point_mlflow_at(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracking store and model registry at ``uri``: in the environment (undone by ``monkeypatch``) and in
    MLflow's process-wide settings (``mlflow.set_tracking_uri("")`` undoes the tracking URI)."""
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)


@pytest.fixture(scope="session")
def mlflow_ui(tmp_path_factory, migrated_mlflow_database):
    """One real ``mlflow ui`` on 127.0.0.1 for every UI test of the run (starting one and loading its scripts the
    first time take 20-30 s on a 2-core machine), on a store where each test logs to an experiment of its own
    (``ui_store``)."""
    from browser import MlflowUi

    store = copy_mlflow_database(migrated_mlflow_database, tmp_path_factory.mktemp("ui-store") / "mlflow.db")
    with MlflowUi(store) as ui:
        yield ui


@pytest.fixture
def ui_store(mlflow_ui, tmp_path, monkeypatch, request) -> Iterator[str]:
    """``mlflow_store`` on the store ``mlflow_ui`` shows: MLflow logs to a new experiment named for the test, its
    artifacts in the test's temp dir."""
    import mlflow

    point_mlflow_at(mlflow_ui.backend_store_uri, monkeypatch)
    experiment_id = mlflow.create_experiment(request.node.name, artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment_id)
    yield mlflow_ui.backend_store_uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri("")


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch, new_mlflow_database):
    """A real MLflow tracking store and model registry: SQLite and an artifact folder in a temp dir."""
    import mlflow

    uri = new_mlflow_database(tmp_path / "mlflow.db")
    point_mlflow_at(uri, monkeypatch)
    experiment_id = mlflow.create_experiment("mgm-tests", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment_id)
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri("")
