"""Quiet by construction: importing the MLflow layer, logging a ``SummarizerModel`` and running ``mgm evaluate``
show no warning. Each check runs in a fresh interpreter, so that no earlier import or filter hides one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import SECRET_KEY
from mlflow_helpers import Endpoint, frame

# Records every warning (the "always" filter) and every WARNING that MLflow logs, then prints what a user would
# see: DeprecationWarnings raised inside third-party code are hidden by Python's default filters and left out.
RECORDER = """
import json, logging, warnings
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(f"{record.name} {record.levelname}: {record.getMessage()}")
logging.getLogger().addHandler(Keep(logging.WARNING))
logging.getLogger("mlflow").addHandler(Keep(logging.WARNING))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
{body}
shown = [w for w in caught if not (issubclass(w.category, DeprecationWarning) and "mlflow_genai_metrics" not in w.filename)]
print(json.dumps([f"{w.category.__name__}: {w.message}" for w in shown] + records))
"""


def fresh_environment(**settings: str) -> dict[str, str]:
    """This environment without the MLflow settings that earlier tests left in it (``set_experiment`` exports one)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}, **settings}


def shown_warnings(body: str, cwd) -> list[str]:
    code = RECORDER.replace("{body}", "\n".join(f"    {line}" for line in body.strip().splitlines()))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=cwd, env=fresh_environment())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_mlflow_layer_shows_no_warning(tmp_path):
    assert shown_warnings("import mlflow_genai_metrics.tracking", tmp_path) == []


def test_logging_a_summarizer_model_shows_no_warning(tmp_path):
    body = f"""
import mlflow
from mlflow_genai_metrics import SummarizerModel
mlflow.set_tracking_uri("sqlite:///{tmp_path / 'mlflow.db'}")
with mlflow.start_run():
    SummarizerModel("good-summarizer", "http://127.0.0.1:9/v1").log(name="summarizer")
"""
    assert shown_warnings(body, tmp_path) == []


@pytest.fixture
def cli_environment(scripted_server, tmp_path) -> dict[str, str]:
    server = scripted_server(Endpoint(), models=Endpoint.models)
    return fresh_environment(
        OPENAI_API_KEY=SECRET_KEY, MGM_JUDGE_MODEL="scripted-judge", MGM_JUDGE_BASE_URL=server.base_url,
        MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )


def test_mgm_evaluate_with_a_candidate_model_shows_no_warning(cli_environment, tmp_path):
    frame().drop(columns=["summary"]).to_csv(tmp_path / "articles.csv", index=False)
    command = [sys.executable, "-m", "mlflow_genai_metrics.cli", "evaluate", "articles.csv", "--model", "good-summarizer",
               "--model-base-url", cli_environment["MGM_JUDGE_BASE_URL"], "--id-col", "id", "--reference-col", "reference"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=cli_environment)
    assert done.returncode == 0, done.stderr
    assert "logged candidate good-summarizer" in done.stdout
    assert [line for line in done.stderr.replace("\r", "\n").splitlines() if "warn" in line.lower()] == []


def test_mgm_commands_keep_mlflow_s_evaluation_block_off_stdout_and_restore_it(scripted_server, mlflow_store, capsys):
    """mlflow.genai.evaluate prints "Evaluation completed ... Run ID" on stdout after each run; inside an mgm command
    (quiet_mlflow) it does not (the demo and mgm evaluate print each run's id and URL themselves), and after the
    command MLflow prints it again."""
    import mlflow

    from mlflow_genai_metrics.cli.quiet import quiet_mlflow
    from mlflow_genai_metrics.tracking import Grounding

    data = [{"inputs": {"text": "The council approved the budget on Monday.", "id": "a"}, "outputs": "The council approved the budget."}]
    with quiet_mlflow():
        mlflow.genai.evaluate(data=data, scorers=[Grounding()])
    assert "Evaluation completed" not in capsys.readouterr().out
    mlflow.genai.evaluate(data=data, scorers=[Grounding()])  # the control: MLflow's own block, once quiet_mlflow ended
    assert "Evaluation completed" in capsys.readouterr().out
