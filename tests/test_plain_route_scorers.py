"""Plain ``mlflow.genai.evaluate`` with this package's scorers, one evaluation after another with the same scorer
objects: the judge's check (its model listing, once for the rows of an evaluation) reaches no other evaluation,
whether it failed (a model not served yet, a request refused once) or passed; and ``log_results`` asks only the
passes the scorers given ask, so with the judge's cache on it makes no call for what the evaluation asked.

The judge is the scripted server; each test's store is a fresh SQLite one (``mlflow_store``)."""

from __future__ import annotations

from typing import Any

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.testing import AnswersJudgeScript, Fault, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import (
    ClaimAlignment,
    Grounding,
    KeyPointCoverage,
    answer_scorers,
    log_results,
    rewrite_scorers,
)

MODEL = "scripted-judge"
PASSAGES = ["First-time author Tomas Reyes has won the Coastal Book Prize for his novel The Lighthouse Keeper's Daughter."]


@pytest.fixture(autouse=True)
def few_workers(monkeypatch):
    """MLflow's evaluation threads within the SQLite store's connections (at its default of 10 a run waits 30 s)."""
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "4")


def summaries(first: int, count: int = 3) -> list[dict[str, Any]]:
    rows = []
    for i in range(first, first + count):
        text = f"The council of town {i} approved the budget on Monday. The mayor {i} welcomed it. Critics objected strongly."
        rows.append({"inputs": {"text": text, "id": f"r{i}"}, "outputs": f"The council of town {i} approved the budget."})
    return rows


def answers(count: int = 3, *, expected: bool = False) -> list[dict[str, Any]]:
    rows = [{"inputs": {"question": f"What did Tomas Reyes win ({i})?", "passages": PASSAGES, "id": f"q{i}"},
             "outputs": "Tomas Reyes won the Coastal Book Prize."} for i in range(count)]
    for row in rows if expected else []:
        row["expectations"] = {"expected_response": "The Coastal Book Prize."}
    return rows


def unserved_judge(server, **options: Any) -> Judge:
    """A judge of a model the server does not list (yet): ``server.models`` says which it serves."""
    return Judge(MODEL, server.base_url, SECRET_KEY, cache_dir=None, backoff_initial_s=0.01, backoff_max_s=0.05, **options)


def cards(result, name: str) -> tuple[int, list[str]]:
    """How many rows got a value on card ``name``, and the error codes of the others."""
    found = [a["feedback"] for row in result.result_df["assessments"] for a in row if a["assessment_name"] == name]
    assert len(found) == len(result.result_df), f"not one {name} card per row"
    return sum(f["value"] is not None for f in found), [f["error"]["error_code"] for f in found if f.get("error")]


def recording(passes: list[str], fault: Any = None) -> Any:
    """A script ``fault`` that writes down the pass of every judge request (and sends ``fault``'s, if any)."""
    def record(request, kind):
        passes.append(kind)
        return fault(request, kind) if fault is not None else None
    return record


def test_a_model_not_served_yet_fails_its_own_evaluation_only(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript(), models=("another-model",))
    scorers = [ClaimAlignment(unserved_judge(server)), KeyPointCoverage(unserved_judge(server)), Grounding()]
    first = mlflow.genai.evaluate(data=summaries(0), scorers=scorers)
    assert cards(first, "claim_alignment") == (0, ["JUDGE_CONFIG_ERROR"] * 3)
    assert cards(first, "key_point_coverage") == (0, ["JUDGE_CONFIG_ERROR"] * 3)
    assert server.request_count == 0 and server.model_listings == 2  # one check per judge for the evaluation's rows

    server.models = (MODEL,)  # the model is served now: the next evaluation with the same scorers checks again
    second = mlflow.genai.evaluate(data=summaries(0), scorers=scorers)
    assert cards(second, "claim_alignment") == (3, []) and cards(second, "key_point_coverage") == (3, [])
    assert server.request_count > 0 and server.model_listings >= 4


def test_a_request_refused_once_fails_no_later_evaluation(scripted_server, mlflow_store):
    refused: list[str] = []

    def once(request, kind):
        if kind == "claims" and not refused:
            refused.append(kind)
            return Fault.http(403, "blocked by a proxy, once")
        return None

    server = scripted_server(SummarizationJudgeScript(fault=once))
    scorers = [ClaimAlignment(judge_for(server, max_retries=0)), KeyPointCoverage(judge_for(server)), Grounding()]
    first = mlflow.genai.evaluate(data=summaries(0, 4), scorers=scorers)
    assert "JUDGE_CONFIG_ERROR" in cards(first, "claim_alignment")[1]  # the refusal is that evaluation's error

    before = server.request_count
    second = mlflow.genai.evaluate(data=summaries(10, 4), scorers=scorers)
    assert cards(second, "claim_alignment") == (4, []) and cards(second, "key_point_coverage") == (4, [])
    assert server.request_count > before


def test_a_passed_check_is_not_kept_for_a_later_evaluation(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    scorers = [ClaimAlignment(judge_for(server)), Grounding()]
    first = mlflow.genai.evaluate(data=summaries(0), scorers=scorers)
    assert cards(first, "claim_alignment") == (3, [])

    server.models = ("another-model",)  # the endpoint changed: the next evaluation checks again, once, and asks nothing
    listings, requests = server.model_listings, server.request_count
    second = mlflow.genai.evaluate(data=summaries(10), scorers=scorers)
    assert cards(second, "claim_alignment") == (0, ["JUDGE_CONFIG_ERROR"] * 3)
    assert "does not serve model 'scripted-judge'" in second.result_df["claim_alignment/error_message"].iloc[0]
    assert (server.model_listings - listings, server.request_count - requests) == (1, 0)


def test_a_scorer_called_by_hand_is_checked_on_each_call(scripted_server):
    server = scripted_server(SummarizationJudgeScript(), models=("another-model",))
    judge = ClaimAlignment(unserved_judge(server))
    row = summaries(0, 1)[0]
    assert judge(inputs=row["inputs"], outputs=row["outputs"]).error.error_code == "JUDGE_CONFIG_ERROR"
    server.models = (MODEL,)
    assert judge(inputs=row["inputs"], outputs=row["outputs"]).value == "yes"
    assert server.model_listings >= 2


def test_the_answers_scorers_check_each_evaluation_again(scripted_server, mlflow_store):
    server = scripted_server(AnswersJudgeScript(), models=("another-model",))
    scorers = answer_scorers(unserved_judge(server), sufficiency=False)
    first = mlflow.genai.evaluate(data=answers(), scorers=scorers)
    assert cards(first, "answer_faithfulness") == (0, ["JUDGE_CONFIG_ERROR"] * 3)
    assert cards(first, "answer_relevance") == (0, ["JUDGE_CONFIG_ERROR"] * 3)

    server.models = (MODEL,)
    second = mlflow.genai.evaluate(data=answers(), scorers=scorers)
    assert cards(second, "answer_faithfulness") == (3, []) and cards(second, "answer_relevance") == (3, [])


def test_log_results_asks_none_of_the_answer_passes_no_scorer_asked(scripted_server, mlflow_store, tmp_path):
    passes: list[str] = []
    server = scripted_server(AnswersJudgeScript(fault=recording(passes)))
    scorers = answer_scorers(judge_for(server, cache_dir=tmp_path / "cache"), relevance=False, sufficiency=False)
    result = mlflow.genai.evaluate(data=answers(expected=True), scorers=scorers)
    asked = list(passes)
    report = log_results(result.run_id, scorers)
    assert passes == asked  # the cache answered all of it: no relevance, no expected answer's facts
    assert report.metrics["alignment_n"] == 3 and report.metrics["judge/calls"] == server.request_count == len(asked)
    assert report.metrics["answer_relevance_n"] == 0 and report.metrics["context_sufficiency_n"] == 0


def test_log_results_asks_no_instruction_when_no_scorer_checks_it(scripted_server, mlflow_store, tmp_path):
    passes: list[str] = []
    server = scripted_server(SummarizationJudgeScript(fault=recording(passes)))
    scorers = rewrite_scorers(judge_for(server, cache_dir=tmp_path / "cache"))[:2]  # claims and key points, no instruction
    data = [{"inputs": {"input": row["inputs"]["text"], "instruction": "Shorten it.", "id": row["inputs"]["id"]}, "outputs": row["outputs"]}
            for row in summaries(0)]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    asked = list(passes)
    report = log_results(result.run_id, scorers)
    assert passes == asked and "instruction" not in passes
    assert report.metrics["strict_alignment_n"] == 3 and report.metrics["instruction_following_n"] == 0


@pytest.mark.parametrize("cached", [True, False])
def test_the_run_s_judge_usage_is_what_its_evaluation_spent_and_what_the_report_asked(scripted_server, mlflow_store, tmp_path, cached):
    """After a plain evaluation of 16 calls the report once logged judge/calls 0 and judge/cost_usd 0 (its own
    questions, all answered by the cache): the evaluation's cards carry what they cost, and the run adds them up."""
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server, prices="0.15,0.60", cache_dir=tmp_path / "cache" if cached else None)
    scorers = [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()]
    result = mlflow.genai.evaluate(data=summaries(0, 4), scorers=scorers)
    evaluation_calls = server.request_count
    mlflow.flush_trace_async_logging()
    metadata = [a.metadata or {} for t in mlflow.search_traces(run_id=result.run_id, return_type="list") for a in t.info.assessments]
    card_cost = sum(float(m.get("mlflow.assessment.judgeCost", 0.0)) for m in metadata)

    report = log_results(result.run_id, scorers)

    assert evaluation_calls == 16 and sum(int(m.get("mgm.judge_calls", 0)) for m in metadata) == 16
    logged = mlflow.get_run(result.run_id).data.metrics
    assert logged["judge/calls"] == server.request_count == (16 if cached else 32) == report.metrics["judge/calls"]
    assert logged["judge/cost_usd"] == pytest.approx(card_cost * (1 if cached else 2)) and card_cost > 0


def test_a_failed_card_the_report_judged_again_is_named_on_the_run(scripted_server, mlflow_store, tmp_path):
    """One row's claims fail once in the evaluation (HTTP 500, no retry): its card is a JUDGE_ERROR. The report asks
    again (failures are not cached), is answered and counts the row: judge_error_rate 0 beside an error card, once
    without a word. The run names the row in a warning."""
    def once(request, kind):
        if kind == "claims" and "town 2 " in request.prompt_text and request.attempt == 0:
            return Fault.server_error(500, "transient")
        return None

    server = scripted_server(SummarizationJudgeScript(fault=once))
    scorers = [ClaimAlignment(judge_for(server, max_retries=0, cache_dir=tmp_path / "cache")), Grounding()]
    result = mlflow.genai.evaluate(data=summaries(0, 4), scorers=scorers)
    assert cards(result, "claim_alignment") == (3, ["JUDGE_ERROR"])

    report = log_results(result.run_id, scorers)

    assert report.metrics["judge_error_rate"] == 0 and report.metrics["strict_alignment_n"] == 4
    warning = mlflow.get_run(result.run_id).data.tags["mgm.warning.cards_differ"]
    assert warning.startswith("1 row(s) whose card shows a judge error in the evaluation were judged again by log_results "
                              "and answered (ids r2)")
