"""Credentials written into the base URL (``http://user:password@host/v1``, ``?api-key=...``) are shown nowhere:
not in ``repr``, the signature, an error recorded against a row, a ``JudgeConfigError`` or a log line."""

from __future__ import annotations

import logging
import socket
import sqlite3
from pathlib import Path

import pytest
from conftest import SECRET_KEY, files_containing, verdict_json
from helpers import ask_about

from mlflow_genai_metrics import Judge, JudgeConfigError
from mlflow_genai_metrics.judge import redact_url
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

PASSWORD = "pw-4f9a1c-hunter2"


def with_password(base_url: str) -> str:
    return base_url.replace("http://", f"http://judge-user:{PASSWORD}@")


def judge_with_password(server, **options) -> Judge:
    options.setdefault("cache_dir", None)
    return Judge(server.models[0], with_password(server.base_url), backoff_initial_s=0.01, **options)  # the URL's credentials alone


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
    judge = Judge(server.models[0], wrong, cache_dir=None)
    with pytest.raises(JudgeConfigError) as caught:
        judge.ask(ask_about("claim"))
    assert "***@127.0.0.1" in str(caught.value) and PASSWORD not in str(caught.value)


def test_the_unreachable_error_hides_the_password():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    judge = Judge("m", f"http://judge-user:{PASSWORD}@127.0.0.1:{port}/v1", cache_dir=None)
    with pytest.raises(JudgeConfigError, match="cannot reach") as caught:
        judge.ask(ask_about("claim"))
    assert PASSWORD not in str(caught.value)


def test_log_lines_hide_the_password(scripted_server, caplog):
    server = scripted_server(reject_response_formats=("json_schema",))
    with caplog.at_level(logging.DEBUG, logger="mlflow_genai_metrics"):
        assert judge_with_password(server).ask(ask_about("claim")).ok
    assert "rejected response mode" in caplog.text and PASSWORD not in caplog.text


def test_a_retry_s_log_line_hides_the_password(scripted_server, caplog):
    server = scripted_server(lambda r: Fault.server_error(503) if r.attempt == 0 else Reply(verdict_json()))
    with caplog.at_level(logging.INFO, logger="mlflow_genai_metrics"):
        assert judge_with_password(server).ask(ask_about("claim")).ok
    assert "retrying a call to" in caplog.text and "***@127.0.0.1" in caplog.text and PASSWORD not in caplog.text


def test_a_key_beside_url_credentials_is_refused_naming_why(monkeypatch):
    """HTTP sends a URL's credentials in the Authorization header, in place of the key: never silently."""
    with pytest.raises(ValueError, match="carries credentials and api_key= gives a key") as caught:
        Judge("m", f"https://judge-user:{PASSWORD}@judge.example.com/v1", SECRET_KEY)
    assert PASSWORD not in str(caught.value) and SECRET_KEY not in str(caught.value)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    with pytest.raises(ValueError, match="carries credentials and OPENAI_API_KEY gives a key"):
        Judge("m", f"https://judge-user:{PASSWORD}@judge.example.com/v1")


def test_url_credentials_alone_are_what_is_sent_and_a_401_names_them(scripted_server):
    assert judge_with_password(scripted_server()).ask(ask_about("claim")).ok
    guarded = scripted_server(api_key=SECRET_KEY)  # wants a bearer key: the URL's credentials are not one
    with pytest.raises(JudgeConfigError, match="rejected the credentials written in its base URL") as caught:
        judge_with_password(guarded).ask(ask_about("claim"))
    assert "OPENAI_API_KEY" not in str(caught.value) and PASSWORD not in str(caught.value)


def test_credentials_do_not_change_the_cache_key_of_a_remote_endpoint():
    first = Judge("m", "https://u:old-password@judge.example.com/v1", cache_dir=None)
    second = Judge("m", "https://u:new-password@judge.example.com/v1", cache_dir=None)
    assert first.cache_endpoint == second.cache_endpoint == "https://***@judge.example.com/v1"


def test_redact_url_hides_userinfo_and_secret_query_values():
    text = "see https://me:pa55@host/v1?api-key=abc123&api-version=2024-06-01&sig=zzz and http://tok@h2/x"
    assert redact_url(text) == "see https://***@host/v1?api-key=***&api-version=2024-06-01&sig=*** and http://***@h2/x"


class EchoingEndpoint(SummarizationJudgeScript):
    """A judge (or a proxy before it) that writes the caller's API key and URL password into its answers: in every
    claim, key point and reason, and as the model id it reports."""

    def __init__(self, *, escaped: bool = False, key: str = SECRET_KEY):
        super().__init__()
        self.escaped = escaped  # the secrets written with JSON escapes, which reading the answer undoes
        self.key = key  # the key it echoes: the one the caller holds

    def __call__(self, request):
        reply = super().__call__(request)
        content = reply.content
        if self.escaped:
            for secret in (self.key, PASSWORD):
                content = content.replace(secret, secret.replace("-", "\\u002d", 1).replace("-", "\\u002D"))
        return Reply(content, model=f"judge-{self.key}")

    def answer(self, kind, sections):
        answer = super().answer(kind, sections)
        leak = f" (key {self.key}, password {PASSWORD})"
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


@pytest.mark.parametrize("escaped", [False, True], ids=["as-written", "json-escaped"])
@pytest.mark.parametrize("held", ["api key", "url password"])
def test_a_key_the_endpoint_echoes_in_its_answers_is_stored_nowhere(scripted_server, mlflow_store, tmp_path, held, escaped):
    import mlflow

    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.tracking import log_result

    server = scripted_server(EchoingEndpoint(escaped=escaped, key=SECRET_KEY if held == "api key" else "sk-someone-elses-key-42"))
    cache = tmp_path / "cache"
    judge = (Judge(server.models[0], server.base_url, SECRET_KEY, cache_dir=cache, backoff_initial_s=0.01) if held == "api key"
             else judge_with_password(server, cache_dir=cache))
    secret = SECRET_KEY if held == "api key" else PASSWORD
    sources = ["The council approved the budget on Monday. The mayor welcomed it.", "Shares in Acme rose by ten percent."]
    with mlflow.start_run():
        result = judge_summaries(sources, ["The council approved the budget.", "Acme shares rose."], judge=judge)
        log_result(result, log_metrics=True)
    judge.close()
    shown = "key ***, password" if held == "api key" else ", password ***)"
    assert result.claims["claim"].str.contains(shown, regex=False).all()  # the claim kept, the secret not
    assert result.claims["reason"].str.contains("***", regex=False).all() and result.key_points["key_point"].str.contains("***", regex=False).all()
    tables = "\n".join(table.to_csv() for table in (result.rows, result.claims, result.key_points)) + repr(result.reported_models)
    databases = [path for path in cache.rglob("*") if path.is_file() and path.read_bytes()[:16] == b"SQLite format 3\x00"]
    assert databases, f"no cache database under {cache}: {list(cache.rglob('*'))}"
    assert secret not in tables
    assert all(secret not in stored_texts(database) for database in databases)
    assert files_containing(tmp_path, secret) == []  # the cache's files (WAL included), the MLflow store and artifacts


def test_a_key_with_json_escaped_slashes_is_redacted_from_a_reply():
    judge = Judge("m", "http://127.0.0.1:9/v1", "sk-proj/abc/def-123456", cache_dir=None)
    assert judge.settings.redact_reply('{"claims": ["the key sk-proj\\/abc\\/def\\u002d123456 leaked"]}') == '{"claims": ["the key *** leaked"]}'
    untouched = '{"claims": ["a \\/ path and \\u00e9"]}'  # no secret in it: the answer is left as written
    assert judge.settings.redact_reply(untouched) == untouched
