"""The MLflow UI, seen: a real `mlflow ui` on 127.0.0.1 rendered by headless Chromium shows our run."""

from __future__ import annotations

import mlflow

from mlflow_genai_metrics import summarization_metrics

from browser import MlflowUi, chromium_path, render
from helpers import judge_for
from mlflow_helpers import Endpoint, frame


def test_the_run_page_lists_the_alignment_metric_and_the_artifacts(scripted_server, mlflow_store, tmp_path):
    assert chromium_path() is not None, "Chromium is missing: ./run installs it (apt-get install chromium)"
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with mlflow.start_run(run_name="ui-check") as run:
        mlflow.models.evaluate(data=frame(), predictions="summary", targets="reference",
                               extra_metrics=summarization_metrics(judge_for(server), source_col="text", id_col="id"))
    experiment_id = run.info.experiment_id
    with MlflowUi(mlflow_store) as ui:
        overview = render(ui.run_url(experiment_id, run.info.run_id), screenshot=tmp_path / "run.png")
        assert "ui-check" in overview
        for metric in ("alignment", "alignment_ci_low", "defect_rate/contradiction", "richness", "judge/calls"):
            assert metric in overview, metric
        assert "mgm.signature" in overview
        table = render(ui.run_url(experiment_id, run.info.run_id, "artifacts/mgm/rows.json"))
        assert "mgm/rows.json" in table and "biz/1" in table and "claim_count" in table
    assert (tmp_path / "run.png").stat().st_size > 10_000
