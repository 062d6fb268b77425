"""Typed answers: the schema on the wire, response-mode fallback, one repair, truncation named as such."""

from __future__ import annotations

import json

from conftest import Verdict, verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.testing import Reply


def test_answer_comes_back_as_a_validated_pydantic_object(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json("no", "the article says third")))
    reply = judge_for(server).ask(ask_about("Everton are second."))
    assert reply.ok and reply.error is None
    assert isinstance(reply.answer, Verdict)
    assert reply.answer == Verdict(verdict="no", reason="the article says third")


def test_request_carries_the_answer_schema_as_json_schema_response_format(scripted_server):
    server = scripted_server()
    judge_for(server).ask(ask_about("claim"))
    sent = server.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Verdict"
    assert set(sent["json_schema"]["schema"]["properties"]) == {"verdict", "reason"}
    assert server.requests[0].body["temperature"] == 0.0


def test_rejected_json_schema_falls_back_to_json_object_with_the_schema(scripted_server):
    server = scripted_server(reject_response_formats=("json_schema",))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.mode == "json_object"
    second = server.requests[1].body["response_format"]
    assert second["type"] == "json_object"
    assert set(second["schema"]["properties"]) == {"verdict", "reason"}


def test_fallback_costs_one_rejected_call_per_judge_not_per_row(scripted_server):
    server = scripted_server(reject_response_formats=("json_schema",))
    judge = judge_for(server, max_concurrency=8)
    replies = judge.ask_many([ask_about(f"claim {i}") for i in range(30)])
    assert all(r.ok for r in replies)
    assert server.count(status=500) == 1
    assert server.request_count == 31
    # Its copy already knows the mode; another Judge finds it for itself (nothing is kept for the process).
    judge.with_limits(max_concurrency=2, max_requests_per_s=None).ask(ask_about("another claim"))
    assert server.count(status=500) == 1
    judge_for(server).ask(ask_about("a third claim"))
    assert server.count(status=500) == 2


def test_falls_back_to_plain_text_with_the_schema_in_the_prompt(scripted_server):
    server = scripted_server(reject_response_formats=("json_schema", "json_object"))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.mode == "text"
    final = server.requests[-1].body
    assert "response_format" not in final
    assert '"verdict"' in final["messages"][-1]["content"]  # the schema is shown in the prompt
    assert server.count(status=500) == 2


def test_text_mode_reply_wrapped_in_a_markdown_fence_is_accepted(scripted_server):
    fenced = "Here you go:\n```json\n" + verdict_json("idk") + "\n```"
    server = scripted_server(lambda r: Reply(fenced), reject_response_formats=("json_schema", "json_object"))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.answer.verdict == "idk"


def test_invalid_json_is_asked_once_more_with_the_error_shown(scripted_server):
    def script(request):
        return Reply(verdict_json()) if request.is_repair else Reply('{"verdict": "yes", "reason": ')

    server = scripted_server(script)
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.usage.calls == 2
    repair = server.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"verdict": "yes", "reason": '}
    assert "Invalid JSON" in repair[-1]["content"]


def test_json_of_the_wrong_shape_is_asked_once_more_naming_the_missing_field(scripted_server):
    def script(request):
        return Reply(verdict_json()) if request.is_repair else Reply(json.dumps({"answer": "yes"}))

    server = scripted_server(script)
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.usage.calls == 2
    assert "verdict: Field required" in server.requests[1].body["messages"][-1]["content"]


def test_a_second_invalid_reply_becomes_an_invalid_answer_error_with_the_raw_reply_kept(scripted_server):
    server = scripted_server(lambda r: Reply("I think the claim is true."))
    reply = judge_for(server).ask(ask_about("claim"))
    assert not reply.ok and reply.answer is None
    assert reply.error.kind == "invalid_answer"
    assert reply.error.raw == "I think the claim is true."
    assert server.request_count == 2  # asked once more, then gave up


def test_a_reply_cut_off_by_max_tokens_is_named_truncated(scripted_server):
    server = scripted_server(lambda r: Reply('{"verdict": "yes", "reas', finish_reason="length"))
    reply = judge_for(server, max_tokens=8).ask(ask_about("claim"))
    assert reply.error.kind == "truncated"
    assert "max_tokens" in reply.error.message
    assert server.requests[0].body["max_tokens"] == 8


def test_a_content_filter_stop_is_named_refused(scripted_server):
    server = scripted_server(lambda r: Reply("", finish_reason="content_filter"))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.error.kind == "refused"


def test_threads_with_their_own_event_loops_also_pay_the_fallback_once(scripted_server):
    import threading

    server = scripted_server(reject_response_formats=("json_schema",), latency_s=0.02)
    judge = judge_for(server)
    threads = [threading.Thread(target=judge.ask_many, args=([ask_about(f"t{t} r{i}") for i in range(3)],)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.count(status=500) == 1 and server.count(status=200) == 12
