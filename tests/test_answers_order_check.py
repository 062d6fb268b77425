"""The order check on answers from passages (issue 46, 2): ``order_check=share`` verifies the claims of a
fixed sample of answers again in a shuffled order, as for summaries. A scripted judge that supports whatever claim
it reads first (quoting the passage) shows exactly the changes its shuffles imply; a failed shuffled request fails
the check alone, never the row; a budget with no room for the shuffled requests judges the row without them."""

from __future__ import annotations

import json

import pytest
from helpers import judge_for

from mlflow_genai_metrics.rag import judge_answers, prepare_answer_rows
from mlflow_genai_metrics.summarization.order import in_sample, shuffled_order
from mlflow_genai_metrics.testing import AnswersJudgeScript, Fault, Reply, marked_sections

ROWS = 24


def corpus() -> tuple[list[str], list[list[str]], list[str]]:
    questions = [f"What did club {k} do?" for k in range(ROWS)]
    passages = [[f"Article {k}. The club {k} won its match on Saturday."] for k in range(ROWS)]
    answers = [f"The club {k} won its match. Row {k} invented a parade. Row {k} invented a band." for k in range(ROWS)]
    return questions, passages, answers


def sampled(share: float) -> dict[int, list[int]]:
    """Each row of the sample, with the shuffled order its claims are verified in again."""
    rows = prepare_answer_rows(*corpus(), None, None)
    return {k: shuffled_order(3, row.source_key, row.answer) for k, row in enumerate(rows) if in_sample(row.source_key, row.answer, share)}


def first_is_yes(request, kind):
    """A judge that favours the first claim it reads: supported, quoting the passage (so the quote is found)."""
    if kind != "verify_passages":
        return None
    sections = marked_sections(request.messages[0]["content"])
    answer = AnswersJudgeScript().answer(kind, sections)
    passage = next(body for label, body in sections.items() if label.startswith("PASSAGE "))
    answer["verdicts"][0].update(verdict="yes", passage=1, quote=passage.strip())
    return Reply(json.dumps(answer))


def test_a_judge_favouring_the_first_claim_shows_the_changes_its_shuffles_imply(scripted_server):
    server = scripted_server(AnswersJudgeScript(fault=first_is_yes))
    result = judge_answers(*corpus(), judge=judge_for(server), order_check=0.5, grounding=False, progress=False)
    orders = sampled(0.5)
    assert 0 < len(orders) < ROWS
    # shuffled, an invented claim read first becomes a cited yes; the club's claim read later stays yes
    expected = {k: int(order[0] != 0) for k, order in orders.items()}
    rows = result.rows.set_index("id")
    assert {k: int(rows.loc[k, "order_changed"]) for k in orders} == expected and sum(expected.values()) > 0
    assert rows.drop(index=list(orders))["order_checked"].isna().all() and (rows.loc[list(orders), "order_checked"] == 3).all()
    assert result.metrics["judge/order_sensitivity"] == sum(expected.values()) / (3 * len(orders))
    assert (rows["strictly_aligned"] == 0).all()  # the rows' own verdicts stand: the invented claims are unverifiable
    verifications = [r for r in server.requests if "=====CLAIMS " in r.body["messages"][0]["content"]]
    assert len(verifications) == ROWS + len(orders)


def test_a_judge_reading_each_claim_on_its_own_is_not_order_sensitive_and_without_the_check_there_is_no_figure(scripted_server):
    server = scripted_server(AnswersJudgeScript())
    result = judge_answers(*corpus(), judge=judge_for(server), order_check=0.5, grounding=False, progress=False)
    assert result.metrics["judge/order_sensitivity"] == 0.0 and result.metrics["judge/order_sensitivity_n"] == len(sampled(0.5))
    plain = judge_answers(*corpus(), judge=judge_for(server), grounding=False, progress=False)
    assert "judge/order_sensitivity" not in plain.metrics and "order_checked" not in plain.rows
    assert plain.signature == result.signature  # the check measures the judge; it changes no verdict


@pytest.mark.parametrize("failure", ["status", "not_json"])
def test_a_failed_shuffled_request_leaves_the_row_judged_and_marks_only_its_order_check(scripted_server, failure):
    orders = sampled(0.5)
    shuffled_first = {f"Row {k} invented" for k, order in orders.items() if order[0] != 0}

    def fault(request, kind):  # the shuffled requests whose first claim is an invented one fail, for good
        if kind != "verify_passages":
            return None
        first = marked_sections(request.messages[0]["content"])["CLAIMS"].strip().split("\n")[0]
        if any(f"1. {text}" in first for text in shuffled_first):
            return Fault("status", status=400, message="refused") if failure == "status" else Reply("not json at all")
        return None

    server = scripted_server(AnswersJudgeScript(fault=fault))
    result = judge_answers(*corpus(), judge=judge_for(server, max_retries=0), order_check=0.5, grounding=False, progress=False)
    rows = result.rows.set_index("id")
    failed = [k for k, order in orders.items() if order[0] != 0]
    assert failed and (rows["error"] == "").all() and result.metrics["alignment_n"] == ROWS  # every row judged
    assert rows.loc[failed, "order_checked"].isna().all()
    assert all("Not in the order check (the verdicts stand): order check (claims verified again, shuffled) failed" in rows.loc[k, "reasoning"]
               for k in failed)
    assert result.metrics["judge/order_sensitivity_n"] == len(orders) - len(failed)


def test_a_budget_without_room_for_the_shuffled_requests_judges_the_row_without_them(scripted_server):
    questions, passages, answers = corpus()
    [k] = [k for k in sampled(0.5)][:1]
    server = scripted_server(AnswersJudgeScript())
    # one row of the sample: its own calls (claims, one verification, relevance) fit, the shuffled one does not
    result = judge_answers(questions[k:k + 1], passages[k:k + 1], answers[k:k + 1], judge=judge_for(server, max_calls=3), order_check=0.5,
                           grounding=False, progress=False)
    row = result.rows.iloc[0]
    assert row["error"] == "" and row["claim_count"] == 3 and server.request_count == 3
    assert "order check failed: budget: not sent: the judge's budget had room for this row's own requests only" in row["reasoning"]
