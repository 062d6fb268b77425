"""``timeout_s`` is a total deadline per HTTP attempt, for the synchronous and the asynchronous methods alike:
a server that sends one byte every 0.12 s never lets a single read time out, yet the attempt ends on time."""

from __future__ import annotations

import asyncio
import time

from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.testing import Reply

TRICKLE = Reply(verdict_json(), trickle_s=0.12)  # ~300 bytes: about 40 s in all
# What "on time" allows beyond the deadlines: the trickle alone takes ~40 s, so only the deadline ends an attempt
# within this; a tighter bound (0.6 s) failed once on a loaded machine (1.53 s against 1.2, 2026-12-06).
SLACK_S = 8.0


def test_a_trickling_reply_ends_at_the_deadline_in_ask(scripted_server):
    server = scripted_server(lambda r: TRICKLE)
    started = time.monotonic()
    reply = judge_for(server, timeout_s=1, max_retries=0).ask(ask_about("claim"))
    assert time.monotonic() - started < 1 + SLACK_S
    assert reply.error.kind == "timeout" and "timeout_s=1" in reply.error.message


def test_a_trickling_reply_ends_at_the_deadline_in_aask(scripted_server):
    server = scripted_server(lambda r: TRICKLE)
    judge = judge_for(server, timeout_s=1, max_retries=0)
    started = time.monotonic()
    reply = asyncio.run(judge.aask(ask_about("claim")))
    assert time.monotonic() - started < 1 + SLACK_S
    assert reply.error.kind == "timeout"


def test_each_retry_gets_its_own_deadline_and_a_prompt_retry_succeeds(scripted_server):
    server = scripted_server(lambda r: TRICKLE if r.attempt == 0 else Reply(verdict_json()))
    started = time.monotonic()
    reply = judge_for(server, timeout_s=0.5, max_retries=1).ask(ask_about("claim"))
    assert reply.ok and reply.usage.retries == 1
    assert time.monotonic() - started < 0.5 + SLACK_S


def test_ask_works_inside_a_running_event_loop(scripted_server):
    server = scripted_server()
    judge = judge_for(server)

    async def notebook_cell():
        return judge.ask(ask_about("claim"))  # a sync call from inside a running loop, as in Jupyter

    assert asyncio.run(notebook_cell()).ok
