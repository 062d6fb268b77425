"""``mgm evaluate --grounding-only``: the model-free grounding check logged as an MLflow run with no judge at all.

No judge server runs in these tests, and the judge settings point at a closed port on 127.0.0.1: any judge call
would fail the run."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.tracking import load_run

SOURCE = (
    "The city council approved the new budget on Monday after a long debate. "
    "Mayor Anna Berg said the plan would fund 12 new schools by 2026. "
    "Critics argued that the budget cuts public transport spending."
)
ROWS = [
    ("faithful", "The city council approved the new budget on Monday after a long debate. Mayor Anna Berg said the plan would fund 12 new schools by 2026."),
    ("invented", "The city council approved the new budget on Monday. Police arrested three Swedish footballers at Heathrow airport."),
    ("number", "The council approved a budget that funds 40 new schools by 2031."),
]
REFERENCE = "The council approved a budget funding 12 new schools."


@pytest.fixture
def no_judge(monkeypatch):
    """Judge settings that fail on any call: a closed port on loopback. (MLflow's set_experiment writes
    $MLFLOW_EXPERIMENT_ID, which mgm reads: each test starts without it.)"""
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.setenv("MGM_JUDGE_MODEL", "no-judge-here")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")


def write_rows(tmp_path, *, reference: bool = True):
    frame = pd.DataFrame({"id": [i for i, _ in ROWS], "text": SOURCE, "summary": [s for _, s in ROWS]})
    if reference:
        frame["reference"] = REFERENCE
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    return path


def only_run_id(uri: str, experiment: str) -> str:
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == 1
    return runs[0].info.run_id


def test_grounding_only_logs_grounding_and_reference_metrics_with_no_judge_call(tmp_path, no_judge, capsys, monkeypatch, new_mlflow_database):
    monkeypatch.chdir(tmp_path)  # the run's artifacts go under ./mlruns
    uri = new_mlflow_database(tmp_path / "mlflow.db")
    args = ["evaluate", str(write_rows(tmp_path)), "--id-col", "id", "--reference-col", "reference", "--grounding-only",
            "--tracking-uri", uri, "--experiment", "grounding-only"]
    assert mgm(args) == 0
    run_id = only_run_id(uri, "grounding-only")
    metrics = MlflowClient(uri).get_run(run_id).data.metrics
    for name in ("grounding", "grounding_n", "grounded_rate", "grounded_rate_ci_low", "grounded_rate_n", "rougeL"):
        assert name in metrics, name
    assert "grounding_ci_low" not in metrics  # a mean of 3 rows: no interval holds its coverage, none is logged
    assert metrics["grounded_rate_n"] == 3
    assert not [name for name in metrics if name.startswith(("judge", "alignment", "richness", "coverage"))]
    run = load_run(run_id)
    assert "grounding:v2-" in run.signature and "judge:" not in run.signature
    rows = run.rows.set_index("id")
    assert rows.loc["faithful", "grounded"] == 1 and rows.loc["invented", "grounded"] == 0
    assert rows.loc["faithful", "grounding"] > max(rows.loc["invented", "grounding"], rows.loc["number", "grounding"])


def test_grounding_only_prints_grounding_and_grounded_rate_with_their_intervals_or_why_not(tmp_path, no_judge, capsys, monkeypatch, new_mlflow_database):
    monkeypatch.chdir(tmp_path)
    uri = new_mlflow_database(tmp_path / "mlflow.db")
    assert mgm(["evaluate", str(write_rows(tmp_path, reference=False)), "--grounding-only", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    metrics = MlflowClient(uri).get_run(only_run_id(uri, "mgm")).data.metrics
    line = re.search(r"^  grounded_rate +(\S+)  \[(\S+), (\S+)\]$", out, re.MULTILINE)
    assert line is not None, out
    assert float(line.group(1)) == pytest.approx(metrics["grounded_rate"], abs=5e-4)
    assert float(line.group(2)) == pytest.approx(metrics["grounded_rate_ci_low"], abs=5e-4)
    # a mean of 3 rows gets no interval, and the line says so instead of [nan, nan]
    line = re.search(r"^  grounding +(\S+)  \(no interval from 3 rows\)$", out, re.MULTILINE)
    assert line is not None and float(line.group(1)) == pytest.approx(metrics["grounding"], abs=5e-4), out
    assert "alignment" not in out and "judge/calls" not in out


def test_grounding_only_with_a_judge_option_is_bad_input(tmp_path, no_judge, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["evaluate", str(write_rows(tmp_path)), "--grounding-only", "--judge-model", "gpt-4o", "--tracking-uri", uri]
    assert mgm(args) == 2
    assert capsys.readouterr().err.startswith("mgm evaluate: --grounding-only asks no judge")


def test_grounding_only_with_a_category_column_plots_grounding_by_category(tmp_path, no_judge, monkeypatch, new_mlflow_database):
    monkeypatch.chdir(tmp_path)
    uri = new_mlflow_database(tmp_path / "mlflow.db")
    path = write_rows(tmp_path)
    pd.read_csv(path).assign(category=["politics", "politics", "education"]).to_csv(path, index=False)
    assert mgm(["evaluate", str(path), "--grounding-only", "--category-col", "category", "--tracking-uri", uri]) == 0
    run_id = only_run_id(uri, "mgm")
    artifacts = {a.path for a in MlflowClient(uri).list_artifacts(run_id)}
    assert "mgm_plot_categories.png" in artifacts
