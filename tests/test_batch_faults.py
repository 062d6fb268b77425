"""Batch mode against what a real Batches API can hand back: a broken line in an output file, a cancel that kept
what it ran, an expired batch that lists none of its undone lines, lines without usage, and a run interrupted while
a batch it resumed had ended beside one still running. Each request ends answered or with its own error, the
budget holds as online, and nothing that ran is paid for twice."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter

import openai
import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.judge.batch.store import BatchStore
from mlflow_genai_metrics.judge.budget import worst_cost
from mlflow_genai_metrics.testing import Reply, ScriptedBatches


def echo(request):
    return Reply(verdict_json(reason=request.last_user_message))


def questions(n: int, wave: str = "row"):
    return [ask_about(f"{wave} {i}") for i in range(n)]


def answered(replies) -> list[str | None]:
    return [r.answer.reason if r.ok else None for r in replies]


def lines_per_question(server) -> Counter:
    return Counter(request.body["messages"][-1]["content"] for request in server.requests)


def test_a_line_of_the_output_that_is_not_a_batch_result_fails_only_its_own_request(scripted_server, tmp_path):
    """One truncated line among six used to raise out of the run (no row kept) and left the batch 'submitted', so every
    rerun read the same file and raised again."""

    def truncate_the_third(results):
        return [*results[:2], json.dumps(results[2])[:40], *results[3:]]

    server = scripted_server(echo, batch_api=ScriptedBatches(edit_output=truncate_the_third))
    replies = judge_for(server, cache_dir=tmp_path).batched(poll_s=0.01).ask_many(questions(6))
    assert answered(replies) == ["row 0", "row 1", None, "row 3", "row 4", "row 5"]
    assert replies[2].error.kind == "batch_failed"
    assert "1 line(s) of its output could not be read" in replies[2].error.message and "line 3" in replies[2].error.message
    assert set(BatchStore(tmp_path).batches().values()) == {"ended"}
    server.batch_api.edit_output = None
    rerun = judge_for(server, cache_dir=tmp_path).batched(poll_s=0.01).ask_many(questions(6))
    assert answered(rerun) == [f"row {i}" for i in range(6)]
    assert [r.cached for r in rerun] == [True, True, False, True, True, True]


def test_a_line_whose_status_is_not_a_number_is_that_requests_bad_reply(scripted_server):
    def status_in_words(results):
        results[1]["response"]["status_code"] = "OK"
        return results

    server = scripted_server(echo, batch_api=ScriptedBatches(edit_output=status_in_words))
    replies = judge_for(server).batched(poll_s=0.01).ask_many(questions(3))
    assert answered(replies) == ["row 0", None, "row 2"]
    assert replies[1].error.kind == "bad_reply" and "'OK'" in replies[1].error.message


def test_a_cancelled_batch_keeps_the_lines_it_ran_and_a_rerun_asks_only_the_others(scripted_server, tmp_path):
    """OpenAI's cancel keeps the lines already run in the output file (and bills them): they were thrown away,
    counted as no call and asked again."""
    batches = ScriptedBatches(polls_before_done=10**6, lines_before_cancel=3)
    server = scripted_server(echo, batch_api=batches)

    def cancel_once_created():
        while not batches.batches:
            threading.Event().wait(0.01)
        openai.OpenAI(base_url=server.base_url, api_key="any").batches.cancel(next(iter(batches.batches)))

    canceller = threading.Thread(target=cancel_once_created)
    canceller.start()
    judge = judge_for(server, cache_dir=tmp_path, prices=Prices(input=1.0, output=2.0)).batched(poll_s=0.01)
    replies = judge.ask_many(questions(6))
    canceller.join()
    assert sum(r.ok for r in replies) == 3 and server.request_count == 3
    assert {r.error.kind for r in replies if not r.ok} == {"batch_failed"}
    assert all("cancelled" in r.error.message for r in replies if not r.ok)
    assert judge.usage.calls == judge.usage.batched_calls == 3 and judge.usage.cost_usd > 0
    batches.polls_before_done = 0
    rerun = judge_for(server, cache_dir=tmp_path).batched(poll_s=0.01).ask_many(questions(6))
    assert answered(rerun) == [f"row {i}" for i in range(6)] and sum(bool(r.cached) for r in rerun) == 3
    assert max(lines_per_question(server).values()) == 1 and server.request_count == 6


def test_an_expired_batch_that_lists_none_of_its_undone_lines_submits_them_again(scripted_server):
    """The error file need not list the lines a window left undone: they were each a batch_failed error counted as a
    call, and never asked again."""
    batches = ScriptedBatches(expire_batches=1, lines_before_expiry=2, list_expired_lines=False)
    server = scripted_server(echo, batch_api=batches)
    judge = judge_for(server).batched(poll_s=0.01)
    replies = judge.ask_many(questions(6))
    assert answered(replies) == [f"row {i}" for i in range(6)]
    assert batches.created == 2 and server.request_count == 6 and judge.usage.calls == 6


@pytest.mark.parametrize("broken", ["no usage", "not a chat completion"])
def test_batch_lines_that_do_not_say_what_they_cost_are_held_at_their_worst_case(scripted_server, broken):
    """Batch mode priced such lines at nothing: twenty lines ran under a $0.01 cap that online holds to one or two."""

    def edit(results):
        for result in results:
            body = result["response"]["body"]
            if broken == "no usage":
                body.pop("usage", None)
            else:
                body["choices"] = []
        return results

    server = scripted_server(echo, batch_api=ScriptedBatches(edit_output=edit))
    judge = judge_for(server, prices=Prices(input=10.0, output=30.0), max_cost_usd=0.01, max_tokens=200).batched(poll_s=0.01)
    replies = [reply for wave in range(4) for reply in judge.ask_many(questions(5, f"wave {wave} row"))]
    ran = server.request_count
    assert 0 < ran < 5 and judge.budget.cost_usd <= 0.01
    at_worst = sum(worst_cost(Prices(input=10.0, output=30.0).batch(), request.body["messages"], request.body.get("response_format"), 200)
                   for request in server.requests)
    assert judge.budget.cost_usd == pytest.approx(at_worst)
    assert Counter(r.error.kind for r in replies if not r.ok)["budget"] == 20 - ran


class HeldFrom(ScriptedBatches):
    """Batches from the ``hold_from``-th created on stay running (polled, never run)."""

    hold_from = 10**9

    def _run(self, batch, lines_run=None):
        if int(batch["id"].rsplit("-", 1)[1]) >= self.hold_from:
            return
        super()._run(batch, lines_run)


def test_a_resumed_batch_s_answers_are_kept_when_the_run_stops_while_a_new_batch_runs(scripted_server, tmp_path):
    """Run 1 submits rows 0-4 and is interrupted; run 2 asks rows 0-9: it resumes that batch and submits rows 5-9 in
    a new one. The resumed batch ends (and is recorded as read) while the new one runs, and run 2 is interrupted:
    its answers were held back until the new batch ended, so they were lost, and run 3 paid for rows 0-4 again."""
    batches = HeldFrom()
    batches.hold_from = 0
    server = scripted_server(echo, batch_api=batches)
    store = BatchStore(tmp_path)

    async def interrupted(n: int, until) -> None:
        task = asyncio.ensure_future(judge_for(server, cache_dir=tmp_path).batched(poll_s=0.01).aask_many(questions(n)))
        while not until():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # turns of the loop for what was read to reach its callers
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted(5, lambda: batches.retrieves >= 2))
    assert list(store.batches().values()) == ["submitted"] and server.request_count == 0
    batches.hold_from = 3  # ids count uploads and batches together: the next upload is 3, its batch 4 (held)
    asyncio.run(interrupted(10, lambda: "ended" in store.batches().values()))
    assert sorted(store.batches().values()) == ["ended", "submitted"] and server.request_count == 5
    batches.hold_from = 10**9
    replies = judge_for(server, cache_dir=tmp_path).batched(poll_s=0.01).ask_many(questions(10))
    assert answered(replies) == [f"row {i}" for i in range(10)]
    assert [bool(r.cached) for r in replies] == [True] * 5 + [False] * 5
    assert server.request_count == 10 and max(lines_per_question(server).values()) == 1
