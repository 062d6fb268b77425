"""Every HTTP-200 reply becomes an answer or a typed error: a body that is not a chat completion is a
``bad_reply`` carrying a short excerpt of the body, retried like a 5xx, and never raises out of the Judge."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import SECRET_KEY, verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.testing import Fault, Reply


def completion(content: str = verdict_json(), **changes) -> dict:
    """A well-formed chat completion body, with some of its fields replaced."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted-judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    body.update(changes)
    return body


HTML = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>nginx</body></html>"

BAD_BODIES = {
    "an HTML page": Fault.raw(HTML, content_type="text/html"),
    "an empty body": Fault.raw(b""),
    "the JSON null": Fault.raw("null"),
    "a JSON list": Fault.raw("[1, 2]"),
    "truncated JSON": Fault.raw('{"id": "chatcmpl-1", "choi'),
    "no choices": Fault.raw(json.dumps({"id": "x", "object": "chat.completion"})),
    "empty choices": Fault.raw(json.dumps(completion(choices=[]))),
    "choices not a list": Fault.raw(json.dumps(completion(choices="yes"))),
    "a choice without a message": Fault.raw(json.dumps(completion(choices=[{"index": 0, "finish_reason": "stop"}]))),
    "content that is not text": Fault.raw(json.dumps(completion(choices=[{"message": {"content": {"verdict": 1}}}]))),
    "a completion sent as text/plain": Fault.raw(json.dumps(completion()), content_type="text/plain"),
    "a completion with no content type": Fault.raw(json.dumps(completion()), content_type=None),
    "negative token counts": Fault.raw(json.dumps(completion(usage={"prompt_tokens": -5, "completion_tokens": 3}))),
    "token counts that are not integers": Fault.raw(json.dumps(completion(usage={"prompt_tokens": "many", "completion_tokens": 1.5}))),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_body_that_is_not_a_chat_completion_is_a_bad_reply_after_every_retry(scripted_server, name):
    server = scripted_server(lambda r: BAD_BODIES[name])
    reply = judge_for(server, max_retries=2).ask(ask_about("claim"))
    assert not reply.ok and reply.error.kind == "bad_reply"
    assert reply.error.attempts == 3 and server.request_count == 3  # retried like a 5xx
    assert reply.error.raw == BAD_BODIES[name].body.decode()[:200]
    assert reply.usage.prompt_tokens == 0 and reply.usage.completion_tokens == 0


def test_a_bad_reply_names_what_is_wrong_with_the_body(scripted_server):
    server = scripted_server(lambda r: Fault.raw(HTML, content_type="text/html"))
    reply = judge_for(server, max_retries=0).ask(ask_about("claim"))
    assert "text/html" in reply.error.message and "502 Bad Gateway" in reply.error.message
    assert reply.error.status_code == 200


def test_a_bad_reply_is_retried_and_the_next_good_reply_is_the_answer(scripted_server):
    server = scripted_server(lambda r: Fault.raw("null") if r.attempt == 0 else Reply(verdict_json("no")))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.answer.verdict == "no"
    assert reply.usage.retries == 1 and reply.usage.failed_calls == 1


def test_negative_token_counts_are_never_summed(scripted_server):
    negative = Fault.raw(json.dumps(completion(usage={"prompt_tokens": -1000000, "completion_tokens": -7})))
    server = scripted_server(lambda r: negative if r.attempt == 0 else Reply(verdict_json()))
    judge = judge_for(server)
    reply = judge.ask(ask_about("claim"))
    assert reply.ok
    assert reply.usage.prompt_tokens == server.requests[1].prompt_tokens > 0
    assert judge.usage.completion_tokens == server.requests[1].completion_tokens > 0


def test_the_excerpt_is_short_and_carries_no_api_key(scripted_server):
    page = f"<html>{SECRET_KEY} " + "x" * 5000 + "</html>"
    server = scripted_server(lambda r: Fault.raw(page, content_type="text/html"))
    reply = judge_for(server, max_retries=0).ask(ask_about("claim"))
    assert len(reply.error.raw) <= 200 and reply.error.raw.startswith("<html>")
    assert SECRET_KEY not in reply.error.raw and SECRET_KEY not in reply.error.message
    assert len(reply.error.message) < 400


def test_no_body_raises_out_of_a_batch(scripted_server):
    bodies = list(BAD_BODIES.values())

    def script(request):
        row = int(request.messages[1]["content"].split()[1])
        return bodies[row % len(bodies)] if row % 2 else Reply(verdict_json())

    server = scripted_server(script)
    judge = judge_for(server, max_retries=1)
    replies = judge.ask_many([ask_about(f"row {i}") for i in range(2 * len(bodies))])
    assert [r.ok for r in replies] == [i % 2 == 0 for i in range(2 * len(bodies))]
    assert {r.error.kind for r in replies if not r.ok} == {"bad_reply"}


def test_aask_turns_a_bad_body_into_an_error_too(scripted_server):
    server = scripted_server(lambda r: Fault.raw("null"))
    reply = asyncio.run(judge_for(server, max_retries=0).aask(ask_about("claim")))
    assert reply.error.kind == "bad_reply" and "the body is the JSON null, not an object" in reply.error.message


def test_a_bad_reply_to_the_repair_turn_is_a_bad_reply(scripted_server):
    server = scripted_server(lambda r: Fault.raw("null") if r.is_repair else Reply("not json"))
    reply = judge_for(server, max_retries=1).ask(ask_about("claim"))
    assert reply.error.kind == "bad_reply" and server.request_count == 3
