"""A Judge's budget (max_calls, max_cost_usd) holds under any concurrency: each call reserves its worst case before it
is sent and settles after; the rows past it carry the error ``budget``; a rerun with more continues from the cache.
A short budget finishes the rows it starts (depth-first), and a reply that miscounts its tokens is priced at its
worst case and said in the run."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics import Judge, judge_summaries
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.judge.budget import Budget, BudgetExhausted
from mlflow_genai_metrics.summarization.passes import extract_claims_request
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript
from mlflow_genai_metrics.testing.summarization_judge import marked_sections, pass_of

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


# -- depth-first: a short budget finishes the rows it starts ---------------------------------------------------------


def long_corpus(n: int) -> tuple[list[str], list[str]]:
    """Articles of twelve sentences and summaries of three, as news summaries are: the prompts weigh in the cost."""
    sources = [" ".join(f"Sentence {s} of article {k} tells that the team {k} played game {s} in the city of town{s}."
                        for s in range(12)) for k in range(n)]
    summaries = [f"The team {k} played game 0 in town0. The team {k} played game 1 in town1. Article {k} tells of games."
                 for k in range(n)]
    return sources, summaries


def judged_rows(result) -> int:
    return sum(j.error is None for j in result.judgements)


@pytest.mark.parametrize("share", [1 / 3, 1 / 2, 3 / 4])
def test_a_share_of_the_calls_a_run_needs_judges_that_share_of_the_rows(scripted_server, share):
    server = busy_server(scripted_server)
    needed = judge_rows_with(judge_for(server, max_concurrency=16), n=30).usage.calls  # 4 calls a row, 120 in all
    judge = judge_for(server, max_concurrency=16, max_calls=int(needed * share))
    result = judge_rows_with(judge, n=30)
    assert judged_rows(result) == int(needed * share) // (needed // 30) >= 0.3 * 30  # every call went to a judged row
    failed = [j for j in result.judgements if j.error is not None]
    assert {j.error.kind for j in failed} == {"budget"} and all(j.usage.calls == 0 for j in failed)  # never started
    assert all("cannot pay for this row" in str(j.error) for j in failed)
    assert judge.usage.calls <= judge.max_calls


def test_half_the_cost_of_a_run_judges_at_least_two_rows_in_five(scripted_server):
    server = busy_server(scripted_server)
    sources, summaries = long_corpus(30)
    full = judge_summaries(sources, summaries, judge=judge_for(server, max_concurrency=16, prices=PRICES), grounding=False, resamples=10)
    judge = judge_for(server, max_concurrency=16, prices=PRICES, max_cost_usd=full.usage.cost_usd / 2)
    result = judge_summaries(sources, summaries, judge=judge, grounding=False, resamples=10)
    assert judged_rows(result) >= 0.4 * 30
    assert judge.budget.cost_usd <= judge.max_cost_usd
    assert {j.error.kind for j in result.judgements if j.error is not None} == {"budget"}
    started_and_failed = [j for j in result.judgements if j.error is not None and j.usage.calls]
    assert len(started_and_failed) <= 1  # at most the last row tried on what was left


def test_a_short_cost_budget_stops_only_when_no_row_could_start(scripted_server):
    """The short articles of the issue: what is left cannot pay for even the first call of a row not judged."""
    server = busy_server(scripted_server)
    full = judge_rows_with(judge_for(server, max_concurrency=16, prices=PRICES), n=30).usage.cost_usd
    judge = judge_for(server, max_concurrency=16, prices=PRICES, max_cost_usd=full / 2)
    result = judge_rows_with(judge, n=30)
    _, summaries = corpus(30)
    unjudged = [summaries[k] for k, j in enumerate(result.judgements) if j.error is not None]
    assert judged_rows(result) > 0 and unjudged
    left = judge.max_cost_usd - judge.budget.cost_usd
    assert all(judge.worst_cost(extract_claims_request(summary)) > left for summary in unjudged)


# -- replies that report more tokens than their request could produce ----------------------------------------------------


def reporting(script, completion_tokens, prompt_tokens=None):
    """``script``'s answers in replies that report ``completion_tokens(request)`` (and ``prompt_tokens(request)``)
    tokens instead of the words they hold."""
    def answer(request):
        reply = script(request)
        if not isinstance(reply, Reply):
            return reply
        prompt = prompt_tokens(request) if prompt_tokens else len(request.prompt_text.split())
        completion = completion_tokens(request)
        return Fault.raw(json.dumps({
            "id": f"chatcmpl-{request.index}", "object": "chat.completion", "created": 0, "model": request.body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }))
    return answer


def test_replies_reporting_more_than_max_tokens_never_take_spending_past_the_cap(scripted_server):
    over = reporting(lambda request: Reply(verdict_json()), lambda request: 3 * request.body["max_tokens"])
    server = scripted_server(over, latency_s=0.05, slots=64)
    judge = judge_for(server, max_concurrency=16, prices=PRICES, max_cost_usd=0.02)
    replies = judge.ask_many([ask_about(f"claim {k}", max_tokens=100) for k in range(200)], progress=False)
    worst = judge.worst_cost(ask_about("claim 0", max_tokens=100))
    assert server.max_in_flight > 1 and sum(r.ok for r in replies) > 0
    assert judge.usage.cost_usd <= 0.02 + worst and judge.budget.cost_usd <= 0.02  # not even one call's worth past it
    assert judge.usage.implausible_usage == judge.usage.calls == server.request_count


def test_a_reply_reporting_10_to_the_12_tokens_is_priced_at_its_worst_case(scripted_server):
    server = scripted_server(reporting(lambda request: Reply(verdict_json()), lambda request: 10**12))
    judge = judge_for(server, prices=PRICES)
    request = ask_about("claim", max_tokens=200)
    reply = judge.ask(request)
    assert reply.ok and reply.usage.implausible_usage == 1
    assert reply.usage.cost_usd == pytest.approx(judge.worst_cost(request)) and reply.usage.cost_usd < 0.01
    assert reply.usage.completion_tokens == 200


def test_a_prompt_reported_longer_than_its_bytes_is_priced_at_its_worst_case(scripted_server):
    script = reporting(lambda request: Reply(verdict_json()), lambda request: 10, lambda request: 5_000_000)
    judge = judge_for(scripted_server(script), prices=PRICES)
    reply = judge.ask(ask_about("claim", max_tokens=200))
    assert reply.usage.implausible_usage == 1 and reply.usage.prompt_tokens < 1000


def one_count(script, field: str, tokens: int):
    """``script``'s answers in replies whose usage names ``field`` alone (``tokens`` of them), the other count left out."""
    def answer(request):
        reply = script(request)
        return Fault.raw(json.dumps({
            "id": f"chatcmpl-{request.index}", "object": "chat.completion", "created": 0, "model": request.body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
            "usage": {field: tokens},
        }))
    return answer


def test_a_reply_with_one_token_count_prices_the_missing_one_at_its_worst_case(scripted_server):
    """A usage naming the prompt's tokens and not the completion's was priced at the prompt alone: an endpoint billing
    1,000 completion tokens a call took a $0.10 budget to $0.21."""
    request = ask_about("claim", max_tokens=200)
    judge = judge_for(scripted_server(one_count(lambda request: Reply(verdict_json()), "prompt_tokens", 40)), prices=PRICES)
    reply = judge.ask(request)
    assert reply.ok and reply.usage.implausible_usage == 1
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (40, 200)
    assert reply.usage.cost_usd == pytest.approx(PRICES.cost(40, 200))
    judge = judge_for(scripted_server(one_count(lambda request: Reply(verdict_json()), "completion_tokens", 150)), prices=PRICES)
    reply = judge.ask(request)
    assert reply.usage.implausible_usage == 1 and reply.usage.completion_tokens == 150 and reply.usage.prompt_tokens > 0


def test_replies_with_one_token_count_never_take_spending_past_the_cap(scripted_server):
    server = scripted_server(one_count(lambda request: Reply(verdict_json()), "prompt_tokens", 40), latency_s=0.05, slots=64)
    judge = judge_for(server, max_concurrency=16, prices=PRICES, max_cost_usd=0.005)
    replies = judge.ask_many([ask_about(f"claim {k}", max_tokens=100) for k in range(200)], progress=False)
    assert sum(r.ok for r in replies) > 0 and sum(not r.ok for r in replies) > 0  # the cap stopped the run
    assert judge.budget.cost_usd <= 0.005 and server.request_count * PRICES.cost(40, 100) <= 0.005 + 1e-12


def test_a_reply_within_its_max_tokens_is_priced_as_reported(scripted_server):
    server = scripted_server(reporting(lambda request: Reply(verdict_json()), lambda request: 150, lambda request: 40))
    judge = judge_for(server, prices=PRICES)
    reply = judge.ask(ask_about("claim", max_tokens=200))
    assert reply.usage.implausible_usage == 0 and reply.usage.cost_usd == pytest.approx(PRICES.cost(40, 150))


def test_a_run_says_how_many_calls_reported_more_tokens_than_they_could(scripted_server):
    def claims_overcount(request):  # the claim extraction replies report a billion completion tokens
        return 10**9 if pass_of(marked_sections(request.messages[0]["content"])) == "claims" else 5

    script = reporting(SummarizationJudgeScript(), claims_overcount)
    result = judge_rows_with(judge_for(scripted_server(script), prices=PRICES), n=6)
    assert result.usage.implausible_usage == 6 and result.metrics["judge/implausible_usage"] == 6
    assert [w.message for w in result.warnings if w.kind == "implausible_usage"] == [
        "6 calls reported more tokens than the request could produce; priced at their worst case"]
    assert "implausible_usage" in result.report()["warnings"]
    assert result.usage.cost_usd < 0.1
