"""An empty claim list is not an empty summary: a summary is empty only when it has no word (decided without the
judge); no claim from a summary with words is asked again, then an error. Claims are distinct and never blank."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript

ARTICLE = "Everton beat Liverpool 1-0 on Saturday. David Weir is an Everton defender."
SUMMARY = "Everton beat Liverpool. Weir plays for Everton."


def no_claims_the_first_time(request, kind):
    if kind == "claims" and len(request.messages) == 1:
        return Reply(json.dumps({"claims": []}))
    return None


@pytest.mark.parametrize("summary", ["...", " -- !? ", "\u2014", "___"])
def test_a_summary_of_only_punctuation_is_empty_and_never_sent_to_the_judge(scripted_server, summary):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries([ARTICLE], [summary], judge=judge_for(server), coverage=False)
    row = result.rows.iloc[0]
    assert row["error"] == "" and row["claim_count"] == 0 and row["defect_empty"] == 1
    assert server.request_count == 0


def test_no_claim_for_a_summary_with_words_is_asked_once_more_saying_so(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=no_claims_the_first_time))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False)
    assert result.rows.loc[0, "error"] == "" and result.rows.loc[0, "claim_count"] == 2
    asked = [r for r in server.requests if r.purpose == "ExtractedClaims"]
    assert len(asked) == 2
    second = asked[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert json.loads(second[1]["content"]) == {"claims": []}
    assert "Your answer lists no claim, but the summary has words" in second[2]["content"]


def test_no_claim_twice_is_a_no_claims_error_for_the_row_not_an_empty_summary(scripted_server):
    script = SummarizationJudgeScript(claims={SUMMARY: []})
    server = scripted_server(script)
    result = judge_summaries([ARTICLE, ARTICLE], [SUMMARY, "Everton beat Liverpool."], judge=judge_for(server))
    row = result.rows.iloc[0]
    assert row["error"].startswith("claim extraction failed: no_claims: ")
    assert pd.isna(row["claim_count"]) and pd.isna(row["defect_empty"]) and pd.isna(row["aligned"])
    assert result.metrics["judge_error_rate"] == 0.5
    assert result.metrics["defect_rate/empty"] == 0.0
    assert server.count(purpose="ExtractedClaims") == 3  # row 0 twice, row 1 once
    assert server.count(purpose="KeyPointCoverage") == 1  # the failed row is not checked further


def test_a_no_claims_outcome_is_cached_so_a_rerun_asks_nothing(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript(claims={SUMMARY: []}))
    first = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server, cache_dir=tmp_path), coverage=False)
    calls = server.request_count
    again = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server, cache_dir=tmp_path), coverage=False)
    assert server.request_count == calls == 2
    assert again.rows.loc[0, "error"] == first.rows.loc[0, "error"] != ""


def test_repeated_claims_are_verified_once_and_the_copies_removed_are_counted(scripted_server):
    claims = ["Everton beat Liverpool.", "everton  BEAT liverpool.", "Weir plays for Everton.", "Everton beat\nLiverpool."]
    server = scripted_server(SummarizationJudgeScript(claims={SUMMARY: claims}))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False)
    assert result.rows.loc[0, "claim_count"] == 2
    assert list(result.claims["claim"]) == ["Everton beat Liverpool.", "Weir plays for Everton."]
    assert list(result.claims["duplicates_removed"]) == [2, 0]
    assert result.judgements[0].claims[0].duplicates == 2
    verify = next(r for r in server.requests if r.purpose == "ClaimVerdicts")
    assert "2. Weir plays for Everton." in verify.body["messages"][0]["content"]
    assert "\n3. " not in verify.body["messages"][0]["content"]


def test_a_blank_claim_fails_validation_and_the_judge_is_asked_to_repair_its_answer(scripted_server):
    def blank_claim_first(request, kind):
        if kind == "claims" and not request.is_repair:
            return Reply(json.dumps({"claims": ["Everton beat Liverpool.", "  \t "]}))
        return None

    server = scripted_server(SummarizationJudgeScript(fault=blank_claim_first))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False)
    asked = [r for r in server.requests if r.purpose == "ExtractedClaims"]
    assert len(asked) == 2 and "blank" in asked[1].body["messages"][-1]["content"]
    assert result.rows.loc[0, "error"] == "" and result.rows.loc[0, "claim_count"] == 2


def test_more_claims_than_the_maximum_fail_validation_and_are_asked_again(scripted_server):
    from mlflow_genai_metrics.summarization.passes import MAX_CLAIMS

    def too_many(request, kind):
        if kind == "claims":
            return Reply(json.dumps({"claims": [f"Fact {i}." for i in range(MAX_CLAIMS + 1)]}))
        return None

    server = scripted_server(SummarizationJudgeScript(fault=too_many))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False)
    assert server.count(purpose="ExtractedClaims") == 2
    assert result.rows.loc[0, "error"].startswith("claim extraction failed: invalid_answer")


def test_a_blank_key_point_fails_validation_and_the_judge_is_asked_to_repair_its_answer(scripted_server):
    def blank_key_point_first(request, kind):
        if kind == "keypoints" and not request.is_repair:
            return Reply(json.dumps({"key_points": ["Everton beat Liverpool.", "\n"]}))
        return None

    server = scripted_server(SummarizationJudgeScript(fault=blank_key_point_first))
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server))
    assert server.count(purpose="ExtractedKeyPoints") == 2
    assert result.rows.loc[0, "error"] == "" and len(result.key_points) == 2
