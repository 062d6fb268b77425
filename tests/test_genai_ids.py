"""Duplicate ids are refused on the ``mlflow.genai.evaluate`` path as on every other (issue 25), never renamed:
``evaluate_summaries`` before any judge call or run, naming the id and the rows in ``prepare_rows``' words; plain
``mlflow.genai.evaluate`` with our judges logs no figures, tags the run ``mgm.error`` and warns, naming the ids. A
row without an id is known by its source's hash, so two rows of one article without ids are refused too, saying to
give ids. On a real SQLite store and the scripted judge."""

from __future__ import annotations

import logging

import mlflow
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import evaluate_summaries
from mlflow_genai_metrics.summarization.judging import source_key
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, log_results
from mlflow_genai_metrics.tracking.rows import ERROR_TAG


def records() -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]


def with_repeated_id() -> list[dict]:
    """Six rows, the last one under the id of the first (another article)."""
    rows = records()
    rows[5]["inputs"]["id"] = "biz/1"
    return rows


def same_article_without_ids() -> list[dict]:
    """Two summaries of one article and a third row, none with an id."""
    text = ARTICLES[0][2]
    return [{"inputs": {"text": text}, "outputs": first_sentence(text)}, {"inputs": {"text": text}, "outputs": "The mayor welcomed it."},
            {"inputs": {"text": ARTICLES[1][2]}, "outputs": first_sentence(ARTICLES[1][2])}]


@pytest.fixture
def server(scripted_server):
    return scripted_server(Endpoint(), models=Endpoint.models)


def no_run_and_no_call(server) -> bool:
    experiment = mlflow.get_experiment_by_name("mgm-tests")
    return not MlflowClient().search_runs([experiment.experiment_id]) and server.request_count == 0 and server.model_listings == 0


def test_evaluate_summaries_refuses_a_repeated_id_before_any_call_or_run(server, mlflow_store):
    judge = judge_for(server)
    with pytest.raises(ValueError, match="cannot judge these rows") as raised:
        evaluate_summaries(with_repeated_id(), judges=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    assert "row 5 (id 'biz/1'): the id repeats row 0 (id 'biz/1'); both are stored as 'biz/1'; ids must be unique" in str(raised.value)
    assert no_run_and_no_call(server)


def test_a_refused_summary_is_named_once_by_its_own_number(server, mlflow_store):
    """The answers' twin (test_rag_mlflow): once "row 1 (id 'biz/2'): cannot judge these rows: row 0 (id 'biz/2'):
    ...", the one-row check's own "row 0" beside the row's real number."""
    rows = records()
    rows[1]["outputs"] = "The council \udc80 met."
    with pytest.raises(ValueError) as raised:
        evaluate_summaries(rows, judges=[Grounding()])
    assert str(raised.value) == ("cannot judge these rows:\n  row 1 (id 'biz/2'): the summary cannot be encoded as UTF-8: "
                                 "surrogates not allowed ('\\udc80' at character 12)")
    assert no_run_and_no_call(server)


def test_ids_stored_alike_are_the_same_id(server, mlflow_store):
    rows = records()
    rows[0]["inputs"]["id"], rows[1]["inputs"]["id"] = 7, "7"
    with pytest.raises(ValueError, match=r"row 1 \(id '7'\): the id repeats row 0 \(id 7\); both are stored as '7'"):
        evaluate_summaries(rows, judges=[Grounding()])
    assert no_run_and_no_call(server)


def test_two_rows_of_one_article_without_ids_are_refused_asking_for_ids(server, mlflow_store):
    with pytest.raises(ValueError) as raised:
        evaluate_summaries(same_article_without_ids(), judges=[ClaimAlignment(judge_for(server))])
    message = str(raised.value)
    assert "row 1 (no id): its source is that of row 0 (no id)" in message and source_key(ARTICLES[0][2]) in message
    assert "give each row an id (inputs['id'])" in message
    assert no_run_and_no_call(server)


def test_rows_without_ids_of_distinct_articles_are_evaluated(server, mlflow_store):
    rows = same_article_without_ids()[::2]
    evaluation = evaluate_summaries(rows, judges=[ClaimAlignment(judge_for(server)), Grounding()])
    assert evaluation.metrics["alignment_n"] == 2
    assert sorted(evaluation.result.rows["id"]) == sorted(source_key(r["inputs"]["text"]) for r in rows)


def test_log_results_of_a_run_with_a_repeated_id_logs_no_figures_and_says_which(server, mlflow_store, monkeypatch, caplog):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "4")
    judge = judge_for(server)
    scorers = [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()]
    result = mlflow.genai.evaluate(data=with_repeated_id(), scorers=scorers)
    with caplog.at_level(logging.WARNING, logger="mlflow_genai_metrics"), pytest.raises(ValueError, match="the id repeats"):
        log_results(result.run_id, scorers)
    run = MlflowClient().get_run(result.run_id)
    error = run.data.tags[ERROR_TAG]
    assert "(id 'biz/1'): the id repeats the row of trace tr-" in error
    assert not {"alignment_n", "coverage_n", "grounding_n", "alignment"} & set(run.data.metrics)
    assert "mgm.signature" not in run.data.params  # no result logged, so no row renamed biz/1#2 anywhere
    assert any("the id repeats" in record.getMessage() and "'biz/1'" in record.getMessage() for record in caplog.records)


def test_log_results_of_two_rows_of_one_article_and_no_ids_says_to_give_ids(server, mlflow_store, monkeypatch):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "4")
    scorers = [ClaimAlignment(judge_for(server)), Grounding()]
    result = mlflow.genai.evaluate(data=same_article_without_ids(), scorers=scorers)
    with pytest.raises(ValueError, match="give each row an id"):
        log_results(result.run_id, scorers)
    error = MlflowClient().get_run(result.run_id).data.tags[ERROR_TAG]
    assert "(no id): its source is that of the row of trace tr-" in error and "give each row an id (inputs['id'])" in error


def test_judging_such_a_run_s_traces_again_refuses_the_repeated_id_before_any_call(server, mlflow_store, monkeypatch):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "4")
    judge = judge_for(server)
    result = mlflow.genai.evaluate(data=with_repeated_id(), scorers=[ClaimAlignment(judge), Grounding()])
    asked = server.request_count
    with pytest.raises(ValueError, match=r"\(id 'biz/1'\): the id repeats the row of trace tr-"):
        log_results(result.run_id, [ClaimAlignment(judge_for(server)), Grounding()])  # new judges: from the traces
    assert server.request_count == asked  # refused before the traces were judged again
