"""Shared fixtures: a scripted OpenAI-compatible server on 127.0.0.1, an isolated cache, and a session-wide
check that no test wrote the API key to disk."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from mlflow_genai_metrics.testing import Reply, ScriptedJudgeServer, ScriptedRequest

# A distinctive key: the tests hand it to every Judge, and the session fails if it appears in any file.
SECRET_KEY = "sk-mgm-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


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
def scripted_server() -> Iterator[Callable[..., ScriptedJudgeServer]]:
    """Factory: ``scripted_server(script, **options)`` starts a server that stops after the test."""
    started: list[ScriptedJudgeServer] = []

    def start(script: Callable[[ScriptedRequest], object] = always(verdict_json()), **options) -> ScriptedJudgeServer:
        options.setdefault("models", ("scripted-judge",))
        server = ScriptedJudgeServer(script, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if the API key reached any file the tests wrote (caches, logs, MLflow stores)."""
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


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    """A real MLflow tracking store and model registry: SQLite and an artifact folder in a temp dir."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    experiment_id = mlflow.create_experiment("mgm-tests", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment_id)
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri("")
