"""Hostile checks of the claim engine's logic: a judge's reply that lists a statement with no word, what a row's
card says about verdicts whose repetitions disagree (``stability=k``), and chunks of a source written without
spaces."""

from __future__ import annotations

import json

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.judge import estimate_tokens
from mlflow_genai_metrics.summarization.cards import claim_card
from mlflow_genai_metrics.summarization.chunking import split_source
from mlflow_genai_metrics.summarization.records import CheckedClaim, RowJudgement
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript, marked_sections

ARTICLE = "The club won on Saturday. The striker scored twice."
SUMMARY = "The club won on Saturday."


@pytest.mark.parametrize("wordless", ["...", "\u2014", "\u200b", "\u00a0\u200b", "?!"], ids=["dots", "dash", "zwsp", "nbsp-zwsp", "marks"])
def test_a_claim_with_no_letter_or_digit_is_refused_and_asked_again_not_counted(scripted_server, wordless):
    def wordless_claim_first(request, kind):
        if kind == "claims" and not request.is_repair:
            return Reply(json.dumps({"claims": ["The club won on Saturday.", wordless]}))
        return None

    server = scripted_server(SummarizationJudgeScript(fault=wordless_claim_first))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False, grounding=False, progress=False)
    asked = [r for r in server.requests if r.purpose == "ExtractedClaims"]
    assert len(asked) == 2 and "no letter or digit" in asked[1].body["messages"][-1]["content"]
    row = result.rows.iloc[0]
    assert row["error"] == "" and row["claim_count"] == 1 and list(result.claims["claim"]) == ["The club won on Saturday."]


def test_a_key_point_with_no_letter_or_digit_is_refused_and_not_a_place_in_coverage(scripted_server):
    def wordless_key_point_first(request, kind):
        if kind == "keypoints" and not request.is_repair:
            return Reply(json.dumps({"key_points": ["The club won on Saturday.", "?!"]}))
        return None

    script = SummarizationJudgeScript(key_points={ARTICLE: ["The club won on Saturday."]}, fault=wordless_key_point_first)
    server = scripted_server(script)
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), grounding=False, progress=False)
    assert server.count(purpose="ExtractedKeyPoints") == 2
    assert result.rows.loc[0, "error"] == "" and result.rows.loc[0, "coverage"] == 1.0  # before: 0.5, "?!" missed


def test_the_card_marks_a_claim_whose_repetitions_disagree(scripted_server):
    def no_in_the_second_repetition(request, kind):
        if kind == "verify" and request.body.get("seed") == 1:
            return Reply(json.dumps({"verdicts": [{"claim": 1, "reason": "asked again", "verdict": "no"}]}))
        return None

    server = scripted_server(SummarizationJudgeScript(fault=no_in_the_second_repetition))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), stability=3, coverage=False, grounding=False,
                             progress=False)
    assert result.rows.loc[0, "unstable_claims"] == 1
    card = claim_card(result.judgements[0])
    assert card.value is True  # 2 of 3 say yes: the majority, supported
    assert "*(unstable: 67% of repetitions agree)*" in card.rationale
    assert card.metadata["unstable_claims"] == "1"


def test_a_card_of_claims_asked_once_says_nothing_of_stability():
    card = claim_card(RowJudgement(id=0, source_key="", claims=[CheckedClaim(claim="The club won.", verdict="yes", reason="r")]))
    assert "unstable" not in card.rationale and "unstable_claims" not in card.metadata


CHINESE = "北京队周六以二比一战胜上海队。前锋打进两球！" * 200  # no space anywhere: 4,400 characters


@pytest.mark.parametrize("text", [CHINESE, "Word " * 10 + "x" * 2000 + " end."], ids=["chinese", "a-2000-letter-word"])
def test_a_source_written_without_spaces_is_cut_into_chunks_that_fit(text):
    chunks = split_source(text, 100)
    assert len(chunks) > 1 and max(estimate_tokens(chunk) for chunk in chunks) <= 100  # before: one chunk of 1,258
    assert "".join("".join(chunk.split()) for chunk in chunks) == "".join(text.split())  # every character, in order


def test_a_chinese_source_longer_than_the_budget_is_verified_chunk_by_chunk_each_within_it(scripted_server):
    server = scripted_server(SummarizationJudgeScript(verdicts={"北京队战胜上海队。": "yes"}))
    result = judge_summaries([CHINESE], ["北京队战胜上海队。"], judge=judge_for(server), max_source_tokens=100,
                             coverage=False, grounding=False, progress=False)
    articles = [marked_sections(r.body["messages"][0]["content"])["ARTICLE"] for r in server.requests if r.purpose == "ClaimVerdicts"]
    assert len(articles) == len(split_source(CHINESE, 100)) > 1
    assert max(estimate_tokens(article) for article in articles) <= 100
    assert result.rows.loc[0, "error"] == "" and result.rows.loc[0, "supported_claims"] == 1


def test_a_verdict_given_twice_for_one_claim_is_refused_and_asked_again_never_guessed(scripted_server):
    twice = '{"verdicts": [{"claim": 1, "reason": "r", "verdict": "no", "verdict": "yes"}]}'

    def verdict_twice(request, kind):
        return Reply(twice) if kind == "verify" else None

    server = scripted_server(SummarizationJudgeScript(fault=verdict_twice))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False, grounding=False, progress=False)
    assert server.count(purpose="ClaimVerdicts") == 2  # the repair turn, saying why
    row = result.rows.iloc[0]
    assert row["error"].startswith("claim verification failed: invalid_answer") and "'verdict' twice" in row["error"]
    assert row.isna()["supported_claims"] and row.isna()["aligned"]  # before: counted yes (the last one), aligned 1
