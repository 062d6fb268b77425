"""The order check only measures (issue 45, 7 and 8): when its shuffled re-ask fails (HTTP 500 on every retry, an
invalid answer, the budget) the row keeps the verdicts of its own requests, in every metric, and only its order check
is marked failed (``order_checked`` empty, the reason in ``reasoning``); a row's budget earmark holds its order
check's requests from the start, whatever the summary's length, so a short budget never refuses one midway."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.judge.budget import Budget, BudgetExhausted
from mlflow_genai_metrics.summarization.judging import prepare_rows
from mlflow_genai_metrics.summarization.order import in_sample
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript, marked_sections

ROWS = 20


def corpus(rows: int = ROWS) -> tuple[list[str], list[str]]:
    """Short summaries (five words: the budget's word count guesses one claim) of two sentences, two claims each;
    the second claim is in every fifth article only, so alignment is neither 0 nor 1."""
    sources = [f"Article {k}. Team {k} won. " + ("Fans cheered." if k % 5 == 0 else "It rained.") for k in range(rows)]
    summaries = [f"Team {k} won. Fans cheered." for k in range(rows)]
    return sources, summaries


def script(fault=None) -> SummarizationJudgeScript:
    """The scripted judge: "Fans cheered." is contradicted where the article does not say it."""
    return SummarizationJudgeScript(verdicts={"Fans cheered.": lambda article, claim: "yes" if claim in article else "no"},
                                    fault=fault)


def sampled(share: float, rows: int = ROWS) -> list[int]:
    return [row.id for row in prepare_rows(*corpus(rows), None) if in_sample(row.source_key, row.summary, share)]


def failing_shuffled_reask(article: str, failure):
    """A fault that sends ``failure`` instead of the answer to the shuffled verification of ``article``'s claims
    (each retry and repair too), and answers every other request."""
    def fault(request, kind):
        sections = marked_sections(request.messages[0]["content"])
        if kind == "verify" and sections["ARTICLE"] == article and not sections["CLAIMS"].startswith("1. Team"):
            return failure
        return None
    return fault


@pytest.mark.parametrize("failure", [Fault.server_error(), Reply("this is not JSON")], ids=["http_500", "invalid_answer"])
def test_a_failed_shuffled_reask_leaves_the_row_judged_and_marks_only_its_order_check(scripted_server, failure):
    sources, summaries = corpus()
    rows_in_sample = sampled(0.5)
    assert 2 <= len(rows_in_sample) < ROWS
    target = rows_in_sample[0]
    server = scripted_server(script(failing_shuffled_reask(sources[target], failure)))
    result = judge_summaries(sources, summaries, judge=judge_for(server, max_retries=2), order_check=0.5, coverage=False,
                             grounding=False)
    plain = judge_summaries(sources, summaries, judge=judge_for(scripted_server(script())), coverage=False,
                            grounding=False)
    rows = result.rows.set_index("id")
    assert (rows["error"] == "").all() and result.metrics["judge_error_rate"] == 0.0
    assert result.metrics["alignment_n"] == ROWS and result.metrics["alignment"] == plain.metrics["alignment"] == 0.2
    assert rows.loc[target, "claim_count"] == 2 and rows.loc[target, "aligned"] == plain.rows.set_index("id").loc[target, "aligned"]
    # only the order check is marked: not compared, and why
    assert pd.isna(rows.loc[target, "order_checked"]) and pd.isna(rows.loc[target, "order_changed"])
    assert "order check (claims verified again, shuffled) failed" in rows.loc[target, "reasoning"]
    assert result.judgements[target].order_check.failed
    others = [k for k in rows_in_sample if k != target]
    assert (rows.loc[others, "order_checked"] == 2).all()
    assert result.metrics["judge/order_sensitivity"] == 0.0  # over the rows whose order check was compared
    assert "order check" not in " ".join(rows.drop(index=target)["reasoning"])


def test_a_row_whose_order_check_failed_is_not_stored_whole_and_a_rerun_asks_only_the_shuffled_request(scripted_server, tmp_path):
    sources, summaries = corpus()
    target = sampled(0.5)[0]
    failing = scripted_server(SummarizationJudgeScript(fault=failing_shuffled_reask(sources[target], Fault.server_error())))
    judge_summaries(sources, summaries, judge=judge_for(failing, max_retries=0, cache_dir=tmp_path), order_check=0.5,
                    coverage=False, grounding=False)
    server = scripted_server(SummarizationJudgeScript())
    again = judge_summaries(sources, summaries, judge=judge_for(server, cache_dir=tmp_path), order_check=0.5, coverage=False,
                            grounding=False)
    assert server.request_count == 1 and again.rows.set_index("id").loc[target, "order_checked"] == 2
    assert again.judgements[target].order_check.failed is None


def test_a_budget_for_every_row_and_its_order_check_judges_every_row(scripted_server):
    sources, summaries = corpus()
    server = scripted_server(SummarizationJudgeScript(), latency_s=0.02, slots=64)
    needed = 2 * ROWS + len(sampled(0.5))  # claims and verification, and one shuffled verification per sampled row
    judge = judge_for(server, max_concurrency=8, max_calls=needed)
    result = judge_summaries(sources, summaries, judge=judge, order_check=0.5, coverage=False, grounding=False)
    assert (result.rows["error"] == "").all() and server.request_count == needed
    assert all(result.judgements[k].order_check.checked == 2 for k in sampled(0.5))


@pytest.mark.parametrize("concurrency", [1, 8])
def test_half_the_calls_judges_half_the_rows_each_with_its_order_check(scripted_server, concurrency):
    """Every row in the sample: three calls a row (claims, verification, shuffled verification), 30 calls for 10 rows.
    The earmark guessed one claim from five words and left the shuffled request out: rows were refused midway."""
    sources, summaries = corpus()
    server = scripted_server(SummarizationJudgeScript(), latency_s=0.02, slots=64)
    judge = judge_for(server, max_concurrency=concurrency, max_calls=30)
    result = judge_summaries(sources, summaries, judge=judge, order_check=1.0, coverage=False, grounding=False)
    judged = [j for j in result.judgements if j.error is None]
    refused = [j for j in result.judgements if j.error is not None]
    assert len(judged) == 10 and all(j.order_check.checked == 2 and j.order_check.failed is None for j in judged)
    assert {j.error.kind for j in refused} == {"budget"} and all(j.usage.calls == 0 for j in refused)  # never started
    assert server.request_count == 30


def test_a_budget_without_room_for_an_order_check_judges_the_row_without_it(scripted_server):
    """Room for a row's own two calls and not its shuffled third, and no row under way to leave more: the row is
    judged and its order check marked not asked, rather than the row refused (or refused midway)."""
    sources, summaries = corpus()
    server = scripted_server(SummarizationJudgeScript(), latency_s=0.02, slots=64)
    judge = judge_for(server, max_concurrency=8, max_calls=32)
    result = judge_summaries(sources, summaries, judge=judge, order_check=1.0, coverage=False, grounding=False)
    judged = [j for j in result.judgements if j.error is None]
    assert len(judged) == 11 and server.request_count == 32
    assert sum(j.order_check.checked == 2 for j in judged) == 10
    [unchecked] = [j for j in judged if j.order_check.failed]
    assert unchecked.order_check.failed.startswith("order check failed: budget: not sent")
    assert all(j.usage.calls == 0 for j in result.judgements if j.error is not None)


def test_a_sampled_row_with_one_claim_fits_a_budget_of_exactly_its_own_calls(scripted_server):
    """One claim has no other order: the call held for its shuffled request is never asked, and the last row, alone,
    starts on exactly its own two calls."""
    sources = [f"Article {k}. Team {k} won." for k in range(6)]
    summaries = [f"Team {k} won." for k in range(6)]  # one claim each
    server = scripted_server(SummarizationJudgeScript(), latency_s=0.02)
    judge = judge_for(server, max_concurrency=1, max_calls=2 * 6)
    result = judge_summaries(sources, summaries, judge=judge, order_check=1.0, coverage=False, grounding=False)
    assert (result.rows["error"] == "").all() and server.request_count == 12
    assert all(j.order_check is None for j in result.judgements)


def test_the_shuffled_coverage_check_failing_leaves_the_coverage(scripted_server):
    sources, summaries = corpus(6)

    def fault(request, kind):  # the key points are the article's first three sentences: "Article k.", "Team k won.", ...
        points = marked_sections(request.messages[0]["content"]).get("KEY POINTS", "")
        shuffled = not (points.startswith("1. Article") and "\n2. Team" in points)
        return Fault.server_error() if kind == "coverage" and shuffled else None

    server = scripted_server(SummarizationJudgeScript(fault=fault))
    judge = judge_for(server, max_retries=0, max_concurrency=1)
    result = judge_summaries(sources, summaries, judge=judge, order_check=1.0, grounding=False)
    rows = result.rows
    assert (rows["error"] == "").all() and rows["coverage"].notna().all() and result.metrics["coverage_n"] == 6
    assert all("key points checked again, shuffled" in j.order_check.failed for j in result.judgements)
    assert rows["order_checked"].isna().all()



def test_the_calls_a_row_can_do_without_are_set_aside_when_they_fit_and_left_out_only_when_nothing_can_free_them():
    async def scenario():
        budget = Budget(max_calls=5)
        first = await budget.earmark(2, 0.0, optional_calls=1)
        assert (first.calls, first.optional) == (3, True)
        waiting = asyncio.ensure_future(budget.earmark(2, 0.0, optional_calls=1))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # 3 + 3 > 5, and the first row may leave room
        budget.close(first)  # it drew nothing: all five calls free again, the second row gets its three
        second = await waiting
        assert (second.calls, second.optional) == (3, True)
        budget.close(second)
        budget.restrict(2, None)
        alone = await budget.earmark(2, 0.0, optional_calls=1)  # nothing under way: its own two calls, not the third
        assert (alone.calls, alone.optional) == (2, False)
        budget.close(alone)
        with pytest.raises(BudgetExhausted):
            await Budget(max_calls=1).earmark(2, 0.0, optional_calls=1)

    asyncio.run(scenario())
