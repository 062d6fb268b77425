"""Which model answers: a model the endpoint does not list is refused before the first call, and the model id
each reply reports is recorded, a reply from another model flagged."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from conftest import SECRET_KEY, verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics import Judge, JudgeConfigError
from mlflow_genai_metrics.judge.models import is_listed, same_model
from mlflow_genai_metrics.testing import Reply


def test_a_model_the_endpoint_does_not_list_is_refused_before_any_call_naming_the_models_it_serves(scripted_server):
    server = scripted_server(models=("smollm2-135m", "gemma3-270m"))  # a llama.cpp-like server answers any name
    judge = Judge("gpt-4o-mini", server.base_url, SECRET_KEY, cache_dir=None)
    with pytest.raises(JudgeConfigError, match="does not serve model 'gpt-4o-mini'; it serves: gemma3-270m, smollm2-135m"):
        judge.ask_many([ask_about(f"row {i}") for i in range(5)])
    assert server.request_count == 0


def test_the_models_are_listed_once_per_judge_across_threads_and_event_loops(scripted_server):
    server = scripted_server(latency_s=0.01)
    judge = judge_for(server)

    def from_a_thread(t: int) -> None:
        judge.ask_many([ask_about(f"thread {t} row {i}") for i in range(3)])
        asyncio.run(judge.aask(ask_about(f"thread {t} async")))

    threads = [threading.Thread(target=from_a_thread, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert judge.ask(ask_about("sync")).ok
    assert server.model_listings == 1 and server.count(status=200) == 17


def test_an_endpoint_without_a_model_listing_is_not_checked(scripted_server):
    server = scripted_server(list_models=False)
    assert judge_for(server).ask(ask_about("claim")).ok
    assert server.model_listings == 1


def test_check_model_false_skips_the_listing(scripted_server):
    server = scripted_server()
    assert judge_for(server, check_model=False).ask(ask_about("claim")).ok
    assert server.model_listings == 0


def test_a_fully_cached_rerun_lists_nothing(scripted_server, tmp_path):
    server = scripted_server()
    judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert judge_for(server, cache_dir=tmp_path).ask(ask_about("claim")).cached
    assert server.model_listings == 1


def test_each_reply_carries_the_model_the_endpoint_reported(scripted_server):
    server = scripted_server()
    judge = judge_for(server)
    reply = judge.ask(ask_about("claim"))
    assert reply.model == "scripted-judge" and not reply.model_mismatch
    assert judge.reported_models == {"scripted-judge": 1}


def test_a_reply_from_another_model_is_flagged_and_warned_about_once(scripted_server, caplog):
    server = scripted_server(lambda r: Reply(verdict_json(), model="llama-3-8b"))
    judge = judge_for(server)
    with caplog.at_level(logging.WARNING, logger="mlflow_genai_metrics"):
        replies = judge.ask_many([ask_about(f"row {i}") for i in range(3)])
    assert all(r.ok and r.model == "llama-3-8b" and r.model_mismatch for r in replies)
    assert judge.reported_models == {"llama-3-8b": 3}
    warnings = [r for r in caplog.records if "answered with 'llama-3-8b'" in r.getMessage()]
    assert len(warnings) == 1


def test_a_dated_snapshot_of_the_model_is_the_same_model(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json(), model="scripted-judge-2024-07-18"))
    reply = judge_for(server).ask(ask_about("claim"))
    assert reply.model == "scripted-judge-2024-07-18" and not reply.model_mismatch


def test_a_cached_reply_keeps_the_model_that_answered_it(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply(verdict_json(), model="llama-3-8b"))
    judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    rerun = judge_for(server, cache_dir=tmp_path)
    again = rerun.ask(ask_about("claim"))
    assert again.cached and again.model == "llama-3-8b" and again.model_mismatch
    assert rerun.reported_models == {"llama-3-8b": 1}


def test_which_reported_ids_name_the_requested_model():
    assert same_model("gpt-4o-mini", "gpt-4o-mini-2024-07-18") and same_model("gpt-4", "gpt-4-0613")
    assert same_model("claude-3-5-sonnet", "claude-3-5-sonnet-20240620") and same_model("llama3.1", "llama3.1:latest")
    assert not same_model("gpt-4o", "gpt-4o-mini") and not same_model("gpt-4o", "gpt-4o-mini-2024-07-18")
    assert not same_model("gpt-4o-mini", "smollm2-135m")


def test_ollama_and_gemini_listings_name_a_model_their_own_way():
    assert is_listed("llama3.1", ["llama3.1:latest"]) and is_listed("gemini-2.0-flash", ["models/gemini-2.0-flash"])
    assert not is_listed("gpt-4o", ["gpt-4o-mini"])
