"""Many rows at once: bounded concurrency, order kept, nothing lost under faults, reruns free."""

from __future__ import annotations

import asyncio
import random
import sqlite3

from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.testing import Fault, Reply


def test_replies_come_back_in_input_order(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json(reason=r.last_user_message), delay_s=random.random() / 20))
    replies = judge_for(server, max_concurrency=8).ask_many([ask_about(f"row {i}") for i in range(40)])
    assert [r.answer.reason for r in replies] == [f"row {i}" for i in range(40)]


def test_concurrency_is_bounded_by_max_concurrency(scripted_server):
    server = scripted_server(latency_s=0.05)
    judge = judge_for(server, max_concurrency=4)
    judge.ask_many([ask_about(f"row {i}") for i in range(40)])
    assert server.max_in_flight == 4


def test_async_callers_share_the_same_bound(scripted_server):
    server = scripted_server(latency_s=0.05)
    judge = judge_for(server, max_concurrency=3)

    async def many():
        return await asyncio.gather(*(judge.aask(ask_about(f"row {i}")) for i in range(20)))

    replies = asyncio.run(many())
    assert all(r.ok for r in replies)
    assert server.max_in_flight == 3


def test_ask_many_works_inside_a_running_event_loop(scripted_server):
    server = scripted_server()
    judge = judge_for(server)

    async def notebook_cell():
        return judge.ask_many([ask_about("a"), ask_about("b")])  # sync call from inside a loop, as in Jupyter

    assert all(r.ok for r in asyncio.run(notebook_cell()))


def faulty_script(fault_every: int = 5):
    """Every fifth row faults: transient faults recover on retry, a malformed reply stays malformed."""
    transient = [Fault.rate_limit(retry_after_s=0), Fault.server_error(503), Fault.disconnect()]

    def script(request):
        row = int(request.messages[1]["content"].split()[1])  # the question, also in a repair request
        if row % fault_every:
            return Reply(verdict_json(reason=f"row {row}"))
        if row % 20 == 0:
            return Reply("not json at all")  # permanent: after one repair it is a typed error
        if row % 20 == 15:
            return Reply('{"verdict": "yes", "rea', finish_reason="length")  # permanent: truncated
        if request.attempt == 0:
            return transient[row % 3]
        return Reply(verdict_json(reason=f"row {row}"))

    return script


def test_200_concurrent_requests_with_20_percent_faults_lose_nothing(scripted_server, tmp_path):
    server = scripted_server(faulty_script(), reject_response_formats=("json_schema",))
    judge = judge_for(server, max_concurrency=32, cache_dir=tmp_path)
    replies = judge.ask_many([ask_about(f"row {i}") for i in range(200)])

    assert len(replies) == 200
    assert all((r.answer is None) != (r.error is None) for r in replies)  # each answered xor a typed error
    failed = {i for i, r in enumerate(replies) if not r.ok}
    assert failed == {i for i in range(200) if i % 20 in (0, 15)}
    assert {replies[i].error.kind for i in failed} == {"invalid_answer", "truncated"}
    for i, reply in enumerate(replies):
        if reply.ok:
            assert reply.answer.reason == f"row {i}"

    with sqlite3.connect(tmp_path / "judge-cache.sqlite3") as db:
        keys = [k for (k,) in db.execute("SELECT key FROM transcripts")]
    assert len(keys) == len(set(keys)) == 200  # invalid and truncated replies are what the endpoint answered: cached too
    assert judge.usage.requests == 200


def test_a_second_identical_batch_makes_zero_http_calls(scripted_server, tmp_path):
    server = scripted_server()
    batch = [ask_about(f"row {i}") for i in range(50)]
    first = judge_for(server, cache_dir=tmp_path).ask_many(batch)
    calls_after_first = server.request_count

    again = judge_for(server, cache_dir=tmp_path)  # a new Judge, as a rerun in a new process would have
    second = again.ask_many(batch)
    assert server.request_count == calls_after_first
    assert [r.answer for r in second] == [r.answer for r in first]
    assert all(r.cached for r in second)
    assert again.usage.calls == 0 and again.usage.cache_hits == 50 and again.usage.cache_hit_rate == 1.0


def test_a_transport_failure_is_never_cached_and_is_asked_again_on_rerun(scripted_server, tmp_path):
    server = scripted_server(lambda r: Fault.server_error(503) if r.index < 2 else Reply(verdict_json()))
    judge = judge_for(server, cache_dir=tmp_path, max_retries=1)
    assert judge.ask(ask_about("claim")).error.kind == "server_error"
    assert len(judge.cache) == 0
    assert judge.ask(ask_about("claim")).ok
    assert server.request_count == 3


def test_usage_counts_calls_tokens_latency_and_cost(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply(verdict_json("yes", "two words")))
    judge = judge_for(server, cache_dir=tmp_path, prices={"input": 2.0, "output": 8.0})
    reply = judge.ask(ask_about("one two three"))
    usage = reply.usage
    assert usage.calls == 1 and usage.requests == 1 and usage.cache_hits == 0
    assert usage.prompt_tokens == server.requests[0].prompt_tokens > 0
    assert usage.completion_tokens == server.requests[0].completion_tokens > 0
    assert usage.latency_s > 0 and len(usage.call_latencies_s) == 1
    assert usage.cost_usd == (usage.prompt_tokens * 2.0 + usage.completion_tokens * 8.0) / 1e6

    cached = judge.ask(ask_about("one two three")).usage
    assert cached.calls == 0 and cached.cache_hits == 1 and cached.cost_usd == 0.0
    total = judge.usage
    assert total.requests == 2 and total.calls == 1 and total.cache_hit_rate == 0.5
    assert total.prompt_tokens == usage.prompt_tokens


def test_usage_without_prices_has_no_cost(scripted_server):
    server = scripted_server()
    assert judge_for(server).ask(ask_about("claim")).usage.cost_usd is None


def test_progress_bar_is_quiet_when_not_on_a_terminal(scripted_server, capsys):
    server = scripted_server()
    judge_for(server).ask_many([ask_about(f"row {i}") for i in range(5)])
    assert capsys.readouterr().err == ""
    judge_for(server, progress=True).ask_many([ask_about(f"row {i}") for i in range(5)], desc="verifying")
    assert "verifying" in capsys.readouterr().err


def ask_from_threads(judge, *, threads: int, each: int) -> None:
    """``threads`` threads each asking ``each`` questions with ``ask_many`` (each thread runs its own event loop)."""
    import threading

    workers = [
        threading.Thread(target=judge.ask_many, args=([ask_about(f"thread {t} row {i}") for i in range(each)],))
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_the_bound_holds_across_threads_each_running_its_own_event_loop(scripted_server):
    server = scripted_server(latency_s=0.05)
    ask_from_threads(judge_for(server, max_concurrency=3), threads=4, each=6)
    # Every question reached the server (a connection the server dropped under load may be retried: counted once)
    assert len({str(r.body["messages"]) for r in server.requests if r.status == 200}) == 24
    assert server.max_in_flight == 3


def test_max_requests_per_s_spaces_request_starts_across_threads_and_loops(scripted_server):
    server = scripted_server()
    ask_from_threads(judge_for(server, max_concurrency=8, max_requests_per_s=20), threads=3, each=5)
    arrivals = sorted(r.arrived for r in server.requests)
    assert len(arrivals) == 15
    # 15 starts at 20 per second take at least 14 intervals of 50 ms, whichever thread or loop asked.
    assert arrivals[-1] - arrivals[0] >= 14 * 0.05 * 0.9


def test_a_rate_must_be_positive(scripted_server):
    import pytest

    with pytest.raises(ValueError, match="max_requests_per_s"):
        judge_for(scripted_server(), max_requests_per_s=0)


def test_the_scripted_server_adds_no_delay_of_its_own_on_a_kept_alive_connection(scripted_server):
    """Benchmarks read the scripted latency as the endpoint's: with Nagle's algorithm left on, each reply after the
    first on a connection reached the client ~40 ms late (its delayed ACK), which the server's own log shows as a
    gap between one reply and the next request of a caller that asks one question at a time."""
    import statistics

    server = scripted_server(latency_s=0.05)
    judge = judge_for(server, max_concurrency=1)
    for i in range(8):
        assert judge.ask(ask_about(f"row {i}")).ok
    log = server.requests
    assert server.max_in_flight == 1 and [r.body["messages"][-1]["content"] for r in log] == [f"row {i}" for i in range(8)]
    gaps = [later.arrived - earlier.finished for earlier, later in zip(log, log[1:])]
    assert min(gaps) > 0  # one at a time: each request came after the previous reply
    assert statistics.median(gaps[1:]) < 0.025  # the first reply on a connection is never held back
