"""What ``mgm`` leaves behind and what it prints: a new experiment in a local SQLite store keeps its artifacts beside
the database (not in ./mlruns under whatever folder the command ran in), and MLflow's own chatter is quieted while
a command runs, its other warnings kept."""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.utils.logging_utils import eprint
from test_comparison_pairing import _summaries
from test_gate_pairing import _logged_result

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.cli.common import local_artifacts_root
from mlflow_genai_metrics.cli.quiet import quiet_mlflow

SOURCE = "The council approved the budget on Monday. The mayor said it funds 12 new schools."


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The folder the command runs in, apart from the store's."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def evaluate(tmp_path: Path, store: str, *options: str) -> str:
    """``mgm evaluate --grounding-only`` (no judge) on two rows: the run's artifact URI."""
    data = tmp_path / "rows.csv"
    pd.DataFrame({"text": [SOURCE] * 2, "summary": ["The council approved the budget.", "It funds 12 new schools."]}).to_csv(data, index=False)
    assert mgm(["evaluate", str(data), "--grounding-only", "--tracking-uri", store, *options]) == 0
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert len(runs) == 1
    return runs[0].info.artifact_uri


def test_a_new_experiment_in_a_local_sqlite_store_keeps_its_artifacts_beside_the_database(tmp_path, elsewhere):
    store = tmp_path / "store"
    artifacts = Path(evaluate(tmp_path, f"sqlite:///{store / 'mlflow.db'}", "--experiment", "my summaries"))
    assert artifacts.is_relative_to(store / "mlartifacts" / "my_summaries") and any(artifacts.iterdir())
    assert list(elsewhere.iterdir()) == []  # no ./mlruns where the command ran


def test_an_existing_experiment_keeps_the_artifact_location_it_was_made_with(tmp_path, elsewhere):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(store)
    mlflow.create_experiment("made-before", artifact_location=str(tmp_path / "its-own"))
    assert Path(evaluate(tmp_path, store, "--experiment", "made-before")).is_relative_to(tmp_path / "its-own")


def test_only_a_local_sqlite_store_gets_its_artifacts_beside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert local_artifacts_root("sqlite:///mlflow.db") == tmp_path / "mlartifacts"
    assert local_artifacts_root(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}") == tmp_path / "a" / "mlartifacts"
    assert local_artifacts_root("sqlite:///:memory:") is None
    assert local_artifacts_root("http://127.0.0.1:5000") is None
    assert local_artifacts_root("databricks") is None


def test_mgm_gate_prints_its_verdict_without_mlflow_s_registration_lines_or_the_runs_uri_warning(scripted_server, mlflow_store, capsys):
    run_id, _ = _logged_result(scripted_server(), _summaries(40), fail_on_bad=False, run_name="evaluated")
    capsys.readouterr()
    gate = ["gate", run_id, "--model-uri", f"runs:/{run_id}/summarizer", "--name", "quiet-summarizer", "--rule", "richness>=0.5"]
    assert mgm([*gate, "--tracking-uri", mlflow_store]) == 0
    captured = capsys.readouterr()
    assert "gate passed: registered version 1" in captured.out
    assert captured.err == ""  # MLflow says "Successfully registered", "Created version" and warns about runs:/


def test_while_quiet_mlflow_s_other_warnings_show_and_its_info_and_prints_do_not(capsys):
    with quiet_mlflow():
        logging.getLogger("mlflow.somewhere").info("an info line")
        eprint("a direct print")
        logging.getLogger("mlflow.somewhere").warning("a warning worth reading")
    err = capsys.readouterr().err
    assert "a warning worth reading" in err and "an info line" not in err and "a direct print" not in err


def test_after_a_command_mlflow_prints_and_logs_as_before(capsys):
    with quiet_mlflow():
        pass
    eprint("a direct print")
    logging.getLogger("mlflow.somewhere").info("an info line")
    err = capsys.readouterr().err
    assert "a direct print" in err and "an info line" in err


def test_a_figure_with_no_row_is_said_in_words_not_nan():
    """Every summary empty: the grounding check scored no row, and the summary printed "grounding nan (no interval
    from 0 rows)"."""
    from mlflow_genai_metrics.cli.run_output import summary_lines

    lines = summary_lines({"grounding": float("nan"), "grounding_ci_low": float("nan"), "grounding_ci_high": float("nan"),
                           "grounding_n": 0.0, "alignment": 0.5, "alignment_ci_low": 0.1, "alignment_ci_high": 0.9, "alignment_n": 4.0})
    assert "nan" not in "\n".join(lines)
    assert any(line.split() == ["grounding", "none:", "no", "row", "to", "stand", "on", "(n=0)"] for line in lines), lines
    assert any(line.split() == ["alignment", "0.5", "[0.1,", "0.9]"] for line in lines), lines
