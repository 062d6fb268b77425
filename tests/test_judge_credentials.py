"""Credentials written into the base URL (``http://user:password@host/v1``, ``?api-key=...``) are shown nowhere:
not in ``repr``, the signature, an error recorded against a row, a ``JudgeConfigError`` or a log line."""

from __future__ import annotations

import logging
import socket

import pytest

from mlflow_genai_metrics import Judge, JudgeConfigError
from mlflow_genai_metrics.judge import redact_url
from mlflow_genai_metrics.testing import Fault, Reply

from conftest import SECRET_KEY, verdict_json
from helpers import ask_about

PASSWORD = "pw-4f9a1c-hunter2"


def with_password(base_url: str) -> str:
    return base_url.replace("http://", f"http://judge-user:{PASSWORD}@")


def judge_with_password(server, **options) -> Judge:
    options.setdefault("cache_dir", None)
    return Judge(server.models[0], with_password(server.base_url), SECRET_KEY, backoff_initial_s=0.01, **options)


def test_repr_signature_and_shown_url_hide_the_password(scripted_server):
    judge = judge_with_password(scripted_server())
    from mlflow_genai_metrics.signature import summarization_signature

    for shown in (repr(judge), summarization_signature(judge), judge.shown_url, judge.endpoint_label):
        assert PASSWORD not in shown and "judge-user" not in shown
    assert judge.shown_url.startswith("http://***@127.0.0.1:")


def test_an_error_recorded_against_a_row_hides_the_password(scripted_server):
    def echo(request):  # a server that quotes the URL it was called at, as proxies do
        return Fault.http(400, f"cannot route http://judge-user:{PASSWORD}@upstream/v1 (password {PASSWORD})")

    server = scripted_server(echo)
    reply = judge_with_password(server).ask(ask_about("claim"))
    assert reply.error.kind == "bad_request"
    assert PASSWORD not in reply.error.message and PASSWORD not in str(reply.error)


def test_a_bad_reply_excerpt_hides_the_password(scripted_server):
    server = scripted_server(lambda r: Fault.raw(f"<html>upstream {PASSWORD} failed</html>", content_type="text/html"))
    reply = judge_with_password(server, max_retries=0).ask(ask_about("claim"))
    assert reply.error.kind == "bad_reply" and PASSWORD not in reply.error.raw and PASSWORD not in reply.error.message


def test_a_configuration_error_hides_the_password(scripted_server):
    server = scripted_server()
    wrong = with_password(server.base_url.removesuffix("/v1"))  # a wrong base URL: HTTP 404
    judge = Judge(server.models[0], wrong, SECRET_KEY, cache_dir=None)
    with pytest.raises(JudgeConfigError) as caught:
        judge.ask(ask_about("claim"))
    assert "***@127.0.0.1" in str(caught.value) and PASSWORD not in str(caught.value)


def test_the_unreachable_error_hides_the_password():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    judge = Judge("m", f"http://judge-user:{PASSWORD}@127.0.0.1:{port}/v1", SECRET_KEY, cache_dir=None)
    with pytest.raises(JudgeConfigError, match="cannot reach") as caught:
        judge.ask(ask_about("claim"))
    assert PASSWORD not in str(caught.value)


def test_log_lines_hide_the_password(scripted_server, caplog):
    server = scripted_server(reject_response_formats=("json_schema",))
    with caplog.at_level(logging.DEBUG, logger="mlflow_genai_metrics"):
        assert judge_with_password(server).ask(ask_about("claim")).ok
    assert "rejected response mode" in caplog.text and PASSWORD not in caplog.text


def test_a_missing_key_error_hides_the_password():
    with pytest.raises(ValueError, match="OPENAI_API_KEY") as caught:
        Judge("m", f"https://judge-user:{PASSWORD}@judge.example.com/v1")
    assert PASSWORD not in str(caught.value)


def test_credentials_do_not_change_the_cache_key_of_a_remote_endpoint():
    first = Judge("m", "https://u:old-password@judge.example.com/v1", SECRET_KEY, cache_dir=None)
    second = Judge("m", "https://u:new-password@judge.example.com/v1", SECRET_KEY, cache_dir=None)
    assert first.cache_endpoint == second.cache_endpoint == "https://***@judge.example.com/v1"


def test_redact_url_hides_userinfo_and_secret_query_values():
    text = "see https://me:pa55@host/v1?api-key=abc123&api-version=2024-06-01&sig=zzz and http://tok@h2/x"
    assert redact_url(text) == "see https://***@host/v1?api-key=***&api-version=2024-06-01&sig=*** and http://***@h2/x"
