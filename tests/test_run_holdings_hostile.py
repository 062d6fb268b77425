"""What a finished run holds, read back as a user reads it: a blank category and a figure without an interval.

Runs are real MLflow runs in a SQLite store, judged by the scripted server."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import mlflow
import pandas as pd
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import evaluate_summaries, plots
from mlflow_genai_metrics.tracking import ClaimAlignment
from mlflow_genai_metrics.tracking.genai import parse_row


def _records(categories: list) -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id, "category": category}, "outputs": first_sentence(text)}
            for (row_id, _, text), category in zip(ARTICLES, categories)]


def test_a_blank_category_is_no_category_in_the_run_s_rows_and_plots(scripted_server, mlflow_store):
    """A category of "" or spaces was kept as a category of its own: a nameless bar in the run's per-category plot,
    beside the rows without one (None) which the plot leaves out."""
    assert parse_row({"text": ARTICLES[0][2], "category": "  "}, "The council approved it.").category is None
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    evaluation = evaluate_summaries(_records(["", " \t", "sport"]), judges=[ClaimAlignment(judge)])
    rows = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=evaluation.run_id, artifact_path="mgm/rows.parquet"))
    assert rows.set_index("id")["category"].isna().to_dict() == {"biz/1": True, "biz/2": True, "spo/1": False}
    blank = evaluate_summaries(_records(["", "  "]), judges=[ClaimAlignment(judge)])
    assert "mgm_plot_categories.png" not in {a.path for a in MlflowClient().list_artifacts(blank.run_id)}


def test_a_bar_without_an_interval_says_so_with_its_n_on_the_run_s_plot():
    """A figure with no interval (1 row) was drawn as a bar with no whisker, which reads as a zero-width interval."""
    figure = plots.metric_bars({"this run": {"alignment": 1.0, "alignment_ci_low": math.nan, "alignment_ci_high": math.nan,
                                             "alignment_n": 1.0, "strict_alignment": 0.5, "strict_alignment_ci_low": 0.1,
                                             "strict_alignment_ci_high": 0.9, "strict_alignment_n": 2.0}})
    texts = [t.get_text() for t in figure.axes[0].texts]
    plt.close(figure)
    assert texts == ["no interval\nn=1"]
