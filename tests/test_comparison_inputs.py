"""A comparison pairs every input a metric depends on, and never concludes more than its pairs support (issue 23)."""

from __future__ import annotations

import math

import pytest
from helpers import judge_for

from mlflow_genai_metrics import compare_results, judge_summaries
from mlflow_genai_metrics.summarization.metrics import METRICS
from mlflow_genai_metrics.testing import SummarizationJudgeScript

ROWS = 8


def _article(i: int) -> str:
    return f"Council {i} approved the budget. The mayor {i} welcomed it. Critics {i} objected to the cuts."


def _summary(i: int) -> str:
    return f"Council {i} approved the budget."


def _judged(server, *, references=None, key_points=None, summaries=None, rows=ROWS):
    articles = [_article(i) for i in range(rows)]
    server.script = SummarizationJudgeScript(key_points=key_points or {})
    return judge_summaries(
        articles, summaries or [_summary(i) for i in range(rows)], judge=judge_for(server), ids=[f"r{i}" for i in range(rows)],
        references=references,
    )


def test_identical_summaries_against_different_references_leave_the_reference_metrics(scripted_server):
    server = scripted_server()
    summaries = [_summary(i) for i in range(ROWS)]
    a = _judged(server, references=summaries)  # each summary is its own reference: perfect scores
    b = _judged(server, references=[f"Something else entirely {i}." for i in range(ROWS)])
    assert b.metrics["rouge1"] < a.metrics["rouge1"]  # the numbers differ, the summaries do not
    table = compare_results(a, b).table.set_index("metric")
    for name in ("rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "chrf"):
        row = table.loc[name]
        assert row["n"] == 0 and row["left_out"] == ROWS and math.isnan(row["p_value"]) and not row["significant"]
        assert f"{ROWS} pairs left out: references differ" in row["note"]
    assert table.loc["alignment", "left_out"] == 0  # the judge's metrics do not read the reference


def test_only_the_rows_whose_reference_differs_leave(scripted_server):
    server = scripted_server()
    summaries = [_summary(i) for i in range(ROWS)]
    a = _judged(server, references=summaries)
    b = _judged(server, references=[*summaries[:5], "Other.", "Other.", "Other."])
    row = compare_results(a, b).table.set_index("metric").loc["rouge1"]
    assert (row["n"], row["left_out"], row["difference"]) == (5, 3, 0.0)


def test_the_same_reference_written_with_other_spacing_still_pairs(scripted_server):
    server = scripted_server()
    summaries = [_summary(i) for i in range(ROWS)]
    a = _judged(server, references=summaries)
    b = _judged(server, references=[f"  {text}  " for text in summaries])
    assert compare_results(a, b).table.set_index("metric").loc["rouge1", "left_out"] == 0


def test_identical_summaries_measured_against_different_key_points_leave_coverage(scripted_server):
    server = scripted_server()
    a = _judged(server)
    b = _judged(server, key_points={_article(i): [f"Critics {i} objected to the cuts."] for i in range(ROWS)})
    assert a.metrics["coverage"] != b.metrics["coverage"]  # another key-point list, another number
    table = compare_results(a, b).table.set_index("metric")
    coverage = table.loc["coverage"]
    assert coverage["n"] == 0 and coverage["left_out"] == ROWS and math.isnan(coverage["p_value"])
    assert "key points differ" in coverage["note"]
    assert table.loc["richness", "left_out"] == 0


def test_key_points_listed_in_another_order_are_the_same_key_points(scripted_server):
    server = scripted_server()
    points = {_article(i): [f"Council {i} approved the budget.", f"Critics {i} objected to the cuts."] for i in range(ROWS)}
    a = _judged(server, key_points=points)
    b = _judged(server, key_points={article: list(reversed(items)) for article, items in points.items()})
    assert compare_results(a, b).table.set_index("metric").loc["coverage", "left_out"] == 0


def test_no_aggregate_has_a_zero_width_interval_at_two_rows(scripted_server):
    server = scripted_server()
    result = _judged(server, references=[_summary(i) for i in range(2)], rows=2)
    for spec in METRICS.aggregates():
        if not spec.has_interval or spec.name not in result.metrics:
            continue
        low, high = result.metrics[f"{spec.name}_ci_low"], result.metrics[f"{spec.name}_ci_high"]
        assert (math.isnan(low) and math.isnan(high)) or high > low, spec.name


def test_one_judged_row_has_no_interval(scripted_server):
    server = scripted_server()
    result = _judged(server, rows=1)
    for name in ("alignment", "strict_alignment", "richness", "coverage", "claim_support_rate"):
        assert math.isnan(result.metrics[f"{name}_ci_low"]) and math.isnan(result.metrics[f"{name}_ci_high"]), name
        assert result.metrics[f"{name}_n"] == 1


def test_a_holm_adjusted_p_value_stands_beside_every_raw_one(scripted_server):
    server = scripted_server()
    server.script = SummarizationJudgeScript(verdicts={"Council 0 approved the budget.": "no"})
    articles = [_article(i) for i in range(30)]
    a = judge_summaries(articles, [f"Council {i} rejected the budget." for i in range(30)], judge=judge_for(server),
                        ids=[f"r{i}" for i in range(30)], coverage=False)
    b = judge_summaries(articles, [_summary(i) for i in range(30)], judge=judge_for(server), ids=[f"r{i}" for i in range(30)],
                        coverage=False)
    table = compare_results(a, b).table
    tested = table[table["p_value"].notna()]
    assert len(tested) >= 2 and (tested["p_holm"] >= tested["p_value"]).all()
    assert table.loc[table["p_value"].isna(), "p_holm"].isna().all()


@pytest.mark.parametrize("metric, better", [("alignment", "higher"), ("defect_rate/contradiction", "lower"), ("ter", "lower")])
def test_each_metric_says_which_way_is_better(metric, better):
    from mlflow_genai_metrics.summarization.comparison import direction

    assert direction(metric) == better


def test_pairs_a_metric_has_no_value_for_on_a_side_are_counted_and_said():
    """Run B wrote "..." (no sentence) for 4 of 12 articles, so its grounding has no value there: the comparison
    read "12 pairs used", stood on 8 and said nothing of the 4 (the weaker run's worst rows)."""
    articles = [f"Article {i}. The council approved budget {i}. The mayor welcomed decision {i}." for i in range(12)]
    a = judge_summaries(articles, [f"The council approved budget {i}." for i in range(12)], judge=None)
    b = judge_summaries(articles, ["..." if i < 4 else f"Aliens landed {i}." for i in range(12)], judge=None)
    table = compare_results(a, b).table.set_index("metric")
    for metric in ("grounding", "grounded_rate"):
        assert table.loc[metric, "n"] == 8 and table.loc[metric, "left_out"] == 4
        assert "4 pairs left out: no value on a side" in table.loc[metric, "note"]


def test_a_reference_metric_one_run_lacks_leaves_the_others_compared_and_a_left_out_family_is_said():
    """TER asked on one side only made the whole reference part differ: ROUGE, BLEU and chrF left the table silently,
    and the label read "NOT COMPARABLE AS IS ... compared on request" though nothing was requested."""
    import dataclasses

    articles = [f"Article {i}. The council approved budget {i}. The mayor welcomed decision {i}." for i in range(12)]
    references = [f"The council approved budget {i}." for i in range(12)]
    a = judge_summaries(articles, references, judge=None, references=references)
    b = judge_summaries(articles, [f"The council approved it {i}." for i in range(12)], judge=None, references=references, ter=True)
    compared = compare_results(a, b)
    assert {"rouge1", "bleu", "chrf", "grounding"} <= set(compared.table["metric"]) and compared.signatures_match
    assert "NOT COMPARABLE" not in compared.label
    other = dataclasses.replace(b, signature=b.signature.replace("grounding:v2-", "grounding:v9-"))
    compared = compare_results(a, other)
    assert "grounding" not in set(compared.table["metric"]) and "rouge1" in set(compared.table["metric"])
    assert "signatures differ (grounding:" in compared.label and "grounding, suspect metrics left out" in compared.label
    assert "on request" not in compared.label
    assert "compared on request" in compare_results(a, other, allow_signature_mismatch=True).label


def test_a_plain_comparison_says_which_dropped_pairs_a_side_s_own_output_made_unjudgeable(scripted_server):
    """A plain comparison leaves out a pair whose side could not be judged for what it wrote (no claim, its
    application failed), where a decision counts it against that side; the note said only "dropped for judge
    errors", so a candidate writing nothing on 3 of 8 rows read as an outage of the judge."""
    server = scripted_server()
    a = _judged(server)
    unclaimed = [f"Nothing {i} to say." for i in range(3)]  # words, but the judge lists no claim in them
    articles = [_article(i) for i in range(ROWS)]
    server.script = SummarizationJudgeScript(claims={summary: [] for summary in unclaimed})
    b = judge_summaries(articles, unclaimed + [_summary(i) for i in range(3, ROWS)], judge=judge_for(server),
                        ids=[f"r{i}" for i in range(ROWS)])
    assert b.rows["error"].fillna("").str.contains("no_claims").sum() == 3
    compared = compare_results(a, b, allow_partial=True)
    assert compared.pairs_dropped_for_errors == 3 and compared.dropped_unreadable == 3
    assert ("5 pairs used, 3 dropped for judge errors (3 of them for an output of a side that could not be judged, "
            "which a decision would count against that side)") in compared.label
    same = compare_results(a, a)
    assert same.dropped_unreadable == 0 and "could not be judged" not in same.label
