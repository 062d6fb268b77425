"""The endpoint's remembered response mode: who shares it (a Judge's with_limits and batched copies), who finds it
for itself (every Judge the constructor makes, an unpickled one, another process, another endpoint), and who waits
for it. Nothing is kept for the process."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics.judge import EndpointModes, Judge, JudgeRequest, TextAnswer
from mlflow_genai_metrics.testing import Fault, Reply

# llama-cpp-python's server: HTTP 500 to json_schema, json_object accepted.
LLAMA_CPP_PYTHON = {"reject_response_formats": ("json_schema",)}


def rejected(server) -> int:
    """Calls the server refused for their response mode (the probe's cost)."""
    return server.count(status=500)


def test_each_judge_the_constructor_makes_finds_the_mode_for_itself(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON)
    first = judge_for(server)
    assert first.ask(ask_about("first")).ok and first.response_mode == "json_object"
    second = judge_for(server)
    assert second.response_mode is None and second.endpoint_modes is not first.endpoint_modes
    assert second.ask(ask_about("second")).ok and second.response_mode == "json_object"
    assert first.ask(ask_about("third")).ok
    assert rejected(server) == 2  # one probe each, none for the first judge's second request


def test_a_judge_on_another_endpoint_probes_its_own(scripted_server):
    first, other = scripted_server(**LLAMA_CPP_PYTHON), scripted_server(**LLAMA_CPP_PYTHON)
    assert judge_for(first).ask(ask_about("claim")).ok
    judge = judge_for(other)
    assert judge.response_mode is None
    assert judge.ask(ask_about("claim")).ok and judge.response_mode == "json_object"
    assert rejected(other) == 1


def test_another_model_on_the_same_server_probes_its_own(scripted_server):
    server = scripted_server(models=("scripted-judge", "other-judge"), **LLAMA_CPP_PYTHON)
    assert judge_for(server).ask(ask_about("claim")).ok
    other = Judge("other-judge", server.base_url, "k", cache_dir=None)
    assert other.response_mode is None and other.ask(ask_about("claim")).ok
    assert rejected(server) == 2


def test_a_with_limits_copy_shares_the_found_mode(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON)
    judge = judge_for(server)
    assert judge.ask(ask_about("claim")).ok
    share = judge.with_limits(max_concurrency=1, max_requests_per_s=None)
    assert share.endpoint_modes is judge.endpoint_modes and share.response_mode == "json_object"
    assert share.ask(ask_about("another claim")).ok and rejected(server) == 1


def test_a_batched_copy_shares_the_found_mode():
    judge = Judge("m", "http://127.0.0.1:9/v1", cache_dir=None)
    assert judge.batched().endpoint_modes is judge.endpoint_modes


def test_an_unpickled_judge_finds_the_mode_again_with_one_probe(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON)
    judge = judge_for(server)
    assert judge.ask(ask_about("claim")).ok
    clone = pickle.loads(pickle.dumps(judge))
    assert clone.endpoint_modes is not judge.endpoint_modes and clone.response_mode is None
    assert clone.ask(ask_about("another claim")).ok and clone.response_mode == "json_object"
    assert rejected(server) == 2


def test_a_pickle_carries_no_mode_so_another_process_probes_for_itself(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON)
    judge = judge_for(server)
    assert judge.ask(ask_about("claim")).ok
    worker = (
        "import pickle, sys\n"
        "from helpers import ask_about\n"
        "judge = pickle.load(sys.stdin.buffer)\n"
        "print(judge.response_mode, judge.ask(ask_about('claim in a worker')).ok)\n"
    )
    tests = Path(__file__).parent
    done = subprocess.run([sys.executable, "-c", worker], input=pickle.dumps(judge), capture_output=True, cwd=tests,
                          env={"PYTHONPATH": str(tests)}, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == ["None", "True"]
    assert rejected(server) == 2


def test_a_judge_from_settings_finds_the_mode_for_itself_unless_given_another_s(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON)
    judge = judge_for(server)
    assert judge.ask(ask_about("claim")).ok
    apart = Judge.from_settings(judge.settings)
    assert apart.response_mode is None
    assert apart.ask(ask_about("claim, asked apart")).ok and rejected(server) == 2
    sharing = Judge.from_settings(judge.settings, modes=judge.endpoint_modes)
    assert sharing.response_mode == "json_object"
    assert isinstance(sharing.endpoint_modes, EndpointModes) and not hasattr(EndpointModes, "of_process")


def test_concurrent_requests_of_a_judge_and_its_copy_on_two_event_loops_probe_once(scripted_server):
    server = scripted_server(**LLAMA_CPP_PYTHON, latency_s=0.02)
    judge = judge_for(server)
    judges = [judge, judge.with_limits(max_concurrency=8, max_requests_per_s=None)]

    def ask_all(judge: Judge, label: str) -> None:
        async def many():
            return await asyncio.gather(*(judge.aask(ask_about(f"{label} row {i}")) for i in range(6)))

        assert all(reply.ok for reply in asyncio.run(many()))

    threads = [threading.Thread(target=ask_all, args=(judge, f"judge {n}")) for n, judge in enumerate(judges)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.count(status=200) == 12 and rejected(server) == 1


def test_free_text_requests_run_concurrently_while_no_mode_is_known(scripted_server):
    server = scripted_server(lambda request: Reply("A summary."), latency_s=0.05)
    judge = judge_for(server, max_concurrency=4)
    text = [JudgeRequest(messages=[{"role": "user", "content": f"Summarise {i}."}], answer_type=TextAnswer) for i in range(12)]
    assert all(reply.ok for reply in judge.ask_many(text))
    assert judge.response_mode is None  # free text is sent in no response mode: nothing to find, nothing to wait for
    assert server.max_in_flight == 4


def test_structured_requests_wait_for_the_probe_and_then_run_concurrently(scripted_server):
    server = scripted_server(lambda request: Reply(verdict_json()), latency_s=0.05, **LLAMA_CPP_PYTHON)
    judge = judge_for(server, max_concurrency=4)
    assert all(reply.ok for reply in judge.ask_many([ask_about(f"row {i}") for i in range(12)]))
    first_accepted = next(r for r in server.requests if r.status == 200)
    assert all(r.arrived >= first_accepted.finished for r in server.requests[first_accepted.index + 1:])
    assert rejected(server) == 1 and server.max_in_flight == 4


# What real servers answer to a response_format they do not take: each moves the probe on at once, one call.
MODE_REFUSALS = {
    "openai": (400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."),
    "vllm": (400, "1 validation error for ChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or 'json_object'"),
    "llama-cpp-python": (500, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                              "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"),
    "tgi": (422, "Failed to deserialize the JSON body into the target type: response_format: unknown variant `json_schema`"),
}


def test_one_http_500_on_the_first_request_is_retried_and_the_mode_and_signature_stay_those_of_a_normal_run(scripted_server):
    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.testing import SummarizationJudgeScript

    script = SummarizationJudgeScript()
    flaky = scripted_server(lambda request: Fault.server_error(500) if request.index == 0 else script(request))
    normal = scripted_server(script)
    sources, summaries = ["The council approved the budget on Monday."], ["The council approved the budget."]
    judge = judge_for(flaky)
    judged = judge_summaries(sources, summaries, judge=judge, coverage=False)
    assert [r.status for r in flaky.requests[:2]] == [500, 200] and judged.usage.retries == 1
    assert judge.response_mode == "json_schema"
    expected = judge_summaries(sources, summaries, judge=judge_for(normal), coverage=False)
    assert "mode:json_schema" in judged.signature and judged.signature == expected.signature
    assert judged.claims.equals(expected.claims) and judged.metrics["alignment"] == expected.metrics["alignment"]


@pytest.mark.parametrize("server_kind", sorted(MODE_REFUSALS))
def test_an_answer_that_refuses_the_response_format_moves_to_the_next_mode_in_one_call(scripted_server, server_kind):
    status, message = MODE_REFUSALS[server_kind]
    server = scripted_server(lambda r: Fault.http(status, message) if r.response_format_type == "json_schema" else Reply(verdict_json()))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.ok and reply.mode == "json_object" and reply.usage.retries == 0
    assert [r.status for r in server.requests] == [status, 200]


def test_a_400_that_says_nothing_of_the_response_format_is_the_rows_error_and_changes_no_mode(scripted_server):
    too_long = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    server = scripted_server(lambda r: Fault.http(400, too_long) if "long" in r.last_user_message else Reply(verdict_json()))
    judge = judge_for(server)
    reply = judge.ask(ask_about("a long article"))
    assert reply.error.kind == "bad_request" and server.request_count == 1  # not sent again in json_object and text
    assert judge.response_mode is None
    assert judge.ask(ask_about("a short one")).mode == "json_schema"


def test_a_server_that_fails_every_call_with_a_bare_500_leaves_the_mode_unknown(scripted_server):
    server = scripted_server(lambda r: Fault.server_error(500) if r.response_format_type == "json_schema" else Reply(verdict_json()))
    judge = judge_for(server, max_retries=2)
    reply = judge.ask(ask_about("claim"))
    assert reply.error.kind == "server_error" and reply.usage.retries == 2  # retried as any 5xx, then the row's error
    assert judge.response_mode is None  # not switched to json_object by an outage
