"""The order check (issue 29, 2): on a fixed sample of rows the claims are verified again in a shuffled order (and
the key points checked again shuffled); ``judge/order_sensitivity`` is the share of answers that changed. A scripted
judge that says yes to whatever claim it reads first shows exactly the changes its shuffles imply; one that reads
each claim on its own shows none."""

from __future__ import annotations

import json

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.summarization import estimate_cost
from mlflow_genai_metrics.summarization.judging import prepare_rows
from mlflow_genai_metrics.summarization.order import in_sample, shuffled_order
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript, marked_sections

ROWS = 24


def corpus() -> tuple[list[str], list[str]]:
    sources = [f"Article {k}. The club {k} won its match on Saturday." for k in range(ROWS)]
    summaries = [f"The club {k} won its match. Row {k} invented a parade. Row {k} invented a band." for k in range(ROWS)]
    return sources, summaries


def first_is_yes(request, kind):
    """A judge that favours the first item: the first claim it reads is supported, whatever it says."""
    if kind != "verify":
        return None
    sections = marked_sections(request.messages[0]["content"])
    answer = SummarizationJudgeScript().answer(kind, sections)
    answer["verdicts"][0]["verdict"] = "yes"
    return Reply(json.dumps(answer))


def test_a_judge_favouring_the_first_claim_shows_the_changes_its_shuffles_imply(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=first_is_yes))
    sources, summaries = corpus()
    result = judge_summaries(sources, summaries, judge=judge_for(server), order_check=0.5, coverage=False, grounding=False)
    keys = {row.id: row for row in prepare_rows(sources, summaries, None)}
    sampled = [k for k in range(ROWS) if in_sample(keys[k].source_key, keys[k].summary, 0.5)]
    assert 0 < len(sampled) < ROWS
    # shuffled, an invented claim read first becomes yes; the club's claim read later stays yes
    expected = {k: int(shuffled_order(3, keys[k].source_key, keys[k].summary)[0] != 0) for k in sampled}
    rows = result.rows.set_index("id")
    assert {k: int(rows.loc[k, "order_changed"]) for k in sampled} == expected and sum(expected.values()) > 0
    assert rows.drop(index=sampled)["order_checked"].isna().all() and (rows.loc[sampled, "order_checked"] == 3).all()
    assert result.metrics["judge/order_sensitivity"] == sum(expected.values()) / (3 * len(sampled))
    assert server.request_count == 2 * ROWS + len(sampled)  # one shuffled verification per sampled row
    # the verdicts are those of the request itself: the check only measures
    assert (rows["supported_claims"] == 1).all()


def test_a_judge_reading_each_item_on_its_own_is_not_order_sensitive_and_a_rerun_asks_nothing(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    sources, summaries = corpus()
    first = judge_summaries(sources, summaries, judge=judge_for(server, cache_dir=tmp_path), order_check=1.0, grounding=False)
    assert first.metrics["judge/order_sensitivity"] == 0.0
    assert (first.rows["order_checked"] > 3).all()  # the key points were shuffled too
    calls = server.request_count
    again = judge_summaries(sources, summaries, judge=judge_for(server, cache_dir=tmp_path), order_check=1.0, grounding=False)
    assert server.request_count == calls and again.metrics["judge/order_sensitivity"] == 0.0


def test_without_the_check_there_is_no_order_figure(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=first_is_yes))
    result = judge_summaries(*corpus(), judge=judge_for(server), coverage=False, grounding=False)
    assert "judge/order_sensitivity" not in result.metrics and "order_checked" not in result.rows
    assert server.request_count == 2 * ROWS


def test_the_estimate_prices_the_shuffled_requests(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    sources, summaries = corpus()
    plain = estimate_cost(sources, summaries, judge=judge_for(server), coverage=False)
    checked = estimate_cost(sources, summaries, judge=judge_for(server), order_check=0.5, coverage=False)
    keys = prepare_rows(sources, summaries, None)
    sampled = sum(in_sample(row.source_key, row.summary, 0.5) for row in keys)
    assert checked.calls == plain.calls + sampled


@pytest.mark.parametrize("count", [2, 3, 7])
def test_a_shuffled_order_is_a_permutation_other_than_the_identity(count):
    order = shuffled_order(count, "key", "text")
    assert sorted(order) == list(range(count)) and order != list(range(count))
    assert order == shuffled_order(count, "key", "text")  # the same row, the same order


def test_a_row_with_one_claim_has_no_other_order_and_is_not_compared(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=first_is_yes))
    result = judge_summaries(["Article. The club won."], ["The club won."], judge=judge_for(server), order_check=1.0,
                             coverage=False, grounding=False)
    assert result.rows["order_checked"].isna().all() and server.request_count == 2
