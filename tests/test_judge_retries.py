"""Faults: what is retried (429 honouring Retry-After, 5xx, timeouts, dropped connections), what is not
(400, 401, 403, 404), and what the caller gets when retries run out: a typed error, never an exception."""

from __future__ import annotations

import gc
import logging

import pytest
from conftest import SECRET_KEY, verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics import Judge, JudgeConfigError
from mlflow_genai_metrics.testing import Fault, Reply


def first_attempt_fails(fault: Fault):
    return lambda request: fault if request.attempt == 0 else Reply(verdict_json())


def test_rate_limit_is_retried_after_the_servers_retry_after(scripted_server):
    server = scripted_server(first_attempt_fails(Fault.rate_limit(retry_after_s=1)))
    reply = judge_for(server).ask(ask_about("claim"))  # own backoff is ~10 ms: only Retry-After explains 1 s
    assert reply.ok and reply.usage.retries == 1
    first, second = server.requests
    assert first.status == 429 and second.status == 200
    assert second.arrived - first.arrived >= 0.95


def test_server_error_is_retried(scripted_server):
    server = scripted_server(first_attempt_fails(Fault.server_error(503)))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok
    assert [r.status for r in server.requests] == [503, 200]
    assert reply.usage.calls == 2 and reply.usage.failed_calls == 1


def test_each_retry_is_logged_with_why_as_the_openai_client_logs_its_own(scripted_server, caplog):
    """An INFO line per retry (the kind of failure, the wait), the key never in it: what a user reading logs, or a
    failed test's captured log, needs to tell a retry from a second judgement."""
    server = scripted_server(first_attempt_fails(Fault.server_error(503)))
    with caplog.at_level(logging.INFO, logger="mlflow_genai_metrics.judge"):
        assert judge_for(server).ask(ask_about("claim")).ok
    (line,) = [r.getMessage() for r in caplog.records if r.name.startswith("mlflow_genai_metrics.judge")]
    assert "attempt 1 failed (server_error)" in line and f"127.0.0.1:{server.port}" in line and SECRET_KEY not in line


def test_backoff_grows_exponentially_between_retries(scripted_server):
    server = scripted_server(lambda r: Fault.server_error(503) if r.attempt < 3 else Reply(verdict_json()))
    reply = judge_for(server, backoff_initial_s=0.2, backoff_max_s=10).ask(ask_about("claim"))
    assert reply.ok
    gaps = [b.arrived - a.arrived for a, b in zip(server.requests, server.requests[1:])]
    # Full jitter keeps each wait in [base/2, base] with base 0.2, 0.4, 0.8 s.
    assert 0.1 <= gaps[0] <= 0.35 and 0.2 <= gaps[1] <= 0.6 and 0.4 <= gaps[2] <= 1.1


def test_a_reply_slower_than_the_timeout_is_retried(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json(), delay_s=3.0) if r.attempt == 0 else Reply(verdict_json()))
    reply = judge_for(server, timeout_s=0.5).ask(ask_about("claim"))
    assert reply.ok and reply.usage.retries == 1
    assert server.request_count == 2


def test_a_connection_closed_mid_reply_is_retried(scripted_server):
    server = scripted_server(first_attempt_fails(Fault.disconnect()))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.usage.retries == 1
    assert server.request_count == 2


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault.rate_limit(retry_after_s=0), "rate_limited"),
        (Fault.server_error(502), "server_error"),
        (Fault.disconnect(), "connection"),
    ],
)
def test_when_retries_run_out_the_caller_gets_a_typed_error_not_an_exception(scripted_server, fault, kind):
    server = scripted_server(lambda r: fault)
    reply = judge_for(server, max_retries=2).ask(ask_about("claim"))
    assert not reply.ok and reply.error.kind == kind
    assert reply.error.attempts == 3
    assert server.request_count == 3


def test_timeouts_that_never_end_give_a_timeout_error(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json(), delay_s=2.0))
    reply = judge_for(server, timeout_s=0.3, max_retries=1).ask(ask_about("claim"))
    assert reply.error.kind == "timeout"
    assert server.request_count == 2


def test_bad_request_is_not_retried_and_is_recorded_for_that_row(scripted_server):
    too_long = Fault.http(400, "This model's maximum context length is 8192 tokens")
    server = scripted_server(lambda r: too_long if "long" in r.last_user_message else Reply(verdict_json()))
    judge = judge_for(server)
    judge.ask(ask_about("short"))  # the endpoint's mode is known before the failing row
    replies = judge.ask_many([ask_about("short one"), ask_about("a very long article"), ask_about("short two")])
    assert [r.ok for r in replies] == [True, False, True]
    assert replies[1].error.kind == "bad_request" and replies[1].error.status_code == 400
    assert "maximum context length" in replies[1].error.message
    assert server.count(status=400) == 1


def test_wrong_api_key_raises_an_error_that_says_to_set_openai_api_key(scripted_server):
    server = scripted_server(api_key="sk-the-right-key-000000000000")
    with pytest.raises(JudgeConfigError, match="OPENAI_API_KEY") as caught:
        judge_for(server).ask(ask_about("claim"))
    assert caught.value.status_code == 401
    assert server.model_listings == 1 and server.request_count == 0  # refused at the model listing, not retried
    assert SECRET_KEY[-4:] + "." not in str(caught.value)


def test_unknown_model_raises_an_error_listing_the_models_the_endpoint_serves(scripted_server):
    server = scripted_server(models=("llama-3-8b", "qwen2.5-7b"))
    judge = Judge("gpt-4o-mini", server.base_url, SECRET_KEY, cache_dir=None)
    with pytest.raises(JudgeConfigError, match="llama-3-8b, qwen2.5-7b") as caught:
        judge.ask(ask_about("claim"))
    assert server.request_count == 0  # found by the model listing, before any chat completion
    assert "MGM_JUDGE_MODEL" in str(caught.value)


def test_unknown_model_on_an_endpoint_without_a_listing_is_the_servers_404(scripted_server):
    server = scripted_server(models=("llama-3-8b",), list_models=False)
    judge = Judge("gpt-4o-mini", server.base_url, SECRET_KEY, cache_dir=None)
    with pytest.raises(JudgeConfigError, match="unknown there") as caught:
        judge.ask(ask_about("claim"))
    assert caught.value.status_code == 404 and server.request_count == 1


def test_wrong_base_url_is_named_in_the_404_error(scripted_server):
    server = scripted_server()
    judge = Judge(server.models[0], server.base_url.removesuffix("/v1"), SECRET_KEY, cache_dir=None)  # a classic mistake: no /v1
    with pytest.raises(JudgeConfigError, match="base URL"):
        judge.ask(ask_about("claim"))


def test_permission_denied_is_not_retried(scripted_server):
    server = scripted_server(lambda r: Fault.http(403, "Project does not have access to model"))
    with pytest.raises(JudgeConfigError, match="refused access"):
        judge_for(server).ask(ask_about("claim"))
    assert server.request_count == 1


def test_a_configuration_error_in_a_batch_keeps_the_answers_already_cached(scripted_server, tmp_path):
    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path)
    judge.ask_many([ask_about(f"claim {i}") for i in range(5)])
    server.api_key = "sk-rotated-key-000000000000"
    with pytest.raises(JudgeConfigError):
        judge.ask_many([ask_about(f"claim {i}") for i in range(8)])
    assert len(judge.cache) == 5


def test_http_500_is_retried_once_the_endpoints_mode_is_known(scripted_server):
    def script(request):
        if "flaky" in request.last_user_message and request.attempt == 0:
            return Fault.server_error(500)
        return Reply(verdict_json())

    server = scripted_server(script)
    judge = judge_for(server)
    assert judge.ask(ask_about("warm up")).mode == "json_schema"
    reply = judge.ask(ask_about("flaky row"))
    assert reply.ok and reply.mode == "json_schema" and reply.usage.retries == 1
    assert [r.status for r in server.requests[1:]] == [500, 200]


def test_an_unreachable_endpoint_fails_fast_with_one_clear_message():
    import socket
    import time

    from mlflow_genai_metrics import Judge

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    judge = Judge("m", f"http://127.0.0.1:{port}/v1", SECRET_KEY, cache_dir=None, backoff_initial_s=1.0)
    started = time.monotonic()
    with pytest.raises(JudgeConfigError, match="cannot reach the judge at http://127.0.0.1:"):
        judge.ask_many([ask_about(f"row {i}") for i in range(50)])
    assert time.monotonic() - started < 5  # not 50 rows x 6 retries with backoff


def test_a_dropped_connection_after_the_endpoint_answered_is_still_retried(scripted_server):
    server = scripted_server(lambda r: Fault.disconnect() if "flaky" in r.last_user_message and r.attempt < 2 else Reply(verdict_json()))
    judge = judge_for(server)
    assert judge.ask(ask_about("fine")).ok
    assert judge.ask(ask_about("flaky")).ok and server.request_count == 4


def test_a_call_answered_at_its_first_attempt_leaves_nothing_for_the_cyclic_collector(scripted_server):
    """The retry loop starts only after a failure: a tenacity loop leaves ~50 objects in reference cycles per call
    (its retry state, futures, locks), which only the cyclic collector frees (a third of our collector's time against
    a fast endpoint). Counted among what the collector finds: tenacity's objects alone, so another thread's garbage
    (the suite runs servers and loops beside the test) cannot change the count."""
    server = scripted_server(lambda request: Reply(verdict_json()))
    judge = judge_for(server)
    requests = [ask_about(f"claim {i}") for i in range(40)]
    assert judge.ask(requests[0]).ok  # the client, the model check and the first reply's types made before counting
    flags = gc.get_debug()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable is kept in gc.garbage, to be looked at
    try:
        replies = judge.ask_many(requests[1:])
        gc.collect()
        left = [type(found).__qualname__ for found in gc.garbage if type(found).__module__.split(".")[0] == "tenacity"]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()
    assert all(reply.ok for reply in replies)
    assert left == [], f"{len(left)} of tenacity's objects in reference cycles after {len(replies)} calls"


def test_a_retry_after_given_as_an_http_date_is_waited_for():
    """RFC 9110 lets a server send Retry-After as a date; it was ignored (our ~10 ms backoff instead), so every retry
    was spent while the server still refused, and the rows ended as rate_limited errors."""
    import email.utils

    import openai

    from mlflow_genai_metrics.judge.errors import retry_after_seconds
    from mlflow_genai_metrics.judge.httpx_lib import Response, placeholder_request

    def limited(value: str) -> openai.RateLimitError:
        response = Response(429, headers={"Retry-After": value}, request=placeholder_request("http://127.0.0.1/v1/chat/completions"))
        return openai.RateLimitError("Rate limit reached", response=response, body=None)

    now = 1_800_000_000.0
    assert retry_after_seconds(limited(email.utils.formatdate(now + 5, usegmt=True)), now=now) == 5.0
    assert retry_after_seconds(limited(email.utils.formatdate(now - 60, usegmt=True)), now=now) == 0.0  # a date past
    assert retry_after_seconds(limited("7"), now=now) == 7.0
    assert retry_after_seconds(limited("soon"), now=now) is None  # neither form: our own backoff
