"""The run's tables and plots where MLflow shows them: top-level ``mlflow.log_table`` tables written once per run,
top-level plots, the typed Parquet copies under mgm/, and the classic path's own ``eval_results_table``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import Endpoint, frame

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.tracking import load_run, log_result, run_logging, summarization_metrics
from mlflow_genai_metrics.tracking.run_logging import TABLES, plot_artifact, table_artifact


@pytest.fixture
def judged(scripted_server):
    """The six test articles judged once, with their category (for the per-category plot)."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    result = judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"])
    return dataclasses.replace(result, rows=result.rows.assign(category=data["category"].to_numpy()))


def top_level(run_id: str) -> set[str]:
    return {item.path for item in MlflowClient().list_artifacts(run_id) if not item.is_dir}


def logged_table(run_id: str, name: str) -> pd.DataFrame:
    return mlflow.load_table(table_artifact(name), run_ids=[run_id])


def test_the_tables_are_top_level_mlflow_tables(judged, mlflow_store):
    with mlflow.start_run() as run:
        log_result(judged)
    assert {"mgm_rows.json", "mgm_claims.json", "mgm_key_points.json"} <= top_level(run.info.run_id)
    # The tag log_table keeps is what makes the artifact view offer "View as table".
    listed = json.loads(MlflowClient().get_run(run.info.run_id).data.tags["mlflow.loggedArtifacts"])
    assert {"path": "mgm_rows.json", "type": "table"} in listed and {"path": "mgm_claims.json", "type": "table"} in listed
    rows = logged_table(run.info.run_id, "rows")
    assert rows["id"].tolist() == judged.rows["id"].tolist()
    assert rows["claim_count"].tolist() == judged.rows["claim_count"].tolist()
    assert len(logged_table(run.info.run_id, "claims")) == len(judged.claims)
    assert len(logged_table(run.info.run_id, "key_points")) == len(judged.key_points)


def test_logging_again_to_the_same_run_keeps_each_row_once(judged, mlflow_store, tmp_path):
    with mlflow.start_run() as run:
        log_result(judged)
        first = {name: Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=table_artifact(name), dst_path=str(tmp_path / "1"))).read_text() for name in TABLES}
        log_result(judged)
    for name in TABLES:
        assert len(logged_table(run.info.run_id, name)) == len(getattr(judged, name)), name
        again = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=table_artifact(name), dst_path=str(tmp_path / "2"))).read_text()
        assert again == first[name], f"{name}: the replacement is not in log_table's format"
    assert len(load_run(run.info.run_id).rows) == len(judged.rows)


def test_a_result_s_tags_and_params_go_in_one_request(judged, mlflow_store, monkeypatch):
    """Against a tracking server each tag and param was a request of its own (about 17 a run); they go in one batch,
    logged twice to one run as once (params are write-once: the second sends none)."""
    calls: list[tuple[str, int, int]] = []
    batch = MlflowClient.log_batch

    def counted(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        calls.append(("log_batch", len(params), len(tags)))
        return batch(self, run_id, metrics=metrics, params=params, tags=tags, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", counted)
    for one_by_one in ("set_tag", "log_param"):  # (MLflow's log_table sets its own tag: counted only when it is ours)
        def one(self, run_id, key, value, *args, name=one_by_one, real=getattr(MlflowClient, one_by_one), **kwargs):
            if key.startswith("mgm."):
                calls.append((f"{name} {key}", 0, 0))
            return real(self, run_id, key, value, *args, **kwargs)

        monkeypatch.setattr(MlflowClient, one_by_one, one)
    with mlflow.start_run() as run:
        log_result(judged)
        log_result(judged)
    [(first, params, tags), (second, again, _)] = calls
    assert first == second == "log_batch"
    logged = MlflowClient().get_run(run.info.run_id).data
    assert params == len([key for key in logged.params if key.startswith("mgm.")]) > 5 and again == 0
    assert tags >= 1 and logged.tags["mgm.signature"] == judged.signature


def test_the_plots_are_top_level_images(judged, mlflow_store):
    with mlflow.start_run() as run:
        log_result(judged)
    assert {plot_artifact(name) for name in ("metrics", "verdicts", "categories")} <= top_level(run.info.run_id)
    assert plot_artifact("metrics") == "mgm_plot_metrics.png"


def test_the_typed_parquet_copies_stay_under_mgm(judged, mlflow_store):
    with mlflow.start_run() as run:
        log_result(judged)
    inside = {item.path for item in MlflowClient().list_artifacts(run.info.run_id, "mgm")}
    assert inside == {"mgm/rows.parquet", "mgm/claims.parquet", "mgm/key_points.parquet", "mgm/report.json"}
    rows = load_run(run.info.run_id).rows
    assert str(rows["claim_count"].dtype) == str(judged.rows["claim_count"].dtype)


class PartsResult:
    """A result whose tables are Parquet folders of parts with fresh names each time, as Spark writes them."""

    TABLE_NAMES = TABLES

    def __init__(self, judged, parts: int = 3):
        self.judged, self.parts, self.writes = judged, parts, 0
        self.metrics, self.signature = judged.metrics, judged.signature
        self.rows = object()  # not a pandas frame: the logger must not read the tables whole

    def write_tables(self, folder: Path) -> None:
        self.writes += 1
        for name in TABLES:
            target = folder / f"{name}.parquet"
            target.mkdir()
            table = getattr(self.judged, name).assign(id=lambda t: t["id"].astype(str))
            for index in range(self.parts):
                table.iloc[index :: self.parts].to_parquet(target / f"part-{index:05d}-run{self.writes}.parquet", index=False)

    def verdict_counts(self):
        return self.judged.verdict_counts()

    def category_rows(self):
        return None

    def report(self):
        return self.judged.report()


def test_a_spark_result_logs_at_most_the_documented_sample_as_tables(judged, mlflow_store, monkeypatch):
    monkeypatch.setattr(run_logging, "SPARK_TABLE_ROWS", 4)
    with mlflow.start_run() as run:
        log_result(PartsResult(judged))
    assert len(logged_table(run.info.run_id, "rows")) == 4 < len(judged.rows)
    assert len(logged_table(run.info.run_id, "claims")) == 4
    assert len(load_run(run.info.run_id).rows) == len(judged.rows)  # the Parquet copy holds every row


def test_logging_a_spark_result_again_keeps_each_parquet_row_once(judged, mlflow_store):
    result = PartsResult(judged)
    with mlflow.start_run() as run:
        log_result(result)
        log_result(result)
    assert len(load_run(run.info.run_id).rows) == len(judged.rows)


def test_the_classic_eval_results_table_keeps_its_scores_and_justifications(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    metrics = summarization_metrics(judge_for(server), source_col="text", id_col="id")
    with mlflow.start_run() as run:
        mlflow.models.evaluate(data=frame(), predictions="summary", targets="reference", extra_metrics=metrics)
    assert {"eval_results_table.json", "mgm_rows.json"} <= top_level(run.info.run_id)
    table = mlflow.load_table("eval_results_table.json", run_ids=[run.info.run_id]).set_index("id")
    rows = logged_table(run.info.run_id, "rows").set_index("id")
    assert table["aligned/score"].tolist() == rows.loc[table.index, "aligned"].tolist()
    assert table["aligned/justification"].tolist() == rows.loc[table.index, "reasoning"].tolist()
    assert table["coverage/justification"].str.len().gt(0).all()
