"""The transport's one limiter: HTTP calls in flight bounded across threads and event loops, waiters served in
order, a cancelled waiter losing no slot, and no batch-wide rounds (a row moves on while another's call is out)."""

from __future__ import annotations

import asyncio
import threading

from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.judge.limits import Limiter
from mlflow_genai_metrics.testing import Reply


def test_the_limiter_bounds_http_calls_in_flight_across_two_event_loops_in_two_threads(scripted_server):
    server = scripted_server(latency_s=0.05)
    judge = judge_for(server, max_concurrency=3)
    loops: set[int] = set()

    def ask_on_a_loop_of_its_own(label: str) -> None:
        async def many():
            loops.add(id(asyncio.get_running_loop()))
            return await asyncio.gather(*(judge.aask(ask_about(f"{label} row {i}")) for i in range(12)))

        assert all(reply.ok for reply in asyncio.run(many()))

    threads = [threading.Thread(target=ask_on_a_loop_of_its_own, args=(f"thread {t}",)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loops) == 2 and server.count(status=200) == 24
    assert server.max_in_flight == 3


def test_a_row_moves_to_its_next_call_while_another_rows_call_is_in_flight(scripted_server):
    def script(request):
        slow = "slow" in request.last_user_message
        return Reply(verdict_json(reason=request.last_user_message), delay_s=1.0 if slow else 0.0)

    server = scripted_server(script)
    judge = judge_for(server, max_concurrency=2)
    assert judge.ask(ask_about("warm-up")).ok  # the response mode is known: no request waits for a probe

    async def row(label: str, passes: int):
        return [await judge.aask(ask_about(f"{label} row, pass {n}")) for n in range(passes)]

    async def both():
        return await asyncio.gather(row("slow", 1), row("fast", 2))

    replies = [reply for row_replies in asyncio.run(both()) for reply in row_replies]
    assert all(reply.ok for reply in replies)
    logged = {r.body["messages"][-1]["content"]: r for r in server.requests}
    # No round waits for every row: the fast row's second pass went out while the slow row's call was still out.
    assert logged["fast row, pass 1"].arrived < logged["slow row, pass 0"].finished


def test_waiters_get_the_slot_first_come_first_served():
    async def scenario():
        limiter = Limiter(1)
        order: list[int] = []
        await limiter.acquire()

        async def waiter(n: int) -> None:
            async with limiter:
                order.append(n)

        tasks = []
        for n in range(5):
            tasks.append(asyncio.ensure_future(waiter(n)))
            await asyncio.sleep(0)  # each one queued before the next
        limiter.release()
        await asyncio.gather(*tasks)
        return order, limiter.in_use

    assert asyncio.run(scenario()) == ([0, 1, 2, 3, 4], 0)


def test_a_waiter_cancelled_as_the_slot_reaches_it_passes_the_slot_on():
    async def scenario():
        limiter = Limiter(1)
        await limiter.acquire()
        first = asyncio.ensure_future(limiter.acquire())
        second = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        limiter.release()  # handed to the first waiter...
        first.cancel()  # ...which is cancelled before it runs
        await asyncio.wait_for(second, 5)
        return first.cancelled(), limiter.in_use

    assert asyncio.run(scenario()) == (True, 1)
