"""Credentials written into the base URL (``http://user:password@host/v1``, ``?api-key=...``) are shown nowhere:
not in ``repr``, the signature, an error recorded against a row, a ``JudgeConfigError`` or a log line."""

from __future__ import annotations

import logging
import socket
import sqlite3
from pathlib import Path

import pytest
from conftest import SECRET_KEY, files_containing
from helpers import ask_about

from mlflow_genai_metrics import Judge, JudgeConfigError
from mlflow_genai_metrics.judge import redact_url
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

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


class EchoingEndpoint(SummarizationJudgeScript):
    """A judge (or a proxy before it) that writes the caller's API key and URL password into its answers: in every
    claim, key point and reason, and as the model id it reports."""

    def __call__(self, request):
        reply = super().__call__(request)
        return Reply(reply.content, model=f"judge-{SECRET_KEY}")

    def answer(self, kind, sections):
        answer = super().answer(kind, sections)
        leak = f" (key {SECRET_KEY}, password {PASSWORD})"
        for name in ("claims", "key_points"):
            if name in answer:
                answer[name] = [item + leak for item in answer[name]]
        for name in ("verdicts", "covered"):
            for item in answer.get(name, []):
                item["reason"] += leak
        return answer


def stored_texts(database: Path) -> str:
    """Every value of every table of a SQLite file, as text."""
    with sqlite3.connect(database) as connection:
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for table in tables for row in connection.execute(f'SELECT * FROM "{table}"'))


def test_a_key_the_endpoint_echoes_in_its_answers_is_stored_nowhere(scripted_server, mlflow_store, tmp_path):
    import mlflow

    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.tracking import log_result

    server = scripted_server(EchoingEndpoint())
    cache = tmp_path / "cache"
    judge = judge_with_password(server, cache_dir=cache)
    sources = ["The council approved the budget on Monday. The mayor welcomed it.", "Shares in Acme rose by ten percent."]
    with mlflow.start_run():
        result = judge_summaries(sources, ["The council approved the budget.", "Acme shares rose."], judge=judge)
        log_result(result, log_metrics=True)
    judge.close()
    assert result.claims["claim"].str.endswith("(key ***, password ***)").all()  # the claim kept, the secrets not
    assert result.claims["reason"].str.contains("***", regex=False).all() and result.key_points["key_point"].str.contains("***", regex=False).all()
    tables = "\n".join(table.to_csv() for table in (result.rows, result.claims, result.key_points)) + repr(result.reported_models)
    databases = [path for path in cache.rglob("*") if path.is_file() and path.read_bytes()[:16] == b"SQLite format 3\x00"]
    assert databases, f"no cache database under {cache}: {list(cache.rglob('*'))}"
    for secret in (SECRET_KEY, PASSWORD):
        assert secret not in tables
        assert all(secret not in stored_texts(database) for database in databases)
        assert files_containing(tmp_path, secret) == []  # the cache's files (WAL included), the MLflow store and artifacts
