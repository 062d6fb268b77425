"""Each judge's card carries what its own judgement cost (issue 25): the tokens and the cost in USD of the judge calls
it needed, under MLflow's assessment metadata keys (the ones MLflow's UI shows on a card), split by pass even when
one pass asked both; a cache hit costs 0 and shows 0 tokens; grounding has no such keys; an error card keeps the
cost of the calls made; summed over a run's cards, the cost is the run's ``judge/cost_usd``. On a real SQLite store
and the scripted judge, whose replies report their tokens."""

from __future__ import annotations

from collections import defaultdict

import mlflow
import pytest
from helpers import judge_for
from mlflow.tracing.constant import AssessmentMetadataKey
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import evaluate_summaries
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.testing import Reply
from mlflow_genai_metrics.testing.summarization_judge import marked_sections, pass_of
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage

COST, INPUT, OUTPUT = AssessmentMetadataKey.JUDGE_COST, AssessmentMetadataKey.JUDGE_INPUT_TOKENS, AssessmentMetadataKey.JUDGE_OUTPUT_TOKENS
PRICES = Prices(input=1000.0, output=3000.0)  # USD per million tokens: a cent or so per row
CLAIM_PASSES, KEY_POINT_PASSES = ("claims", "verify"), ("keypoints", "coverage")


def records() -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]


def cards(run_id: str) -> dict[str, dict[str, object]]:
    """Row id -> judge name -> its card, as the run's traces hold them in the store."""
    mlflow.flush_trace_async_logging()
    found: dict[str, dict[str, object]] = defaultdict(dict)
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        inputs = next(span.inputs for span in trace.data.spans if span.parent_id is None)
        for assessment in trace.info.assessments:
            if getattr(assessment, "feedback", None) is not None:
                found[inputs["id"]][assessment.name] = assessment
    return dict(found)


def spent_by_row(server) -> dict[tuple[str, str], list[int]]:
    """(row id, judge) -> [prompt tokens, completion tokens] of the calls the server answered for it: the claim
    passes for claim_alignment, the key-point passes for key_point_coverage."""
    spent: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for request in server.requests:
        prompt = "\n".join(str(m.get("content", "")) for m in request.body["messages"])
        kind = pass_of(marked_sections(request.body["messages"][0]["content"]))
        judge = "claim_alignment" if kind in CLAIM_PASSES else "key_point_coverage"
        (row_id,) = [i for i, _, text in ARTICLES if (first_sentence(text) if kind in ("claims", "coverage") else text) in prompt]
        spent[row_id, judge][0] += request.prompt_tokens
        spent[row_id, judge][1] += request.completion_tokens
    return spent


def run_cost(run_id: str) -> float:
    return MlflowClient().get_run(run_id).data.metrics["judge/cost_usd"]


def card_cost(found: dict[str, dict[str, object]]) -> float:
    return sum(float(card.metadata[COST]) for row in found.values() for card in row.values() if COST in (card.metadata or {}))


def assert_cards_carry_their_own_passes(found, server) -> None:
    spent = spent_by_row(server)
    for row_id, row in found.items():
        for judge in ("claim_alignment", "key_point_coverage"):
            metadata = row[judge].metadata
            assert [int(metadata[INPUT]), int(metadata[OUTPUT])] == spent[row_id, judge], (row_id, judge)
            assert int(metadata[INPUT]) > 0 and float(metadata[COST]) > 0
        assert not {COST, INPUT, OUTPUT} & set(row["grounding"].metadata or {})  # no judge, no judge cost


@pytest.fixture
def server(scripted_server):
    return scripted_server(Endpoint(), models=Endpoint.models)


def test_evaluate_summaries_cards_split_one_pass_by_judge_and_add_up_to_the_run(server, mlflow_store):
    """evaluate_summaries asks claims and key points of each row in one pass: each card still shows its own part."""
    judge = judge_for(server, prices=PRICES)
    evaluation = evaluate_summaries(records(), judges=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    found = cards(evaluation.run_id)
    assert sorted(found) == sorted(i for i, _, _ in ARTICLES)
    assert_cards_carry_their_own_passes(found, server)
    assert card_cost(found) == pytest.approx(run_cost(evaluation.run_id)) and run_cost(evaluation.run_id) > 0


def test_mlflow_genai_evaluate_cards_carry_their_own_passes_and_add_up_to_the_run(server, mlflow_store, monkeypatch):
    """Each card asks its own passes (claims and verdicts; key points and coverage) and carries what they cost: together
    the requests the endpoint saw. (The run's own cost is that of its report, ``log_results``: from the cache, 0.)"""
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "4")
    judge = judge_for(server, prices=PRICES)
    result = mlflow.genai.evaluate(data=records(), scorers=[KeyPointCoverage(judge), ClaimAlignment(judge), Grounding()])
    found = cards(result.run_id)
    assert_cards_carry_their_own_passes(found, server)
    assert card_cost(found) > 0


def test_a_judgement_from_the_cache_costs_nothing_and_says_so(server, mlflow_store, tmp_path):
    judges = lambda: [ClaimAlignment(judge_for(server, prices=PRICES, cache_dir=tmp_path / "cache")), Grounding()]  # noqa: E731
    first = evaluate_summaries(records(), judges=judges())
    asked = server.request_count
    again = evaluate_summaries(records(), judges=judges())
    assert server.request_count == asked and card_cost(cards(first.run_id)) > 0
    for row in cards(again.run_id).values():
        metadata = row["claim_alignment"].metadata
        assert (float(metadata[COST]), int(metadata[INPUT]), int(metadata[OUTPUT])) == (0.0, 0, 0)
    assert run_cost(again.run_id) == 0.0


def test_without_prices_a_card_shows_its_tokens_and_no_cost(server, mlflow_store):
    evaluation = evaluate_summaries(records(), judges=[ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server))])
    for row in cards(evaluation.run_id).values():
        for card in row.values():
            assert int(card.metadata[INPUT]) > 0 and COST not in card.metadata


def test_an_error_card_keeps_the_cost_of_the_calls_made(scripted_server, mlflow_store):
    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: Reply("garbage") if kind == "claims" and "Shares" in request.messages[0]["content"] else None
    server = scripted_server(endpoint, models=Endpoint.models)
    judge = judge_for(server, prices=PRICES)
    evaluation = evaluate_summaries(records(), judges=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    found = cards(evaluation.run_id)
    failed = found["biz/2"]["claim_alignment"]
    assert failed.value is None and "claim extraction failed" in failed.error.error_message
    assert int(failed.metadata[INPUT]) == spent_by_row(server)["biz/2", "claim_alignment"][0] > 0 and float(failed.metadata[COST]) > 0
    assert card_cost(found) == pytest.approx(run_cost(evaluation.run_id))


def test_key_point_coverage_alone_shows_its_key_point_passes_only(server, mlflow_store):
    """The run asks each row's claims too (its figures are the claims' as well), but the coverage card's judgement
    needed the key-point passes only: the claim passes are the run's cost, on no card."""
    judge = judge_for(server, prices=PRICES)
    evaluation = evaluate_summaries(records(), judges=[KeyPointCoverage(judge)])
    found, spent = cards(evaluation.run_id), spent_by_row(server)
    for row_id, row in found.items():
        assert int(row["key_point_coverage"].metadata[INPUT]) == spent[row_id, "key_point_coverage"][0]
    assert card_cost(found) < run_cost(evaluation.run_id)
