"""Rows move through their passes at their own pace: no row waits for another row's answers, one bound holds
across passes and rows, and the records are the same whatever order the answers come back in."""

from __future__ import annotations

import json
import random

import pandas as pd
from helpers import judge_for, same_metrics

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript
from mlflow_genai_metrics.testing.summarization_judge import marked_sections

ARTICLES = [f"Article {i} says the council approved budget number {i}. The mayor welcomed the decision. Critics objected." for i in range(8)]
SUMMARIES = [f"The council approved budget number {i}. The mayor welcomed it." for i in range(8)]


def _summary_of(request) -> str:
    return marked_sections(request.messages[0]["content"]).get("SUMMARY", "")


def test_a_row_verifies_its_claims_while_another_rows_claims_are_still_being_extracted(scripted_server, tmp_path):
    slow = SUMMARIES[-1]  # not the first request: that one finds the response mode while the others wait

    def fault(request, kind):
        if kind == "claims" and _summary_of(request) == slow:
            return Reply(json.dumps(SummarizationJudgeScript().answer("claims", {"SUMMARY": slow})), delay_s=1.5)
        return None

    server = scripted_server(SummarizationJudgeScript(fault=fault))
    result = judge_summaries(ARTICLES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path, max_concurrency=8), coverage=False)
    assert result.metrics["judge_error_rate"] == 0
    slow_claims = next(e for e in server.requests if e.purpose == "ExtractedClaims" and slow in e.body["messages"][0]["content"])
    verifications = [e for e in server.requests if e.purpose == "ClaimVerdicts"]
    assert len(verifications) == len(SUMMARIES)
    # Behind a barrier no verification would start before the slowest claim extraction came back.
    early = [e for e in verifications if e.arrived < slow_claims.finished]
    assert len(early) == len(SUMMARIES) - 1


def test_one_bound_holds_across_every_pass_and_row(scripted_server, tmp_path):
    server = scripted_server(lambda r: SummarizationJudgeScript()(r), latency_s=0.05)
    judge_summaries(ARTICLES * 2, SUMMARIES + SUMMARIES[::-1], judge=judge_for(server, cache_dir=tmp_path, max_concurrency=3))
    assert server.max_in_flight == 3  # reached, never passed, with key points, claims, verification and coverage mixed


def _rows(result) -> pd.DataFrame:
    return result.rows.drop(columns=[c for c in result.rows.columns if c.startswith("judge_")])


def test_the_records_do_not_depend_on_the_order_the_answers_come_back_in(scripted_server, tmp_path):
    steady = scripted_server(SummarizationJudgeScript())
    expected = judge_summaries(ARTICLES, SUMMARIES, judge=judge_for(steady, cache_dir=tmp_path / "steady"))
    shuffled = random.Random(7)

    def jitter(request, kind):
        base = SummarizationJudgeScript()(request)
        return Reply(base.content, delay_s=shuffled.random() / 10)

    jittery = scripted_server(SummarizationJudgeScript(fault=jitter))
    got = judge_summaries(ARTICLES, SUMMARIES, judge=judge_for(jittery, cache_dir=tmp_path / "jittery", max_concurrency=16))
    pd.testing.assert_frame_equal(_rows(got), _rows(expected))
    assert same_metrics({k: v for k, v in got.metrics.items() if not k.startswith("judge/")}, {
        k: v for k, v in expected.metrics.items() if not k.startswith("judge/")
    })


def test_a_row_failing_two_passes_reports_the_verification_whichever_failure_came_back_first(scripted_server, tmp_path):
    # Verification fails slowly, coverage at once: the row's error is still the verification's (asked first).
    def fault(request, kind):
        if kind == "verify":
            return Reply("{}", delay_s=0.3)  # not the schema, twice (the repair turn too): invalid_answer
        if kind == "coverage":
            return Fault.http(400, "coverage refused")
        return None

    server = scripted_server(SummarizationJudgeScript(fault=fault))
    result = judge_summaries(ARTICLES[:2], SUMMARIES[:2], judge=judge_for(server, cache_dir=tmp_path, max_retries=0))
    errors = result.rows["error"].tolist()
    assert all(e.startswith("claim verification failed: invalid_answer") for e in errors), errors
