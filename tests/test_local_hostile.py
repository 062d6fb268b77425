"""Hostile checks of the local endpoints and the commands built on them (`mgm serve`, the study's candidates), on
stand-in processes and the scripted server: the real model is not the point here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, frame

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.local import LocalModelServer
from mlflow_genai_metrics.study import Candidate, run_study
from mlflow_genai_metrics.testing import Reply


def test_mgm_serve_whose_server_dies_while_serving_says_so_and_exits_2(monkeypatch, capsys):
    """A llama.cpp server that exits while `mgm serve` waits for Ctrl-C: said at once with its log, exit code 2 (before:
    `mgm serve` went on printing nothing, serving nothing, until Ctrl-C, and then exited 0)."""

    def start(server):  # a stand-in server process that dies after its first words
        log = tempfile.NamedTemporaryFile(prefix="mgm-test-", suffix=".log", delete=False)
        server._log_path, server.model_id, server.port = Path(log.name), "stand-in", 8
        server._process = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('ggml: out of memory'); sys.exit(3)"], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        return server

    monkeypatch.setattr(LocalModelServer, "start", start)
    previous = signal.getsignal(signal.SIGTERM)
    # Without the fix, `mgm serve` would wait forever: a SIGTERM after 20 s ends that wait (exit code 0, asserted against).
    rescue = threading.Timer(20, lambda: os.kill(os.getpid(), signal.SIGTERM))
    rescue.start()
    try:
        code = mgm(["serve"])
    finally:
        rescue.cancel()
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.splitlines()[0] == "mgm serve: the llama.cpp server for stand-in exited with code 3 while serving", err
    assert "ggml: out of memory" in err
    assert signal.getsignal(signal.SIGTERM) is previous  # serve's own handler does not outlive the command


class CuttingEndpoint(Endpoint):
    """The good summarizer's summary of the first article is cut off by max_tokens, of the second empty."""

    def __call__(self, request):
        model = request.body.get("model")
        if model == "good-summarizer":
            article = request.last_user_message.split("\n\n", 1)[1]
            if article == ARTICLES[0][2]:
                return Reply("The council approved", finish_reason="length")
            if article == ARTICLES[1][2]:
                return Reply("  ")
        return super().__call__(request)


def test_a_study_judges_a_cut_off_or_empty_summary_against_its_candidate_never_drops_it(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """A summary cut off by max_tokens is the candidate's output and is judged as it stands; an empty one is judged
    empty (``defect_rate/empty``), a failure of the candidate in every figure. Dropping them as generation errors (tried
    here on 2026-12-07 and taken back) would leave them out of the candidate's run, so a gate on the run would read a
    candidate that writes nothing on half its articles by the other half."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))  # not the session's summaries of "good-summarizer"
    server = scripted_server(CuttingEndpoint(), models=Endpoint.models)
    result = run_study(frame().drop(columns=["summary"]), [Candidate("good", "good-summarizer", server.base_url)],
                       judge_for(server), progress=False, artifact_location=tmp_path / "artifacts")
    row = result.table.set_index("candidate").loc["good"]
    assert row["generation errors"] == 0 and str(row["defect: empty"]).startswith(f"{1 / len(ARTICLES):.3f}")
    metrics = MlflowClient().get_run(result.run_ids["good"]).data.metrics
    assert metrics["strict_alignment_n"] == len(ARTICLES) and metrics["judge_error_rate"] == 0


def test_a_blank_mgm_judge_model_or_base_url_is_unset_not_a_model_named_by_spaces(monkeypatch):
    """`export MGM_JUDGE_MODEL=" "`: no model given, said so (before: a judge of the model "  ", refused later by the
    endpoint, or asking api.openai.com for it); a base URL padded with spaces is that URL."""
    import pytest

    from mlflow_genai_metrics import Judge

    monkeypatch.setenv("MGM_JUDGE_MODEL", "  ")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", " http://127.0.0.1:9/v1/ ")
    with pytest.raises(ValueError, match="No judge model given"):
        Judge(cache_dir=None)
    monkeypatch.setenv("MGM_JUDGE_MODEL", " smollm2-135m\n")
    monkeypatch.setenv("MGM_JUDGE_CONTEXT", "4096")
    judge = Judge(cache_dir=None)
    assert (judge.model, judge.settings.base_url, judge.settings.context_window) == ("smollm2-135m", "http://127.0.0.1:9/v1", 4096)


def test_mgm_demo_with_a_blank_mgm_judge_model_judges_with_the_local_model(monkeypatch, tmp_path, capsys):
    """A blank MGM_JUDGE_MODEL is unset: the demo's judge is its local SmolLM2 (before: a Judge of the model "  " on
    api.openai.com, refused for want of a key after both local servers had started)."""
    import mlflow_genai_metrics.study as study

    def start(server):  # stand-in servers: the demo's judge choice is the point, not the models
        server.model_id, server.port = str(server.model), 9
        return server

    judges = []

    def fake_run_study(articles, candidates, judge, **options):
        judges.append(judge)
        raise KeyboardInterrupt  # stop the demo here: mgm reports it as interrupted

    monkeypatch.setattr(LocalModelServer, "start", start)
    monkeypatch.setattr(study, "run_study", fake_run_study)
    monkeypatch.setenv("MGM_JUDGE_MODEL", " ")
    assert mgm(["demo", "--store", str(tmp_path / "store"), "--limit", "1"]) == 130, capsys.readouterr().err
    assert [(judge.model, judge.settings.base_url) for judge in judges] == [("smollm2-135m", "http://127.0.0.1:9/v1")]
