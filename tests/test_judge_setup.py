"""Constructing a Judge: settings from the environment, the signature, pickling, the API key kept secret."""

from __future__ import annotations

import pickle

import pytest
from conftest import SECRET_KEY, files_containing, verdict_json
from helpers import ask_about, judge_for

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import DEFAULT_BASE_URL, default_cache_dir, redact
from mlflow_genai_metrics.testing import Fault, Reply


def test_model_base_url_and_key_come_from_the_environment(monkeypatch, scripted_server):
    server = scripted_server()
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    judge = Judge()
    assert (judge.model, judge.base_url) == ("scripted-judge", server.base_url)
    assert judge.ask(ask_about("claim")).ok


def test_without_a_base_url_the_judge_talks_to_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    assert Judge("gpt-4o-mini").base_url == DEFAULT_BASE_URL


def test_no_model_anywhere_is_a_clear_error():
    with pytest.raises(ValueError, match="MGM_JUDGE_MODEL"):
        Judge()


def test_a_remote_endpoint_without_a_key_is_a_clear_error():
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        Judge("gpt-4o-mini")


def test_a_loopback_server_needs_no_key():
    assert Judge("smollm2-135m", "http://127.0.0.1:8080/v1").model == "smollm2-135m"


def test_the_cache_defaults_to_mgm_cache_dir_and_none_turns_it_off(monkeypatch, tmp_path):
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    assert Judge("m", "http://127.0.0.1:1/v1").cache.directory == tmp_path / "here"
    assert Judge("m", "http://127.0.0.1:1/v1", cache_dir=None).cache is None


def _judge_part(judge: Judge) -> dict[str, str]:
    from mlflow_genai_metrics.signature import Signature, summarization_signature

    return Signature.parse(summarization_signature(judge, coverage=False)).part_fields("judge")


def test_the_signature_pins_model_host_temperature_and_seed():
    judge = Judge("gpt-4o-mini", "https://api.openai.com/v1", SECRET_KEY, seed=7, max_tokens=900)
    fields = _judge_part(judge)
    assert (fields["judge"], fields["base"], fields["temp"], fields["seed"], fields["max_tokens"]) == (
        "gpt-4o-mini", "api.openai.com", "0", "7", "900")


def test_local_servers_on_any_port_share_one_signature():
    first = Judge("smollm2-135m", "http://127.0.0.1:40001/v1")
    second = Judge("smollm2-135m", "http://localhost:40002/v1")
    assert _judge_part(first) == _judge_part(second)
    assert (_judge_part(first)["judge"], _judge_part(first)["base"]) == ("smollm2-135m", "localhost")


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="max_concurrency"):
        Judge("m", "http://127.0.0.1:1/v1", max_concurrency=0)
    with pytest.raises(ValueError, match="max_retries"):
        Judge("m", "http://127.0.0.1:1/v1", max_retries=-1)


def test_a_judge_pickles_its_settings_and_works_after_unpickling(scripted_server, tmp_path):
    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path, seed=3)
    judge.ask(ask_about("warm up the connection"))
    clone = pickle.loads(pickle.dumps(judge))
    assert (clone.model, clone.base_url, clone.seed, clone.cache.directory) == (judge.model, judge.base_url, 3, tmp_path)
    assert clone.usage.calls == 0  # runtime state does not travel
    assert clone.ask(ask_about("claim")).ok


def test_a_key_read_from_the_environment_is_not_pickled(monkeypatch, scripted_server):
    server = scripted_server()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    judge = Judge(server.models[0], server.base_url, cache_dir=None)
    blob = pickle.dumps(judge)
    assert SECRET_KEY.encode() not in blob
    assert pickle.loads(blob).ask(ask_about("claim")).ok  # the worker reads it from its own environment


def test_repr_does_not_show_the_key(scripted_server):
    assert SECRET_KEY not in repr(judge_for(scripted_server()))


def test_redact_hides_the_key_and_long_pieces_of_it():
    text = f"bad key {SECRET_KEY} and also {SECRET_KEY[3:20]} echoed"
    cleaned = redact(text, SECRET_KEY)
    assert SECRET_KEY not in cleaned and SECRET_KEY[3:20] not in cleaned
    assert cleaned.startswith("bad key ***")


def test_the_api_key_is_never_written_to_disk(scripted_server, tmp_path):
    def echo_key(request):  # a hostile server that puts the key into replies and errors
        if request.attempt == 0:
            return Fault.http(400, f"bad request from key {SECRET_KEY}")
        return Reply(verdict_json())

    server = scripted_server(echo_key)
    judge = judge_for(server, cache_dir=tmp_path / "cache")
    replies = judge.ask_many([ask_about(f"row {i}") for i in range(20)])
    assert any(not r.ok for r in replies)
    assert all(SECRET_KEY not in (r.error.message if r.error else "") for r in replies)
    (tmp_path / "errors.log").write_text("\n".join(str(r.error) for r in replies if r.error))
    judge.close()
    assert len(list((tmp_path / "cache").iterdir())) >= 1
    assert files_containing(tmp_path, SECRET_KEY) == []


def test_with_limits_copies_the_judge_with_other_limits(scripted_server, tmp_path):
    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path, seed=3, max_concurrency=8)
    share = judge.with_limits(max_concurrency=2, max_requests_per_s=5)
    assert (share.max_concurrency, share.max_requests_per_s) == (2, 5.0)
    assert (judge.max_concurrency, judge.max_requests_per_s) == (8, None)
    assert (share.model, share.base_url, share.seed, share.cache.directory, _judge_part(share)) == (
        judge.model, judge.base_url, 3, tmp_path, _judge_part(judge))
    assert share.ask(ask_about("claim")).ok and server.requests[-1].status == 200
