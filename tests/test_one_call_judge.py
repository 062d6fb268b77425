"""The claim judge MLflow's own ``make_judge`` builds (``tracking.one_call``), against the scripted endpoint on a real
SQLite store: it runs in ``mlflow.genai.evaluate`` beside ours on the same rows and gives the same verdicts, one call
per row; it registers and loads back (the endpoint from ``$OPENAI_BASE_URL``, as MLflow has it), runs again, and goes
into ``make_scorer_ensemble`` with ours."""

from __future__ import annotations

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.entities import AssessmentSourceType
from mlflow_helpers import ARTICLES, Endpoint
from test_mlflow_judges import feedback, records, row_id, run_traces

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.prompts import load_prompt
from mlflow_genai_metrics.tracking import ClaimAlignment, make_claim_judge
from mlflow_genai_metrics.tracking.one_call import ONE_CALL_NAME, inference_params


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # MLflow's judges read it: the key the Judge was given (judge_for)


def one_call_requests(server) -> list:
    return [r for r in server.requests if any(m.get("role") == "system" for m in r.body["messages"])]


def test_it_runs_beside_ours_on_the_same_rows_and_gives_the_same_verdicts(scripted_server, mlflow_store, key):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    one_call = make_claim_judge(judge)
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[ClaimAlignment(judge), one_call])

    traces = {row_id(t): t for t in run_traces(result.run_id) if row_id(t)}
    assert sorted(traces) == sorted(i for i, _, _ in ARTICLES)
    for key_, trace in traces.items():
        (ours,) = feedback(trace, "claim_alignment")
        (theirs,) = feedback(trace, ONE_CALL_NAME)
        assert theirs.value == ours.value == ("no" if key_ == "biz/1" else "yes"), key_
        assert theirs.source.source_type == AssessmentSourceType.LLM_JUDGE and theirs.source.source_id == f"openai:/{judge.model}"
        assert "1. " in theirs.rationale and (" - no:" in theirs.rationale) == (key_ == "biz/1")
    # one call per row for it; two for ours (claims, then verdicts)
    assert len(one_call_requests(server)) == len(ARTICLES)
    assert server.request_count == len(ARTICLES) + 2 * len(ARTICLES)


def test_its_requests_carry_the_instructions_model_and_the_judges_parameters(scripted_server, mlflow_store, key):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = Judge("scripted-judge", server.base_url, SECRET_KEY, temperature=0.25, seed=7, max_tokens=300, cache_dir=None)
    one_call = make_claim_judge(judge, name="faithful_one_call")
    assert one_call(inputs=records()[0]["inputs"], outputs=records()[0]["outputs"]).value == "yes"
    (request,) = server.requests
    body = request.body
    assert body["model"] == "scripted-judge" and (body["temperature"], body["seed"], body["max_tokens"]) == (0.25, 7, 300)
    assert load_prompt("claims_mlflow").template.strip() in body["messages"][0]["content"]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["result"]["enum"] == ["yes", "no"]
    assert inference_params(Judge("m", server.base_url, "local", cache_dir=None)) == {"temperature": 0.0}
    assert load_prompt("claims_mlflow").tag in one_call.description


def test_it_registers_loads_back_and_runs_again(scripted_server, mlflow_store, key, monkeypatch):
    from mlflow.genai.scorers import get_scorer

    server = scripted_server(Endpoint(), models=Endpoint.models)
    experiment_id = mlflow.get_experiment_by_name("mgm-tests").experiment_id
    make_claim_judge(judge_for(server)).register(experiment_id=experiment_id)
    # MLflow stores no endpoint with a registered judge: where it runs, $OPENAI_BASE_URL says where to send it
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    loaded = get_scorer(name=ONE_CALL_NAME, experiment_id=experiment_id)
    assert loaded.instructions == load_prompt("claims_mlflow").template.strip()
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[loaded])
    values = {row_id(t): feedback(t, ONE_CALL_NAME)[0].value for t in run_traces(result.run_id) if row_id(t)}
    assert values == {i: "no" if i == "biz/1" else "yes" for i, _, _ in ARTICLES}
    assert len(one_call_requests(server)) == len(ARTICLES)


def test_an_ensemble_takes_it_beside_ours(scripted_server, mlflow_store, key):
    from mlflow.genai.scorers import make_scorer_ensemble

    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    both = make_scorer_ensemble(name="both_faithful", scorers=[ClaimAlignment(judge), make_claim_judge(judge)], ensemble_fn="agg_all")
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[both])
    values = {row_id(t): feedback(t, "both_faithful")[0].value for t in run_traces(result.run_id) if row_id(t)}
    assert values == {i: i != "biz/1" for i, _, _ in ARTICLES}


def test_it_warns_when_no_key_is_set_and_refuses_what_is_not_a_judge(scripted_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.warns(UserWarning, match="OPENAI_API_KEY"):
        make_claim_judge(Judge("scripted-judge", server.base_url, cache_dir=None))  # no key anywhere: a loopback server
    with pytest.raises(TypeError, match="mlflow_genai_metrics.Judge"):
        make_claim_judge("openai:/gpt-4o-mini")


def test_a_judge_given_another_key_than_the_variable_is_refused_not_sent_the_variable(scripted_server, monkeypatch):
    # MLflow's judges send $OPENAI_API_KEY: once the Judge's own key was silently replaced by another service's
    monkeypatch.setenv("OPENAI_API_KEY", "sk-another-service")
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(ValueError, match="MLflow's judges send \\$OPENAI_API_KEY, not the key this Judge was given"):
        make_claim_judge(Judge("scripted-judge", server.base_url, "sk-this-endpoint", cache_dir=None))
    make_claim_judge(Judge("scripted-judge", server.base_url, "sk-another-service", cache_dir=None))  # the same key: made
    make_claim_judge(Judge("scripted-judge", server.base_url, cache_dir=None))  # a key read from the variable: made
    monkeypatch.delenv("OPENAI_API_KEY")  # the URL's credentials alone (a Judge refuses them beside a key)
    with_credentials = server.base_url.replace("http://", "http://judge-user:pw-4f9a1c-hunter2@")
    with pytest.raises(ValueError, match="carries credentials, which MLflow's judge would store") as caught:
        make_claim_judge(Judge("scripted-judge", with_credentials, cache_dir=None))
    assert "hunter2" not in str(caught.value)
    assert server.request_count == 0
