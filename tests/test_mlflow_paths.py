"""Both MLflow evaluation paths against a real SQLite tracking store and the scripted judge server."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest
from helpers import judge_for, same_number
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, frame

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.tracking import log_results, summarization_metrics, summarization_scorers

ROW_METRICS = ["claim_count", "supported_claims", "contradicted_claims", "unverifiable_claims", "support_rate",
               "aligned", "strictly_aligned", "coverage", "defect_contradiction", "defect_unverifiable", "defect_empty"]
GENAI_JUDGES = ["claim_alignment", "key_point_coverage", "grounding"]
# The run metrics of the default budget (summarization.metrics.run_metrics); every other figure is in the report
RUN_METRICS = ["alignment", "alignment_ci_low", "alignment_ci_high", "defect_rate/contradiction",
               "defect_rate/contradiction_ci_low", "strict_alignment", "richness", "richness_n", "coverage", "coverage_n",
               "judge_error_rate", "judge/calls", "grounding", "grounded_rate"]
REPORT_ONLY = ["defect_rate/unverifiable", "defect_rate/empty", "claim_support_rate", "judge/prompt_tokens",
               "judge/completion_tokens", "judge/cache_hit_rate"]
ARTIFACTS = ["mgm/claims.parquet", "mgm/key_points.parquet", "mgm/report.json", "mgm/rows.parquet", "mgm_claims.json",
             "mgm_key_points.json", "mgm_rows.json", "mgm_plot_metrics.png", "mgm_plot_verdicts.png",
             "mgm_plot_categories.png"]


def artifact_paths(run_id: str) -> list[str]:
    client = MlflowClient()
    found, folders = [], [None]
    while folders:
        for item in client.list_artifacts(run_id, folders.pop()):
            (folders if item.is_dir else found).append(item.path)
    return sorted(path for path in found if path.startswith("mgm"))


def judge_calls_for_judge_summaries(scripted_server) -> int:
    """What judge_summaries costs on the same rows: the yardstick for one judge pass per row."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"])
    return server.request_count


def test_classic_path_logs_rows_metrics_artifacts_and_signature_with_one_judge_pass(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    metrics = summarization_metrics(judge_for(server), source_col="text", id_col="id", category_col="category")
    with mlflow.start_run() as run:
        evaluation = mlflow.models.evaluate(data=data, predictions="summary", targets="reference", extra_metrics=metrics)
    assert server.request_count == judge_calls_for_judge_summaries(scripted_server) == 4 * len(ARTICLES)
    table = evaluation.tables["eval_results_table"]
    for name in ROW_METRICS + ["rouge1", "rougeL", "rougeLsum", "bleu", "chrf", "summary_words"]:
        assert f"{name}/score" in table, name
    for name in ROW_METRICS:
        assert f"{name}/justification" in table, name
    assert table.loc[0, "aligned/justification"].startswith("1 claims: 0 contradicted")
    logged = MlflowClient().get_run(run.info.run_id).data
    for name in RUN_METRICS + ["rougeL"]:
        assert name in logged.metrics, name
    assert "richness_ci_high" not in logged.metrics  # 6 rows: a mean's interval would not hold its coverage
    assert logged.metrics["alignment"] == 1.0 and logged.metrics["judge/calls"] == server.request_count
    assert logged.tags["mgm.signature"].startswith("judge:scripted-judge|base:localhost|mode:json_schema|max_tokens:default|claims:v1-")
    assert logged.params["mgm.signature"] == logged.tags["mgm.signature"] and logged.params["mgm.judge"] == "scripted-judge"
    assert artifact_paths(run.info.run_id) == sorted(ARTIFACTS)
    report = json.loads(mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/mgm/report.json"))
    assert report["metrics"]["alignment"] == 1.0 and report["rows"] == len(ARTICLES)
    for name in REPORT_ONLY + ["rouge1", "bleu", "chrf"]:  # beyond the default budget: in the report only
        assert name in report["metrics"] and name not in logged.metrics, name


def test_classic_path_without_targets_gives_judge_metrics_only(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame().drop(columns=["reference"])
    with mlflow.start_run():
        evaluation = mlflow.models.evaluate(data=data, predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text"))
    assert "aligned/score" in evaluation.tables["eval_results_table"]
    assert "rouge1/score" not in evaluation.tables["eval_results_table"]
    assert "alignment" in evaluation.metrics and "rouge1" not in evaluation.metrics


def test_classic_path_marks_a_failed_row_empty_with_its_error_as_justification(scripted_server, mlflow_store):
    from mlflow_genai_metrics.testing import Reply

    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: Reply("garbage") if kind == "claims" and "Shares" in request.messages[0]["content"] else None
    server = scripted_server(endpoint, models=Endpoint.models)
    with mlflow.start_run():
        evaluation = mlflow.models.evaluate(data=frame(), predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text"))
    table = evaluation.tables["eval_results_table"]
    assert pd.isna(table.loc[1, "aligned/score"])
    assert "claim extraction failed: invalid_answer" in table.loc[1, "aligned/justification"]
    assert evaluation.metrics["judge_error_rate"] == pytest.approx(1 / 6)
    assert evaluation.metrics["alignment"] == 1.0  # the failed row is not counted as unaligned


def genai_data() -> list[dict]:
    data = frame()
    return [
        {"inputs": {"text": row.text, "id": row.id, "category": row.category}, "outputs": row.summary}
        for row in data.itertuples()
    ]


def test_genai_path_gives_one_feedback_per_judge_and_the_same_run_report(scripted_server, mlflow_store, tmp_path):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    scorers = summarization_scorers(judge_for(server, cache_dir=tmp_path / "cache"))
    evaluation = mlflow.genai.evaluate(data=genai_data(), scorers=scorers)
    log_results(evaluation.run_id, scorers)  # its requests answered by the cache
    assert server.request_count == judge_calls_for_judge_summaries(scripted_server)  # no request twice, three judges
    frame_out = evaluation.result_df
    assert sorted(c.removesuffix("/value") for c in frame_out if c.endswith("/value")) == sorted(GENAI_JUDGES)
    assert set(frame_out["claim_alignment/value"]) == {"yes"}
    assert frame_out["claim_alignment/rationale"].str.startswith("**Yes**: 1 claim,").all()
    logged = MlflowClient().get_run(evaluation.run_id).data
    for name in RUN_METRICS:
        assert name in logged.metrics, name
    # the report asked what the scorers asked (every answer from the cache): the run's calls are the evaluation's
    assert logged.metrics["judge/calls"] == server.request_count
    assert artifact_paths(evaluation.run_id) == sorted(ARTIFACTS)
    rows = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=evaluation.run_id, artifact_path="mgm/rows.parquet"))
    assert sorted(rows["id"]) == sorted(i for i, _, _ in ARTICLES)


def test_genai_feedback_carries_the_counts_as_metadata_and_failures_as_errors(scripted_server, mlflow_store):
    from mlflow_genai_metrics.testing import Reply

    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: Reply("garbage") if kind == "claims" and "Shares" in request.messages[0]["content"] else None
    server = scripted_server(endpoint, models=Endpoint.models)
    scorers = summarization_scorers(judge_for(server))
    evaluation = mlflow.genai.evaluate(data=genai_data(), scorers=scorers)
    log_results(evaluation.run_id, scorers)
    traces = mlflow.search_traces(run_id=evaluation.run_id, return_type="list")
    feedback = [a for t in traces for a in t.info.assessments if a.name == "claim_alignment"]
    failed = [f for f in feedback if f.error is not None]
    judged = [f for f in feedback if f.error is None]
    assert len(failed) == 1 and failed[0].value is None
    assert "claim extraction failed" in failed[0].error.error_message
    assert {k: judged[0].metadata[k] for k in ("claims", "supported", "contradicted", "unverifiable")} == {
        "claims": "1", "supported": "1", "contradicted": "0", "unverifiable": "0"
    }
    logged = MlflowClient().get_run(evaluation.run_id).data.metrics
    assert logged["judge_error_rate"] == pytest.approx(1 / 6)


def test_both_paths_share_the_judges_cache_for_the_same_rows(scripted_server, mlflow_store, tmp_path):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with mlflow.start_run():
        mlflow.models.evaluate(data=frame(), predictions="summary", extra_metrics=summarization_metrics(judge_for(server, cache_dir=tmp_path), source_col="text"))
    after_classic = server.request_count
    scorers = summarization_scorers(judge_for(server, cache_dir=tmp_path))
    evaluation = mlflow.genai.evaluate(data=genai_data(), scorers=scorers)
    log_results(evaluation.run_id, scorers)
    assert server.request_count == after_classic  # the genai path's judgements all came from the cache
    report = json.loads(mlflow.artifacts.load_text(f"runs:/{evaluation.run_id}/mgm/report.json"))
    assert report["metrics"]["judge/cache_hit_rate"] == 1.0


def test_a_category_whose_every_row_failed_still_gets_its_report_and_plots(scripted_server, mlflow_store):
    from mlflow_genai_metrics.testing import Reply

    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: Reply("garbage") if kind == "claims" and ("Shares" in request.messages[0]["content"] or "council" in request.messages[0]["content"]) else None
    server = scripted_server(endpoint, models=Endpoint.models)
    with mlflow.start_run() as run:
        evaluation = mlflow.models.evaluate(data=frame(), predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text", category_col="category"))
    assert evaluation.metrics["judge_error_rate"] == pytest.approx(2 / 6)
    assert "mgm_plot_categories.png" in artifact_paths(run.info.run_id)


def test_mlflow_s_first_row_test_pass_logs_no_artifacts(scripted_server, mlflow_store):
    """MLflow tests each metric on the first row before the full pass: that one-row result must never be logged."""
    from mlflow_genai_metrics.tracking import classic

    server = scripted_server(Endpoint(), models=Endpoint.models)
    logged_sizes = []
    original = classic.log_result
    classic.log_result = lambda result, **kw: (logged_sizes.append(len(result.rows)), original(result, **kw))
    try:
        with mlflow.start_run():
            mlflow.models.evaluate(data=frame(), predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text"))
        with mlflow.start_run() as one_row:
            mlflow.models.evaluate(data=frame().head(1), predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text"))
    finally:
        classic.log_result = original
    assert logged_sizes == [len(ARTICLES), 1]
    assert "mgm/report.json" in artifact_paths(one_row.info.run_id)


AGGREGATES = [name for base in ("alignment", "defect_rate/contradiction", "defect_rate/empty", "strict_alignment",
                                "claim_support_rate", "richness", "coverage", "judge_error_rate")
              for name in (base, f"{base}_ci_low", f"{base}_ci_high", f"{base}_n")]


def test_the_same_rows_give_the_same_answer_on_every_path(scripted_server, mlflow_store):
    """judge_summaries, mlflow.models.evaluate and mlflow.genai.evaluate: a None summary is an empty summary on
    each, and two rows with the same article and summary under distinct ids are two rows on each."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    data["summary"] = data["summary"].astype(object)
    data.loc[1, "summary"] = None  # a model that wrote nothing
    data.loc[5, ["text", "summary"]] = data.loc[4, ["text", "summary"]].to_list()  # the same content, another id
    data.loc[0, "summary"] = "The council rejected the budget."  # contradicted

    api = judge_summaries(data["text"], data["summary"], judge=judge_for(server), ids=data["id"])
    with mlflow.start_run():
        classic = mlflow.models.evaluate(
            data=data, predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text", id_col="id", all_metrics=True)
        )
    records = [{"inputs": {"text": t, "id": i}, "outputs": s} for i, t, s in zip(data["id"], data["text"], data["summary"])]
    scorers = summarization_scorers(judge_for(server))
    genai = mlflow.genai.evaluate(data=records, scorers=scorers)
    log_results(genai.run_id, scorers)
    genai_metrics = json.loads(mlflow.artifacts.load_text(f"runs:/{genai.run_id}/mgm/report.json"))["metrics"]

    assert api.metrics["defect_rate/empty"] == pytest.approx(1 / 6) and api.metrics["alignment"] == pytest.approx(4 / 6)
    for name in AGGREGATES:
        assert same_number(classic.metrics.get(name), api.metrics[name]), name
        assert same_number(genai_metrics.get(name), api.metrics[name]), name
    assert math.isnan(api.metrics["richness_ci_low"])  # 6 rows: no interval of a mean, on any path (MLflow stores no NaN)
    report = json.loads(open(mlflow.artifacts.download_artifacts(run_id=genai.run_id, artifact_path="mgm/report.json")).read())
    assert report["rows"] == len(data) == len(api.rows)
    genai_rows = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=genai.run_id, artifact_path="mgm/rows.parquet"))
    columns = ["claim_count", "aligned", "defect_empty", "coverage"]
    expected = api.rows.set_index("id")[columns].sort_index()
    assert genai_rows.set_index("id")[columns].sort_index().equals(expected)


def test_duplicate_ids_are_refused_before_any_judge_call_on_the_classic_path(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    data.loc[3, "id"] = data.loc[0, "id"]
    with mlflow.start_run(), pytest.raises(Exception, match="the id repeats row 0"):
        mlflow.models.evaluate(data=data, predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text", id_col="id"))
    assert server.request_count == 0


def test_an_empty_table_is_a_clear_error_before_mlflow_sees_it(scripted_server, mlflow_store, tmp_path, capsys):
    from mlflow_genai_metrics.cli import main as mgm

    server = scripted_server(Endpoint(), models=Endpoint.models)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code = mgm(["evaluate", str(empty), "--tracking-uri", mlflow_store, "--judge-model", "scripted-judge", "--judge-base-url", server.base_url])
    assert code == 2 and "has no rows: nothing to evaluate" in capsys.readouterr().err
    assert server.request_count == 0
