"""Batch files, apart from any submitting: each line's body is the online chat completion; an output file reads back
into what the online path reads from the same completion, and its failures into the online path's typed errors."""

from __future__ import annotations

import json

import pytest
from conftest import SECRET_KEY, Verdict
from helpers import ask_about, judge_for

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import BatchOptions, Prices
from mlflow_genai_metrics.judge.batch.files import batch_line, completion_body, read_output, write_input
from mlflow_genai_metrics.judge.replies import CallResult
from mlflow_genai_metrics.judge.transport import Call, CallFailed, Transport
from mlflow_genai_metrics.testing import ScriptedBatches

CALL = Call([{"role": "user", "content": "Is it so?"}], {"type": "json_schema", "json_schema": {"name": "Verdict"}}, 64, False)


def settings(**options):
    return Judge("scripted-judge", "http://127.0.0.1:9/v1", SECRET_KEY, cache_dir=None, **options).settings


def completion(content: str = '{"verdict": "yes", "reason": "r"}', **usage) -> dict:
    return {"id": "c", "object": "chat.completion", "model": "scripted-judge-2026",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, **usage}}


def output_line(custom_id: str, status: int, body: dict | None, error: dict | None = None) -> bytes:
    response = None if body is None else {"status_code": status, "request_id": "r", "body": body}
    return (json.dumps({"id": "batch_req_1", "custom_id": custom_id, "response": response, "error": error}) + "\n").encode()


def test_a_batch_line_carries_exactly_the_body_the_online_transport_sends(scripted_server):
    online = scripted_server()
    batched = scripted_server()
    request = ask_about("Is it so?", max_tokens=77)
    judge_for(online, seed=7, temperature=0.3).ask(request)
    judge_for(batched, seed=7, temperature=0.3).batched(poll_s=0.01).ask(request)
    assert batched.requests[-1].batch_id is not None
    assert batched.requests[-1].body == online.requests[-1].body
    assert {"seed", "max_tokens", "response_format", "temperature"} <= set(online.requests[-1].body)


def test_the_body_is_the_transports_own_completion_arguments():
    made = settings(seed=3, temperature=0.2)
    assert completion_body(made, CALL) == Transport(made)._completion_kwargs(CALL)


def test_an_input_line_is_an_openai_batch_request_to_chat_completions(tmp_path):
    line = batch_line(settings(), CALL)
    write_input([line], tmp_path / "in.jsonl")
    written = json.loads((tmp_path / "in.jsonl").read_text())
    assert written == {"custom_id": line.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": line.body}


def test_the_same_call_at_the_same_endpoint_has_the_same_custom_id_and_another_call_another():
    assert batch_line(settings(), CALL).custom_id == batch_line(settings(), CALL).custom_id
    other = Call(CALL.messages, CALL.response_format, 65, False)
    assert batch_line(settings(), other).custom_id != batch_line(settings(), CALL).custom_id


def test_an_answered_line_reads_as_the_call_result_with_its_usage_and_cached_tokens():
    body = completion(prompt_tokens_details={"cached_tokens": 8})
    outcome = read_output(output_line("a", 200, body))["a"]
    assert outcome == CallResult(content='{"verdict": "yes", "reason": "r"}', finish_reason="stop", model="scripted-judge-2026",
                                 prompt_tokens=12, completion_tokens=5, cached_prompt_tokens=8)


@pytest.mark.parametrize(("status", "kind"), [(400, "bad_request"), (429, "rate_limited"), (500, "server_error"), (503, "server_error")])
def test_a_line_answered_with_an_error_status_is_the_online_error_of_that_status(status, kind):
    outcome = read_output(output_line("a", status, {"error": {"message": "nope", "code": None}}))["a"]
    assert isinstance(outcome, CallFailed)
    assert (outcome.error.kind, outcome.error.status_code) == (kind, status) and "nope" in outcome.error.message


def test_a_line_the_completion_window_left_undone_is_batch_expired():
    error = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
    outcome = read_output(None, output_line("a", 0, None, error))["a"]
    assert isinstance(outcome, CallFailed) and outcome.error.kind == "batch_expired"


def test_a_line_whose_body_is_not_a_completion_is_a_bad_reply():
    outcome = read_output(output_line("a", 200, {"choices": []}))["a"]
    assert isinstance(outcome, CallFailed) and outcome.error.kind == "bad_reply"


def test_the_output_and_error_files_are_read_together(tmp_path):
    (tmp_path / "out.jsonl").write_bytes(output_line("a", 200, completion()))
    (tmp_path / "err.jsonl").write_bytes(output_line("b", 500, {"error": {"message": "boom"}}))
    outcomes = read_output(tmp_path / "out.jsonl", tmp_path / "err.jsonl")
    assert isinstance(outcomes["a"], CallResult) and isinstance(outcomes["b"], CallFailed)


def test_a_file_that_is_not_a_batch_output_is_refused():
    with pytest.raises(ValueError, match="line 1"):
        read_output(b"<html>not a batch</html>\n")


def test_an_error_message_in_a_line_is_redacted():
    outcome = read_output(output_line("a", 401, {"error": {"message": f"bad key {SECRET_KEY}"}}), redact=settings().redact)["a"]
    assert SECRET_KEY not in outcome.error.message


def test_batch_prices_take_off_openais_half_by_default_and_a_stated_discount_otherwise():
    assert Prices(input=1.0, output=4.0).batch().cost(1_000_000, 1_000_000) == pytest.approx(2.5)
    assert Prices(input=1.0, output=4.0, batch_discount=0.2).batch().cost(1_000_000, 1_000_000) == pytest.approx(4.0)


def test_the_scripted_batch_endpoints_run_each_line_through_the_script(scripted_server):
    server = scripted_server(batch_api=ScriptedBatches())
    replies = judge_for(server, batch=BatchOptions(poll_s=0.01)).ask_many([ask_about(f"row {i}") for i in range(3)])
    assert all(isinstance(r.answer, Verdict) for r in replies)
    assert len({r.batch_id for r in server.requests}) == 1 and server.request_count == 3
