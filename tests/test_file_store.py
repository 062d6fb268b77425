"""MLflow's file store holds every metric we log: no name is both a metric and a folder of metrics (issue 12, item 9)."""

from __future__ import annotations

import json

import mlflow
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import Endpoint, frame

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.tracking import log_result, summarization_metrics
from mlflow_genai_metrics.tracking.run_logging import LoggingFailedError, loggable_metrics


@pytest.fixture
def file_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("file-store")
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri("")


def test_the_classic_path_logs_every_aggregate_and_interval_to_the_file_store(scripted_server, file_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with mlflow.start_run() as run:
        evaluation = mlflow.models.evaluate(
            data=frame(), predictions="summary", targets="reference", extra_metrics=summarization_metrics(judge_for(server), source_col="text", all_metrics=True)
        )
    logged = MlflowClient().get_run(run.info.run_id).data.metrics
    for name in ("alignment", "alignment_ci_low", "alignment_n", "judge_error_rate_ci_low", "coverage_n",
                 "defect_rate/contradiction", "defect_rate/contradiction_ci_low", "judge/calls", "judge/suspect_rate", "rougeL", "bleu"):
        assert name in logged and logged[name] == pytest.approx(evaluation.metrics[name]), name
    report = json.loads(mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/mgm/report.json"))
    assert logged == pytest.approx(loggable_metrics(report["metrics"]))


def test_log_result_logs_every_metric_to_the_file_store(scripted_server, file_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    result = judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"])
    with mlflow.start_run() as run:
        log_result(result, log_metrics=True, all_metrics=True)
    logged = MlflowClient().get_run(run.info.run_id).data.metrics
    expected = {k: v for k, v in result.metrics.items() if v == v}  # NaN is not logged
    assert logged == pytest.approx(expected)


def test_a_logging_failure_says_where_the_judged_tables_are(scripted_server, file_store, monkeypatch):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    result = judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"])

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(MlflowClient, "log_batch", broken)
    with mlflow.start_run(), pytest.raises(LoggingFailedError, match="Nothing judged is lost") as failure:
        log_result(result, log_metrics=True)
    folder = str(failure.value).split("are in ")[1].split(" (and")[0]
    import pandas as pd

    assert len(pd.read_parquet(f"{folder}/rows.parquet")) == len(data)
