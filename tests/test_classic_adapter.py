"""The classic ``mlflow.models.evaluate`` path as a thin adapter (issue 25): each row validated once and judged once
per evaluation, the run logged once by the adapter, the same results whether or how MLflow probes a metric, and
the run's metrics within the default budget (every one with ``all_metrics=True``)."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.models.evaluation.default_evaluator import BuiltInEvaluator
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, frame

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.summarization.metrics import run_metrics
from mlflow_genai_metrics.tracking import classic, summarization_metrics
from mlflow_genai_metrics.tracking.run_logging import loggable_metrics

BUDGET = 40  # run metrics by default (issue 25: "aim for under 40")


@pytest.fixture
def counted(monkeypatch):
    """Counts of the adapter's validations (prepare_rows, with the rows each saw) and loggings (log_result)."""
    counts = {"validated": [], "logged": []}
    validate, log = classic.prepare_rows, classic.log_result
    monkeypatch.setattr(classic, "prepare_rows", lambda sources, *a, **k: (counts["validated"].append(len(sources)), validate(sources, *a, **k))[1])
    monkeypatch.setattr(classic, "log_result", lambda result, **k: (counts["logged"].append(len(result.rows)), log(result, **k))[1])
    return counts


def probe_rows(monkeypatch, rows: int | None) -> None:
    """Make MLflow test every metric on the first ``rows`` rows before the full pass, as ``_test_first_row`` does on
    one (None: no test at all)."""

    def probe(self, metrics, eval_df, other_output_df):
        for metric in metrics if rows else []:
            _, args = self._get_args_for_metrics(metric, eval_df.iloc[:rows], self.X.copy_to_avoid_mutation().iloc[:rows], other_output_df)
            if value := metric.evaluate(args):
                self.metrics_values[metric.name] = value

    monkeypatch.setattr(BuiltInEvaluator, "_test_first_row", probe)


def evaluate(server, data: pd.DataFrame, judge=None, **options) -> tuple[str, mlflow.models.EvaluationResult]:
    with mlflow.start_run() as run:
        evaluation = mlflow.models.evaluate(
            data=data, predictions="summary", targets="reference",
            extra_metrics=summarization_metrics(judge or judge_for(server), source_col="text", id_col="id", **options),
        )
    return run.info.run_id, evaluation


def report_of(run_id: str) -> dict:
    return json.loads(mlflow.artifacts.load_text(f"runs:/{run_id}/mgm/report.json"))


def test_each_row_is_validated_once_judged_once_and_the_run_logged_once(scripted_server, mlflow_store, counted):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    run_id, evaluation = evaluate(server, frame(), judge := judge_for(server))
    assert counted["validated"] == [len(ARTICLES)]  # MLflow's test of every metric on the first row validates nothing
    assert counted["logged"] == [len(ARTICLES)]
    # claims, verdicts, key points, coverage: one pass per row; beside them only the retries the judge counted (a
    # loaded CI machine once saw 25 requests for 24: a request sent again, logged at INFO, counted in usage.retries)
    assert server.request_count == 4 * len(ARTICLES) + judge.usage.retries
    assert report_of(run_id)["rows"] == len(ARTICLES)
    assert evaluation.metrics["alignment"] == 1.0


def test_without_mlflow_s_probe_the_results_are_the_same(scripted_server, mlflow_store, counted, monkeypatch):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    expected = judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"], references=data["reference"])
    calls = server.request_count
    probe_rows(monkeypatch, None)
    run_id, evaluation = evaluate(server, data)
    # each row's four passes asked once on each path (a request the transport sent again, as once under a loaded CI
    # machine: 25 requests for 24, is the same request, not another judgement)
    asked = [{json.dumps(r.body["messages"], sort_keys=True) for r in part} for part in (server.requests[:calls], server.requests[calls:])]
    assert len(asked[0]) == len(asked[1]) == 4 * len(ARTICLES) and counted["validated"] == counted["logged"] == [len(ARTICLES)]
    assert evaluation.metrics == pytest.approx(loggable_metrics(run_metrics(expected.metrics)))
    table = evaluation.tables["eval_results_table"].set_index("id")
    assert table["claim_count/score"].tolist() == expected.rows.set_index("id").loc[table.index, "claim_count"].tolist()


def test_a_two_row_probe_is_answered_empty_and_costs_nothing(scripted_server, mlflow_store, counted, monkeypatch):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    probe_rows(monkeypatch, 2)
    run_id, evaluation = evaluate(server, frame(), judge := judge_for(server))
    assert counted["validated"] == counted["logged"] == [len(ARTICLES)]
    assert server.request_count == 4 * len(ARTICLES) + judge.usage.retries and report_of(run_id)["rows"] == len(ARTICLES)
    assert evaluation.metrics["alignment_n"] == len(ARTICLES)


def test_metrics_called_directly_judge_what_they_are_given(scripted_server, mlflow_store, counted):
    """No run, no dataset input: every distinct dataset a metric is handed is judged as given, once."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    metrics = {m.name: m for m in summarization_metrics(judge_for(server), source_col="text", id_col="id")}
    two = metrics["alignment_n"].eval_fn(data["summary"].head(2), data["text"].head(2), data["id"].head(2))
    assert two.aggregate_results == {"alignment_n": 2.0}
    for name in ("aligned", "alignment", "alignment_n", "defect_rate"):
        value = metrics[name].eval_fn(data["summary"], data["text"], data["id"])
    assert value.aggregate_results["contradiction_n"] == len(ARTICLES)
    assert metrics["aligned"].eval_fn(data["summary"], data["text"], data["id"]).scores == [1.0] * len(ARTICLES)
    assert counted["validated"] == [2, len(ARTICLES)] and counted["logged"] == []  # no run to log to
    assert server.request_count == 4 * (2 + len(ARTICLES))


def test_a_bad_row_is_refused_once_naming_it_before_any_judge_call(scripted_server, mlflow_store, counted):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame().head(1).assign(text=[" "])  # one row: MLflow's first-row test is the whole dataset
    with pytest.raises(Exception, match=r"row 0 \(id 'biz/1'\): the source is empty or not text"):
        evaluate(server, data)
    assert counted["validated"] == [1] and server.request_count == 0


def test_the_run_metrics_stay_within_the_budget_by_default(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    run_id, evaluation = evaluate(server, frame())
    logged = MlflowClient().get_run(run_id).data.metrics
    report = report_of(run_id)["metrics"]
    assert len(logged) <= BUDGET and logged == pytest.approx(loggable_metrics(run_metrics(report)))
    assert "claim_support_rate" not in logged and "claim_support_rate" in report  # in the report, not a run metric
    assert len(summarization_metrics(judge_for(server), source_col="text")) < 60  # one MLflow metric per logged name


def test_all_metrics_logs_every_aggregate(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    run_id, evaluation = evaluate(server, frame(), all_metrics=True)
    logged = MlflowClient().get_run(run_id).data.metrics
    assert logged == pytest.approx(loggable_metrics(report_of(run_id)["metrics"]))
    assert len(logged) > BUDGET and evaluation.metrics == pytest.approx(logged)


def test_a_category_is_read_as_on_every_path_and_one_that_is_not_text_names_its_row(scripted_server, mlflow_store):
    """Categories of mixed types (``7`` beside ``"sport"``) are text as on the plain route; a list names its row, before
    any judge call (it once failed the run's tables at the end, after every call)."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    data["category"] = [7, "sport", 7.0][: len(data)] + ["sport"] * max(0, len(data) - 3)
    run_id, _ = evaluate(server, data, category_col="category")
    assert report_of(run_id)["rows"] == len(ARTICLES)
    assert set(pd.read_parquet(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/mgm/rows.parquet"))["category"]) == {"7", "sport"}
    asked = server.request_count
    data["category"] = [["sport", "football"]] + ["sport"] * (len(data) - 1)
    with pytest.raises(Exception, match=r"row 0: the category column 'category' must be text \(or a number\); got list"):
        evaluate(server, data, category_col="category")
    assert server.request_count == asked
