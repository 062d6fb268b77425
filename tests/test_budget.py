"""A Judge's budget (max_calls, max_cost_usd) holds under any concurrency: each call reserves its worst case before it
is sent and settles after; the rows past it carry the error ``budget``; a rerun with more continues from the cache."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mlflow_genai_metrics import Judge, Prices, judge_summaries
from mlflow_genai_metrics.judge.budget import Budget, BudgetExhausted
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

from conftest import verdict_json
from helpers import ask_about, judge_for

PRICES = Prices(input=1.0, output=2.0)


def corpus(n: int) -> tuple[list[str], list[str]]:
    sources = [f"Article {k}. The club {k} won its match on Saturday. The striker {k} scored twice." for k in range(n)]
    summaries = [f"The club {k} won. The striker {k} scored twice." for k in range(n)]
    return sources, summaries


def judge_rows_with(judge: Judge, n: int = 60):
    sources, summaries = corpus(n)
    return judge_summaries(sources, summaries, judge=judge, grounding=False, resamples=10)


def busy_server(scripted_server):
    """Replies after 50 ms, 64 at once: with max_concurrency 16, many calls are in flight when the budget runs out."""
    return scripted_server(SummarizationJudgeScript(), latency_s=0.05, slots=64)


def budget_errors(result) -> int:
    return sum(j.error is not None and j.error.kind == "budget" for j in result.judgements)


def test_max_calls_is_never_exceeded_with_16_calls_in_flight(scripted_server):
    server = busy_server(scripted_server)
    judge = judge_for(server, max_concurrency=16, max_calls=70)
    result = judge_rows_with(judge)
    assert server.max_in_flight > 1  # the budget ran out with calls in flight
    assert server.request_count <= 70 and judge.budget.calls == server.request_count == judge.usage.calls
    assert budget_errors(result) > 0


def test_max_cost_usd_is_never_exceeded_with_16_calls_in_flight(scripted_server):
    server = busy_server(scripted_server)
    full = judge_rows_with(judge_for(server, max_concurrency=16, prices=PRICES)).usage.cost_usd
    judge = judge_for(server, max_concurrency=16, prices=PRICES, max_cost_usd=full / 2)
    result = judge_rows_with(judge)
    assert judge.usage.cost_usd <= full / 2 and judge.budget.cost_usd == pytest.approx(judge.usage.cost_usd)
    assert judge.usage.cost_usd > full / 4  # waiting for calls in flight to settle leaves little of the budget unused
    assert budget_errors(result) > 0


def test_the_budget_holds_across_threads_and_event_loops_sharing_one_judge(scripted_server):
    server = scripted_server(lambda request: Reply(verdict_json()), latency_s=0.05, slots=64)
    judge = judge_for(server, max_concurrency=16, max_calls=25)
    replies = []

    def ask(thread: int) -> None:  # each thread its own event loop, as MLflow's scorer threads run
        async def many():
            return await asyncio.gather(*(judge.aask(ask_about(f"claim {thread} {k}")) for k in range(20)))

        replies.extend(asyncio.run(many()))

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.request_count == 25 and server.max_in_flight > 1
    assert sum(r.ok for r in replies) == 25 and {r.error.kind for r in replies if not r.ok} == {"budget"}


def test_rows_past_the_budget_carry_the_budget_error_and_no_score(scripted_server):
    server = busy_server(scripted_server)
    result = judge_rows_with(judge_for(server, max_concurrency=16, max_calls=100), n=30)  # 120 calls in all
    failed = result.rows["error"].str.contains("budget: not sent")
    assert 0 < failed.sum() < len(failed)
    assert result.rows.loc[failed, "support_rate"].isna().all() and result.rows.loc[failed, "coverage"].isna().all()
    assert result.rows.loc[~failed, "support_rate"].notna().all()
    assert result.metrics["judge_error_rate"] == pytest.approx(failed.mean())


def test_a_rerun_with_a_larger_budget_makes_only_the_missing_calls(scripted_server, tmp_path):
    server = busy_server(scripted_server)
    full = judge_rows_with(judge_for(server, max_concurrency=16), n=30)
    everything = server.request_count
    first = judge_rows_with(judge_for(server, max_concurrency=16, cache_dir=tmp_path, max_calls=50), n=30)
    made_first = server.request_count - everything
    again = judge_rows_with(judge_for(server, max_concurrency=16, cache_dir=tmp_path, max_calls=500), n=30)
    made_again = server.request_count - everything - made_first
    assert budget_errors(first) > 0 and budget_errors(again) == 0
    assert made_first + made_again == everything
    assert again.rows.drop(columns=[c for c in again.rows if c.startswith("judge_")]).equals(
        full.rows.drop(columns=[c for c in full.rows if c.startswith("judge_")]))


def test_retries_count_against_max_calls(scripted_server):
    server = scripted_server(lambda request: Fault.server_error(503) if request.attempt == 0 else Reply(verdict_json()))
    judge = judge_for(server, max_calls=4, max_concurrency=1)  # one at a time: which request is refused is fixed
    replies = judge.ask_many([ask_about(f"claim {k}") for k in range(3)], progress=False)
    assert server.request_count == 4  # two requests answered at their second attempt; the third's first refused
    assert sorted(r.error.kind if r.error else "ok" for r in replies) == ["budget", "ok", "ok"]


def test_max_cost_usd_needs_prices():
    with pytest.raises(ValueError, match="max_cost_usd needs prices"):
        Judge("m", "http://127.0.0.1:9/v1", max_cost_usd=1.0)


def test_with_limits_copies_spend_from_the_same_budget(scripted_server):
    server = scripted_server()
    judge = judge_for(server, max_calls=3)
    copy = judge.with_limits(max_concurrency=2, max_requests_per_s=None)
    judge.ask_many([ask_about(f"a {k}") for k in range(2)], progress=False)
    replies = copy.ask_many([ask_about(f"b {k}") for k in range(2)], progress=False)
    assert server.request_count == 3 and [r.ok for r in replies].count(False) == 1


def test_a_reservation_waits_while_calls_in_flight_may_leave_room_and_fails_once_none_is_left():
    async def scenario() -> list[str]:
        budget, seen = Budget(max_cost_usd=1.0), []
        first = await budget.reserve(0.6)
        second = asyncio.ensure_future(budget.reserve(0.6))
        await asyncio.sleep(0.01)
        seen.append(f"second waits: {not second.done()}")
        budget.settle(first, 0.3)  # the first cost less than its worst case: room for the second
        held = await asyncio.wait_for(second, 1)
        third = asyncio.ensure_future(budget.reserve(0.6))
        await asyncio.sleep(0.01)
        seen.append(f"third waits: {not third.done()}")
        budget.settle(held, 0.6)  # 0.9 spent: 0.6 more can no longer fit
        try:
            await asyncio.wait_for(third, 1)
        except BudgetExhausted:
            seen.append("third refused")
        return seen

    assert asyncio.run(scenario()) == ["second waits: True", "third waits: True", "third refused"]
