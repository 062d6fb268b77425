"""Per-row values and aggregates of judge_summaries against hand-computed values (guide/metrics.md)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript

ARTICLE = (
    "Everton defender David Weir has played down talk of European football. "
    "Everton are third in the Premiership after beating Liverpool 1-0 on Saturday."
)
SUMMARY = (
    "Everton defender David Weir played down talk of European football, despite his team being second in the "
    "Premiership after beating Liverpool."
)
WORKED_CLAIMS = [
    "David Weir plays as a defender for Everton.",
    "Everton are currently second in the Premiership.",
    "Everton beat Liverpool in a recent match.",
    "David Weir played down talk of Everton playing in European football.",
]


def worked_example_script(**extra) -> SummarizationJudgeScript:
    verdicts = {claim: "yes" for claim in WORKED_CLAIMS}
    verdicts["Everton are currently second in the Premiership."] = "no"
    return SummarizationJudgeScript(claims={SUMMARY: WORKED_CLAIMS}, verdicts=verdicts, **extra)


def test_the_worked_example_of_the_metrics_guide(scripted_server):
    server = scripted_server(worked_example_script())
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), ids=["sport/001"], coverage=False)
    row = result.rows.iloc[0]
    assert row["id"] == "sport/001"
    assert (row["claim_count"], row["supported_claims"], row["contradicted_claims"], row["unverifiable_claims"]) == (4, 3, 1, 0)
    assert row["aligned"] == 0 and row["strictly_aligned"] == 0
    assert row["support_rate"] == 0.75
    assert (row["defect_contradiction"], row["defect_unverifiable"], row["defect_empty"]) == (1, 0, 0)
    assert row["error"] == ""
    assert list(result.claims["claim"]) == WORKED_CLAIMS
    assert list(result.claims["verdict"]) == ["yes", "no", "yes", "yes"]
    assert list(result.claims["claim_index"]) == [1, 2, 3, 4]


def test_the_reasoning_names_every_claim_with_its_verdict_contradicted_first(scripted_server):
    server = scripted_server(worked_example_script())
    result = judge_summaries([ARTICLE], [SUMMARY], judge=judge_for(server), coverage=False)
    lines = result.rows.loc[0, "reasoning"].splitlines()
    assert lines[0] == "4 claims: 1 contradicted, 0 unverifiable, 3 supported."
    assert lines[1].startswith("[no] claim 2: Everton are currently second in the Premiership. -- ")
    assert [line[:5] for line in lines[2:]] == ["[yes]"] * 3


def test_an_empty_summary_makes_no_claim_and_costs_no_claim_call(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries([ARTICLE], ["   "], judge=judge_for(server))
    row = result.rows.iloc[0]
    assert row["claim_count"] == 0 and row["aligned"] == 0 and row["strictly_aligned"] == 0
    assert row["defect_empty"] == 1 and row["defect_contradiction"] == 0
    assert math.isnan(row["support_rate"])
    assert row["coverage"] == 0.0  # an empty summary covers no key point
    assert [r.purpose for r in server.requests] == ["ExtractedKeyPoints"]
    assert result.metrics["defect_rate/empty"] == 1.0 and result.metrics["alignment"] == 0.0
    assert math.isnan(result.metrics["claim_support_rate"])


def test_a_summary_with_only_unverifiable_claims_is_aligned_but_not_strictly(scripted_server):
    script = SummarizationJudgeScript(verdicts={"Weir likes tea.": "idk", "Weir owns a boat.": "idk"})
    server = scripted_server(script)
    result = judge_summaries([ARTICLE], ["Weir likes tea. Weir owns a boat."], judge=judge_for(server), coverage=False)
    row = result.rows.iloc[0]
    assert (row["claim_count"], row["unverifiable_claims"], row["support_rate"]) == (2, 2, 0.0)
    assert row["aligned"] == 1 and row["strictly_aligned"] == 0
    assert row["defect_unverifiable"] == 1 and row["defect_contradiction"] == 0


def test_a_row_the_judge_fails_on_is_excluded_from_every_denominator_and_counted_as_an_error(scripted_server):
    def broken_for_row_2(request, kind):
        if kind == "claims" and "Broken" in request.messages[0]["content"]:
            return Reply("this is not JSON")
        return None

    summaries = [
        "Everton beat Liverpool.",  # yes -> aligned
        "Everton are second. Weir is a defender.",  # second: no
        "Broken summary that the judge cannot parse.",
        "Weir likes tea.",  # idk -> aligned, not strict
    ]
    script = SummarizationJudgeScript(
        verdicts={"Everton beat Liverpool.": "yes", "Everton are second.": "no", "Weir is a defender.": "yes", "Weir likes tea.": "idk"},
        fault=broken_for_row_2,
    )
    server = scripted_server(script)
    result = judge_summaries([ARTICLE] * 4, summaries, judge=judge_for(server), coverage=False)
    rows = result.rows
    assert rows.loc[2, "error"].startswith("claim extraction failed: invalid_answer")
    assert pd.isna(rows.loc[2, "claim_count"]) and pd.isna(rows.loc[2, "aligned"])
    assert "Not judged" in rows.loc[2, "reasoning"]
    m = result.metrics
    assert m["judge_error_rate"] == 0.25
    assert m["alignment"] == pytest.approx(2 / 3)  # rows 0 and 3 of the 3 judged
    assert m["strict_alignment"] == pytest.approx(1 / 3)
    assert m["defect_rate/contradiction"] == pytest.approx(1 / 3)
    assert m["defect_rate/unverifiable"] == pytest.approx(1 / 3)
    assert m["defect_rate/empty"] == 0.0
    assert m["claim_support_rate"] == pytest.approx(2 / 4)  # yes over all claims of judged rows
    assert m["richness"] == pytest.approx(4 / 3)
    assert m["defect_rate/contradiction"] == pytest.approx(1 - m["alignment"] - m["defect_rate/empty"])


def test_coverage_is_the_share_of_the_sources_key_points_the_summary_covers(scripted_server):
    points = ["Weir played down European talk.", "Everton are third.", "Everton beat Liverpool 1-0."]
    summaries = ["Everton beat Liverpool.", "Weir played down talk; Everton third after beating Liverpool."]
    covered = {
        (points[0], summaries[0]): False, (points[1], summaries[0]): False, (points[2], summaries[0]): True,
        (points[0], summaries[1]): True, (points[1], summaries[1]): True, (points[2], summaries[1]): True,
    }
    server = scripted_server(SummarizationJudgeScript(key_points={ARTICLE: points}, covered=covered))
    result = judge_summaries([ARTICLE, ARTICLE], summaries, judge=judge_for(server))
    assert list(result.rows["coverage"]) == pytest.approx([1 / 3, 1.0])
    assert result.metrics["coverage"] == pytest.approx((1 / 3 + 1.0) / 2)
    table = result.key_points
    assert len(table) == 6 and list(table["key_point"][:3]) == points
    assert list(table["covered"]) == [False, False, True, True, True, True]
    assert "1 of 3 key points covered." in result.rows.loc[0, "coverage_reasoning"]


def test_every_rate_has_a_confidence_interval_around_it_and_usage_figures(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    summaries = ["Everton beat Liverpool.", "Weir likes tea.", "Everton are third in the Premiership.", "Weir is a defender."] * 5
    result = judge_summaries([ARTICLE] * 20, summaries, judge=judge_for(server, prices={"input": 1.0, "output": 2.0}))
    m = result.metrics
    for name in ["alignment", "defect_rate/contradiction", "defect_rate/unverifiable", "defect_rate/empty",
                 "strict_alignment", "claim_support_rate", "judge_error_rate"]:
        assert m[f"{name}_ci_low"] <= m[name] <= m[f"{name}_ci_high"], name
    # every summary makes one claim and covers no key point: richness 1 and coverage 0 on all 20 rows, nothing for
    # a bootstrap to vary, so no interval (never a zero-width one)
    for name, value in (("richness", 1.0), ("coverage", 0.0)):
        assert m[name] == value and math.isnan(m[f"{name}_ci_low"]) and m[f"{name}_n"] == 20, name
    assert m["strict_alignment_ci_low"] < m["strict_alignment_ci_high"]
    assert m["judge/calls"] == server.request_count
    assert m["judge/prompt_tokens"] == sum(r.prompt_tokens for r in server.requests)
    assert m["judge/completion_tokens"] == sum(r.completion_tokens for r in server.requests)
    assert m["judge/cost_usd"] == pytest.approx((m["judge/prompt_tokens"] * 1.0 + m["judge/completion_tokens"] * 2.0) / 1e6)
    assert result.rows["judge_calls"].sum() == server.request_count  # per-row usage adds up to the total
    again = judge_summaries([ARTICLE] * 20, summaries, judge=judge_for(server, cache_dir=None))
    assert again.metrics["alignment_ci_low"] == m["alignment_ci_low"]  # fixed seed: same interval


def test_the_result_keeps_input_order_and_given_ids(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    ids = ["b/2", "a/1", "c/3"]
    result = judge_summaries(pd.Series([ARTICLE] * 3), pd.Series(["Weir.", "Everton.", "Liverpool."]), judge=judge_for(server), ids=ids)
    assert list(result.rows["id"]) == ids
    assert result.report()["rows"] == 3 and result.report()["failed_rows"] == 0
