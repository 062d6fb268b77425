"""``mgm``'s exit codes: 0 done, 1 gate failed or evaluation failed, 2 bad input said in one line on stderr
(``mgm <command>: <message>``), never a traceback; and where ``mgm evaluate`` logs (the MLflow environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import mlflow
import pytest
from conftest import SECRET_KEY, always, copy_mlflow_database, point_mlflow_at, verdict_json
from mlflow.tracking import MlflowClient
from mlflow_helpers import Endpoint, frame
from test_comparison_pairing import _summaries
from test_gate_pairing import _logged_result

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.testing import Fault, ScriptedJudgeServer

UNKNOWN_RUN = "0123456789abcdef0123456789abcdef"


def mgm_process(*args: str) -> subprocess.CompletedProcess:
    """``mgm`` as a shell runs it: everything it writes to stderr, MLflow's own logging included."""
    command = [sys.executable, "-m", "mlflow_genai_metrics.cli", *args]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}  # set_experiment exports one
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=environment)


@pytest.fixture(scope="module")
def evaluated_once(tmp_path_factory, migrated_mlflow_database) -> tuple[str, str, str]:
    """An evaluation run (alignment 0.5) with a logged model, made once for the tests that only read it (each
    checks that it registered nothing): (tracking URI, run id, model URI)."""
    folder = tmp_path_factory.mktemp("evaluated")
    uri = copy_mlflow_database(migrated_mlflow_database, folder / "mlflow.db")
    with pytest.MonkeyPatch.context() as monkeypatch, ScriptedJudgeServer(always(verdict_json())) as server:
        point_mlflow_at(uri, monkeypatch)
        mlflow.set_experiment(experiment_id=mlflow.create_experiment("mgm-tests", artifact_location=(folder / "artifacts").as_uri()))
        try:
            run_id, model_uri = _logged_result(server, _summaries(40), fail_on_bad=False, run_name="evaluated")
        finally:
            mlflow.set_tracking_uri("")
    return uri, run_id, model_uri


@pytest.fixture
def evaluated_store(evaluated_once, monkeypatch) -> Iterator[str]:
    """The tracking URI of ``evaluated_once``'s store, which MLflow and the environment point at during the test."""
    point_mlflow_at(evaluated_once[0], monkeypatch)
    yield evaluated_once[0]
    mlflow.set_tracking_uri("")


@pytest.fixture
def evaluated(evaluated_once, evaluated_store) -> tuple[str, str]:
    """An evaluation run (alignment 0.5) with a logged model: (run id, model URI)."""
    return evaluated_once[1:]


def registered(name: str) -> list:
    return MlflowClient().search_registered_models(filter_string=f"name = '{name}'")


def test_mgm_gate_with_a_mistyped_run_id_says_so_in_one_line_and_exits_2(evaluated, evaluated_store):
    done = mgm_process("gate", UNKNOWN_RUN, "--model-uri", evaluated[1], "--name", "summarizer", "--rule", "alignment>=0.9", "--tracking-uri", evaluated_store)
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"mgm gate: Run with id={UNKNOWN_RUN} not found"])


def test_mgm_compare_with_a_mistyped_run_id_says_so_in_one_line_and_exits_2(evaluated, evaluated_store):
    done = mgm_process("compare", evaluated[0], UNKNOWN_RUN, "--tracking-uri", evaluated_store)
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"mgm compare: Run with id={UNKNOWN_RUN} not found"])


def test_mgm_gate_with_a_model_uri_naming_no_model_says_so_in_one_line_and_exits_2(evaluated, evaluated_store):
    uri = f"models:/m-{UNKNOWN_RUN}"
    done = mgm_process("gate", evaluated[0], "--model-uri", uri, "--name", "summarizer", "--rule", "alignment>=0.4", "--tracking-uri", evaluated_store)
    message = f"mgm gate: model URI '{uri}' names no model: Logged model with ID 'm-{UNKNOWN_RUN}' not found."
    assert (done.returncode, done.stderr.splitlines()) == (2, [message])


def test_mgm_gate_finds_a_bad_model_uri_before_evaluating_any_rule(evaluated, evaluated_store, capsys):
    gate = ["gate", evaluated[0], "--model-uri", "models:/summarizer/1/extra", "--name", "summarizer", "--tracking-uri", evaluated_store]
    assert mgm([*gate, "--rule", "alignment>=0.9"]) == 2  # the rule would fail (exit 1): the URI is found first
    assert capsys.readouterr().err.startswith("mgm gate: malformed model URI 'models:/summarizer/1/extra'")
    assert registered("summarizer") == []


def test_mgm_gate_with_an_unknown_registered_model_or_alias_exits_2_and_registers_nothing(evaluated, evaluated_store, capsys):
    gate = ["gate", evaluated[0], "--model-uri", "models:/no-such-model@champion", "--name", "summarizer", "--tracking-uri", evaluated_store]
    assert mgm([*gate, "--rule", "alignment>=0.4"]) == 2
    assert "Registered Model with name=no-such-model not found" in capsys.readouterr().err
    assert registered("summarizer") == []


@pytest.fixture
def judge_env(scripted_server, monkeypatch, tmp_path):
    """``mgm evaluate``'s judge on a scripted endpoint, through the environment a user would set, and a cache of
    its own (another test's cached answers would hide this endpoint's failures)."""

    def configure(script=None):
        server = scripted_server(script or Endpoint(), models=Endpoint.models)
        monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
        monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
        monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
        return server

    return configure


@pytest.fixture
def summaries_file(tmp_path):
    path = tmp_path / "summaries.csv"
    frame().head(2).to_csv(path, index=False)
    return path


def run_of(output: str):
    return MlflowClient().get_run(output.split("run ")[1].split()[0])


def test_mgm_evaluate_exits_1_saying_so_in_one_line_when_the_judge_failed_on_every_row(judge_env, summaries_file, mlflow_store, capsys):
    judge_env(lambda request: Fault.http(400, "the judge refuses"))
    assert mgm(["evaluate", str(summaries_file), "--id-col", "id", "--tracking-uri", mlflow_store]) == 1
    captured = capsys.readouterr()
    message = captured.err.splitlines()[-1]  # after MLflow's progress bar and its warning that scorers failed
    assert message.startswith("mgm evaluate: the judge failed on every row, 2 of 2 rows (bad_request 2): run ")
    assert message.endswith("the first error: claim extraction failed: bad_request (HTTP 400): Error code: 400 - the judge refuses")
    assert captured.err.count("mgm evaluate:") == 1
    assert run_of(captured.out).info.status == "FAILED"


def test_mgm_evaluate_logs_to_the_store_and_experiment_the_mlflow_environment_names(judge_env, summaries_file, mlflow_store, tmp_path, monkeypatch, capsys):
    judge_env()
    other_store = f"sqlite:///{tmp_path / 'other.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", other_store)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", other_store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-the-environment")
    assert mgm(["evaluate", str(summaries_file), "--id-col", "id"]) == 0
    assert mlflow.get_tracking_uri() == other_store
    run = run_of(capsys.readouterr().out)
    assert MlflowClient().get_experiment(run.info.experiment_id).name == "from-the-environment"


def test_mgm_evaluate_prints_where_it_wrote_the_artifacts(judge_env, summaries_file, mlflow_store, capsys):
    judge_env()
    assert mgm(["evaluate", str(summaries_file), "--id-col", "id", "--tracking-uri", mlflow_store, "--experiment", "cli"]) == 0
    output = capsys.readouterr().out
    assert f"artifacts: {run_of(output).info.artifact_uri}\n" in output


def test_mgm_evaluate_help_says_where_the_run_and_its_artifacts_go(capsys):
    with pytest.raises(SystemExit):
        mgm(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "$MLFLOW_EXPERIMENT_NAME" in text and "$MLFLOW_TRACKING_URI" in text
    assert "its artifacts go to that experiment's artifact location" in text


@pytest.mark.parametrize("alias", ["v1", "latest", "not an alias"])
def test_mgm_gate_with_an_alias_mlflow_refuses_exits_2_and_registers_nothing(evaluated, evaluated_store, alias, capsys):
    gate = ["gate", evaluated[0], "--model-uri", evaluated[1], "--name", "summarizer", "--alias", alias, "--tracking-uri", evaluated_store]
    assert mgm([*gate, "--rule", "alignment>=0.4"]) == 2  # the rule passes: the alias alone is refused
    assert alias in capsys.readouterr().err
    assert registered("summarizer") == []
