"""The HTTP library under the Judge's openai client: aiohttp on the Judge's own loop (``auto``), httpx on a caller's
loop; either gives the same answers and the same typed errors, keeps a connection per slot, and a Judge dropped
without ``close()`` leaves no session open."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pandas as pd
import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics import JudgeConfigError, judge_summaries
from mlflow_genai_metrics.judge.runner import run_sync
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

BACKENDS = ["aiohttp", "httpx"]


def _transport_name(judge, loop_runner) -> str:
    async def made() -> str:
        return type(judge._transport._client()._client._transport).__name__

    return loop_runner(made())


def test_auto_uses_aiohttp_on_the_judges_own_loop_and_httpx_on_a_callers_loop(scripted_server):
    judge = judge_for(scripted_server())
    assert _transport_name(judge, run_sync) == "AiohttpTransport"
    assert _transport_name(judge, asyncio.run) == "AsyncHTTPTransport"
    assert _transport_name(judge_for(scripted_server(), http_backend="httpx"), run_sync) == "AsyncHTTPTransport"
    assert _transport_name(judge_for(scripted_server(), http_backend="aiohttp"), asyncio.run) == "AiohttpTransport"


def test_a_base_url_with_credentials_gets_httpx(scripted_server):
    server = scripted_server()
    judge = judge_for(server)
    with_credentials = type(judge)(judge.model, server.base_url.replace("http://", "http://user:pw@"), cache_dir=None)
    assert _transport_name(with_credentials, run_sync) == "AsyncHTTPTransport"


def _untimed(result) -> pd.DataFrame:
    return result.rows.drop(columns=[c for c in result.rows if "latency" in c])


def test_both_backends_give_the_same_rows(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    sources = [f"Article {i}: the council approved budget {i}. The mayor welcomed it." for i in range(6)]
    summaries = [f"The council approved budget {i}." for i in range(6)]
    results = [judge_summaries(sources, summaries, judge=judge_for(server, http_backend=backend)) for backend in BACKENDS]
    pd.testing.assert_frame_equal(_untimed(results[0]), _untimed(results[1]))
    assert results[0].metrics["judge/calls"] == results[1].metrics["judge/calls"] > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("fault", "kind"),
    [(Fault.disconnect(), "connection"), (Fault.server_error(502), "server_error"), (Fault.rate_limit(retry_after_s=0), "rate_limited"),
     (Reply(verdict_json(), delay_s=2.0), "timeout")],
)
def test_failures_get_the_same_typed_error_under_either_backend(scripted_server, backend, fault, kind):
    server = scripted_server(lambda r: fault)
    reply = judge_for(server, max_retries=1, timeout_s=0.5, http_backend=backend).ask(ask_about("claim"))
    assert not reply.ok and reply.error.kind == kind
    assert server.request_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unreachable_endpoint_fails_fast_under_either_backend(scripted_server, backend):
    server = scripted_server()
    judge = judge_for(server, http_backend=backend, check_model=False)
    server.stop()
    started = time.perf_counter()
    with pytest.raises(JudgeConfigError, match="cannot reach the judge"):
        judge.ask(ask_about("claim"))
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_connection_is_kept_alive_per_slot_beyond_a_hundred(scripted_server, backend):
    # The openai package's own httpx client keeps 100 idle connections: each time 120 calls in flight end together
    # it would close 20, and open 20 new ones for the next 120.
    server = scripted_server(lambda r: Reply(verdict_json()), latency_s=0.05, slots=120)
    judge = judge_for(server, max_concurrency=120, http_backend=backend)
    for round_ in range(4):
        replies = judge.ask_many([ask_about(f"claim {round_}.{i}") for i in range(120)])
        assert all(r.ok for r in replies)
    connections = {entry.client_port for entry in server.requests}
    assert None not in connections and len(connections) <= 121  # the first call's probe may need one more


def test_a_judge_dropped_without_close_leaves_no_session_open(scripted_server, caplog):
    server = scripted_server()
    judge = judge_for(server, http_backend="aiohttp")
    assert judge.ask(ask_about("claim")).ok
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        del judge
        gc.collect()
        time.sleep(0.3)  # the session closes on the judge's loop
        gc.collect()
        time.sleep(0.1)
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]
