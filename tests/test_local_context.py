"""A local judge knows its context window: ``LocalModelServer.judge()`` passes ``n_ctx``, ``mgm serve`` exports it as
``MGM_JUDGE_CONTEXT``, and a ``Judge`` of that model reads it from there when ``context_window`` is not given."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_model import QUESTION

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.cli import build_parser
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.cli.common import make_judge
from mlflow_genai_metrics.local import LocalModelServer, LocalModelServerError

NOWHERE = "http://127.0.0.1:9/v1"  # no call is made: the Judges below are only built


@pytest.fixture
def served_environment(monkeypatch):
    """The environment `mgm serve` tells a user to export, for a model on a closed port."""
    for name, value in {"MGM_JUDGE_MODEL": "smollm2-135m", "MGM_JUDGE_BASE_URL": NOWHERE, "MGM_JUDGE_CONTEXT": "2048"}.items():
        monkeypatch.setenv(name, value)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_judge_of_the_model_mgm_judge_model_names_reads_its_context_window_from_mgm_judge_context(served_environment):
    assert Judge().context_window == 2048
    assert Judge("smollm2-135m", NOWHERE).context_window == 2048


def test_mgm_judge_context_does_not_apply_to_a_judge_of_another_model(served_environment):
    assert Judge("gpt-4o-mini", NOWHERE).context_window is None


def test_mgm_judge_context_applies_to_any_model_when_mgm_judge_model_is_unset(monkeypatch):
    monkeypatch.setenv("MGM_JUDGE_CONTEXT", "4096")
    assert Judge("any-model", NOWHERE).context_window == 4096


def test_a_context_window_passed_wins_over_mgm_judge_context(served_environment):
    assert Judge(context_window=512).context_window == 512


def test_a_malformed_mgm_judge_context_is_refused_naming_the_variable(served_environment, monkeypatch):
    monkeypatch.setenv("MGM_JUDGE_CONTEXT", "8k")
    with pytest.raises(ValueError, match="MGM_JUDGE_CONTEXT"):
        Judge()


def test_the_cli_judge_reads_mgm_judge_context_when_judge_context_is_not_given(served_environment):
    for command in (["evaluate", "data.csv"], ["monitor"], ["meta-eval", "labels.jsonl"]):
        assert make_judge(build_parser().parse_args(command)).context_window == 2048
        assert make_judge(build_parser().parse_args([*command, "--judge-context", "1024"])).context_window == 1024


def served_threads(port: int) -> list[str]:
    """The thread counts on the command line of the llama.cpp server listening on ``port`` (from /proc)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "--n_threads" in words and "--port" in words and words[words.index("--port") + 1:][:1] == [str(port)]:
            return [words[words.index(flag) + 1] for flag in ("--n_threads", "--n_threads_batch")]
    raise AssertionError(f"no llama.cpp server on port {port}")


def test_a_local_server_computes_on_the_threads_asked_else_mgm_local_threads_else_one_per_core(monkeypatch):
    monkeypatch.delenv("MGM_LOCAL_THREADS")
    assert LocalModelServer("smollm2-135m").n_threads == os.cpu_count()
    monkeypatch.setenv("MGM_LOCAL_THREADS", "3")
    assert LocalModelServer("smollm2-135m").n_threads == 3
    assert LocalModelServer("smollm2-135m", n_threads=2).n_threads == 2
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("MGM_LOCAL_THREADS", bad)
        with pytest.raises(LocalModelServerError, match=f"MGM_LOCAL_THREADS='{bad}' is not a positive whole number"):
            LocalModelServer("smollm2-135m")


def test_mgm_serve_threads_reaches_the_server(monkeypatch, capsys):
    asked = []

    def start(server):
        asked.append(server.n_threads)
        raise LocalModelServerError("stopped before starting")

    monkeypatch.setattr(LocalModelServer, "start", start)
    assert mgm(["serve", "--threads", "1"]) == 2
    monkeypatch.setenv("MGM_LOCAL_THREADS", "2")
    assert mgm(["serve"]) == 2
    assert asked == [1, 2]
    assert "stopped before starting" in capsys.readouterr().err


def test_a_server_not_started_gives_no_judge():
    with pytest.raises(LocalModelServerError, match="not running"):
        LocalModelServer("smollm2-135m").judge()


def test_mgm_serve_on_a_port_in_use_says_so_in_one_line_and_exits_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert mgm(["serve", "--port", str(port)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"mgm serve: cannot serve on 127.0.0.1:{port}: ") and error.count("\n") == 1


@pytest.mark.local_model
def test_a_local_server_s_judge_has_its_context_window_and_answers(tmp_path):
    with LocalModelServer("smollm2-135m", n_ctx=4096) as server:
        judge = server.judge(cache_dir=tmp_path)
        assert (judge.model, judge.base_url, judge.context_window) == ("smollm2-135m", server.base_url, 4096)
        reply = judge.ask(QUESTION)
    assert reply.ok, reply.error


@pytest.mark.local_model
def test_mgm_serve_exports_the_model_url_and_window_on_the_port_asked_and_a_judge_made_from_them_answers(tmp_path, monkeypatch):
    port = free_port()
    command = [sys.executable, "-m", "mlflow_genai_metrics.cli", "serve", "--port", str(port), "--n-ctx", "2048", "--threads", "1"]
    serving = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in serving.stdout:  # the export line comes once the server answers
            lines.append(line)
            if line.strip().startswith("export "):
                break
        exported = dict(word.split("=", 1) for word in shlex.split(lines[-1])[1:])
        assert exported == {"MGM_JUDGE_MODEL": "smollm2-135m", "MGM_JUDGE_BASE_URL": f"http://127.0.0.1:{port}/v1", "MGM_JUDGE_CONTEXT": "2048"}, lines
        for name, value in exported.items():
            monkeypatch.setenv(name, value)
        judge = Judge(cache_dir=tmp_path)
        assert judge.context_window == 2048
        assert served_threads(port) == ["1", "1"]  # --n_threads and --n_threads_batch of the llama.cpp process
        reply = judge.ask(QUESTION)
        assert reply.ok, reply.error
    finally:
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(timeout=30) == 0
