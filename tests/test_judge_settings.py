"""A Judge's configuration (``JudgeSettings``): the environment read once, bad settings refused before any call,
frozen, and what a pickle carries."""

from __future__ import annotations

import pickle

import pytest
from conftest import SECRET_KEY
from helpers import ask_about, judge_for
from pydantic import ValidationError

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import JudgeSettings


def test_the_environment_is_read_once_when_the_judge_is_made(monkeypatch, scripted_server):
    server = scripted_server(api_key=SECRET_KEY)
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    judge = Judge(cache_dir=None)
    monkeypatch.setenv("MGM_JUDGE_MODEL", "another-model")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-another-key-0000000000")
    assert judge.ask(ask_about("claim")).ok  # the server refuses any other key, and nothing listens on port 9
    assert server.requests[-1].body["model"] == "scripted-judge"


def test_resolve_reads_the_environment_it_is_given():
    settings = JudgeSettings.resolve(
        environ={"MGM_JUDGE_MODEL": "m", "OPENAI_BASE_URL": "https://judge.example.com/v1/", "OPENAI_API_KEY": SECRET_KEY,
                 "MGM_CACHE_DIR": "/tmp/judge-cache"}
    )
    assert (settings.model, settings.base_url, settings.key) == ("m", "https://judge.example.com/v1", SECRET_KEY)
    assert str(settings.cache_dir) == "/tmp/judge-cache" and not settings.api_key_given


@pytest.mark.parametrize(
    "bad",
    [
        {"max_concurrency": 0},
        {"max_retries": -1},
        {"max_requests_per_s": 0},
        {"timeout_s": 0},
        {"max_tokens": 0},
        {"context_window": -5},
        {"backoff_initial_s": -1},
        {"prices": {"input": -1.0, "output": 0.6}},
    ],
    ids=lambda bad: next(iter(bad)),
)
def test_a_setting_out_of_range_is_refused_before_any_call(scripted_server, bad):
    server = scripted_server()
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        judge_for(server, **bad)
    assert server.model_listings == 0 and server.request_count == 0


def test_with_limits_refuses_limits_out_of_range(scripted_server):
    judge = judge_for(scripted_server())
    with pytest.raises(ValueError, match="max_concurrency"):
        judge.with_limits(max_concurrency=0, max_requests_per_s=None)


def test_settings_are_frozen_once_the_judge_is_made(scripted_server):
    judge = judge_for(scripted_server())
    with pytest.raises(ValidationError):
        judge.settings.model = "another-model"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="with_limits"):
        judge.max_concurrency = 2  # type: ignore[misc]


def test_every_setting_reads_back_from_the_judge(scripted_server):
    judge = judge_for(scripted_server(), seed=3, max_tokens=64, context_window=2048, prices=(0.15, 0.6))
    for name in JudgeSettings.model_fields:
        if name not in ("api_key", "api_key_given", "cache_dir"):
            assert getattr(judge, name) == getattr(judge.settings, name), name
    assert (judge.max_tokens, judge.context_window, judge.seed) == (64, 2048, 3)


def test_the_settings_repr_shows_neither_the_key_nor_url_credentials():
    assert SECRET_KEY not in repr(JudgeSettings.resolve("m", "https://judge.example.com/v1", SECRET_KEY))
    shown = repr(JudgeSettings.resolve("m", "https://user:hunter2-secret@judge.example.com/v1"))
    assert "hunter2-secret" not in shown and "https://***@judge.example.com/v1" in shown


def test_unpickled_settings_read_the_key_of_their_own_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    blob = pickle.dumps(JudgeSettings.resolve("m", "https://judge.example.com/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-workers-own-key-000")
    assert SECRET_KEY.encode() not in blob
    assert pickle.loads(blob).key == "sk-the-workers-own-key-000"


def test_a_key_passed_explicitly_travels_in_the_pickle(monkeypatch):
    settings = JudgeSettings.resolve("m", "https://judge.example.com/v1", SECRET_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-workers-own-key-000")
    assert pickle.loads(pickle.dumps(settings)).key == SECRET_KEY


def test_a_judge_model_named_as_mlflow_names_it_is_the_bare_model_and_another_provider_is_refused():
    from mlflow_genai_metrics import Judge

    judge = Judge("openai:/gpt-4o-mini", "http://127.0.0.1:9/v1", cache_dir=None)
    assert judge.model == "gpt-4o-mini" and "judge:gpt-4o-mini|" in judge_signature_of(judge)
    assert Judge("llama3.2:3b", "http://127.0.0.1:9/v1", cache_dir=None).model == "llama3.2:3b"  # Ollama's tags stay
    with pytest.raises(ValueError, match=r"'anthropic:/claude-3': this judge speaks the OpenAI protocol.*point base_url="):
        Judge("anthropic:/claude-3", "http://127.0.0.1:9/v1", cache_dir=None)


def judge_signature_of(judge) -> str:
    from mlflow_genai_metrics.signature import summarization_signature

    return summarization_signature(judge)
