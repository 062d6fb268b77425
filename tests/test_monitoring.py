"""Production monitoring: the judges registered, loaded back and started on a real ``mlflow server`` (custom scorers
enabled), refused where MLflow refuses custom scorers, and ``score_traces`` / ``mgm monitor`` scoring an
experiment's traces not yet scored, resumably."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from conftest import SECRET_KEY, copy_mlflow_database
from helpers import judge_for
from mlflow.exceptions import MlflowException
from mlflow.genai.scorers import ScorerSamplingConfig, get_scorer, list_scorers
from mlflow_helpers import ARTICLES, CONTRADICTIONS, Endpoint, first_sentence

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, score_traces

JUDGED = ("claim_alignment", "grounding")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def custom_scorer_server(tmp_path_factory, migrated_mlflow_database):
    """``mlflow server`` on a SQLite store, on a free port of 127.0.0.1, started with custom scorers enabled."""
    folder = tmp_path_factory.mktemp("server")
    store = copy_mlflow_database(migrated_mlflow_database, folder / "mlflow.db")  # migrated: the server does not migrate
    port = _free_port()
    environment = {**os.environ, "MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store, "--default-artifact-root",
               (folder / "artifacts").as_uri(), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow server did not start: {Path(folder / 'server.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        process.terminate()  # the server stops its worker too
        process.wait(timeout=30)


def test_a_judge_registers_and_loads_back_from_a_server_with_custom_scorers(custom_scorer_server, scripted_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")  # loading it back runs its stored source here too
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # the key the rebuilt judge reads: it is never stored
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    mlflow.set_tracking_uri(custom_scorer_server)
    try:
        mlflow.set_experiment("monitoring")
        registered = ClaimAlignment(judge_for(endpoint)).register()
        Grounding().register()
        assert registered.name == "claim_alignment" and registered.scorer_version == 1
        assert sorted(s.name for s in list_scorers()) == sorted(JUDGED)
        loaded = get_scorer(name="claim_alignment")
        verdict = loaded(inputs={"text": ARTICLES[0][2]}, outputs=CONTRADICTIONS["no"][0])
        assert verdict.value == "no" and verdict.source.source_id == "openai:/scripted-judge"
        # MLflow 3.17's server runs monitoring only for judges on an AI-gateway model, never a custom scorer: the
        # reason score_traces and mgm monitor exist (docs/mlflow.md says so; this fails if MLflow lifts the limit)
        with pytest.raises(MlflowException, match="does not use a gateway model"):
            loaded.start(sampling_config=ScorerSamplingConfig(sample_rate=1.0))
    finally:
        mlflow.set_tracking_uri("")


def test_without_custom_scorers_enabled_mlflow_refuses_to_register_a_judge(scripted_server, mlflow_store, monkeypatch):
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", raising=False)
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(MlflowException, match="MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS"):
        ClaimAlignment(judge_for(endpoint)).register()


@mlflow.trace
def summarize(text: str, id: str) -> str:
    """The app being monitored: its traces' root spans hold the article and the summary."""
    return CONTRADICTIONS["no"][0] if id == "biz/1" else first_sentence(text)


@mlflow.trace
def answer(question: str) -> str:
    return "not a summary"


def app_traces() -> list[str]:
    """Six summaries and one trace of something else in the active experiment."""
    for row_id, _, text in ARTICLES:
        summarize(text, row_id)
    answer("what time is it?")
    mlflow.flush_trace_async_logging()
    return [t.info.trace_id for t in mlflow.search_traces(return_type="list")]


def judged_names(trace_id: str) -> list[str]:
    return sorted(a.name for a in mlflow.get_trace(trace_id).info.assessments if getattr(a, "feedback", None) is not None)


def test_score_traces_gives_each_summary_trace_one_feedback_per_judge(scripted_server, mlflow_store):
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    traces = app_traces()
    report = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(endpoint)), Grounding()])
    assert (report.traces_seen, report.scored, report.unusable, report.already_scored, report.judge_errors) == (7, 6, 1, 0, 0)
    verdicts = {}
    for trace_id in traces:
        names = judged_names(trace_id)
        assert names in (sorted(JUDGED), [])
        if names:
            trace = mlflow.get_trace(trace_id)
            verdicts[trace.data.spans[0].inputs["id"]] = next(a.value for a in trace.info.assessments if a.name == "claim_alignment")
    assert verdicts == {row_id: "no" if row_id == "biz/1" else "yes" for row_id, _, _ in ARTICLES}


def test_score_traces_skips_what_is_scored_and_resumes_where_it_stopped(scripted_server, mlflow_store, tmp_path):
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    judge = judge_for(endpoint, cache_dir=tmp_path / "cache")
    first = score_traces("mgm-tests", judges=[ClaimAlignment(judge)], max_traces=2)
    assert (first.scored, first.deferred) == (2, 4)
    second = score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    assert (second.scored, second.already_scored) == (4, 2)
    calls = endpoint.request_count
    assert calls == 2 * len(ARTICLES)  # claims and verdicts, once per summary over both passes
    third = score_traces("mgm-tests", judges=[ClaimAlignment(judge), Grounding()])  # a judge added: only its feedback
    assert third.scored == 6 and endpoint.request_count == calls  # the judge's answers came from its cache
    assert all(judged_names(t.info.trace_id) == sorted(JUDGED) for t in mlflow.search_traces(return_type="list") if t.data.spans[0].name == "summarize")


def test_a_trace_whose_card_is_an_error_is_judged_again_on_the_next_pass(scripted_server, mlflow_store, tmp_path):
    from mlflow_genai_metrics.testing import Fault

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    answers = endpoint.script
    endpoint.script = lambda request: Fault("status", 500)  # an outage: every judge call fails
    judge = judge_for(endpoint, cache_dir=tmp_path / "cache", max_retries=0)
    outage = score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    assert (outage.scored, outage.judge_errors) == (6, 6)
    endpoint.script = answers
    after = score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    # once: already_scored=6, scored=0, nothing sent, every card an error for good
    assert (after.scored, after.retried, after.judge_errors, after.already_scored) == (6, 6, 0, 0)
    for trace in mlflow.search_traces(return_type="list"):
        if trace.data.spans[0].name == "summarize":
            cards = [a for a in trace.info.assessments if a.name == "claim_alignment"]
            assert len(cards) == 1 and cards[0].error is None and cards[0].value in ("yes", "no")  # the error card gave way
    assert score_traces("mgm-tests", judges=[ClaimAlignment(judge)]).already_scored == 6  # scored ones are never asked again


def _claim_cards() -> list[list[tuple]]:
    """Each summary trace's claim_alignment cards, as (value, error code)."""
    return [[(a.value, a.error.error_code if a.error else None) for a in t.info.assessments if a.name == "claim_alignment"]
            for t in mlflow.search_traces(return_type="list") if t.data.spans[0].name == "summarize"]


def test_a_pass_stopped_between_writing_a_card_and_removing_the_error_card_is_cleaned_by_the_next(scripted_server, mlflow_store,
                                                                                                  tmp_path, monkeypatch):
    """The retry wrote the verdict, then stopped before removing the outage's error card: every later pass counted
    the trace as scored, and the error card stayed beside the verdict for good (one feedback per judge, promised)."""
    from mlflow_genai_metrics.testing import Fault

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    answers, endpoint.script = endpoint.script, (lambda request: Fault("status", 500))
    judge = judge_for(endpoint, cache_dir=tmp_path / "cache", max_retries=0)
    score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    endpoint.script = answers

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(mlflow, "delete_assessment", stopped)
        with pytest.raises(KeyboardInterrupt):
            score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    assert any(len(cards) == 2 for cards in _claim_cards())  # a verdict beside its error card, as the stop left it
    report = score_traces("mgm-tests", judges=[ClaimAlignment(judge)])
    assert all(len(cards) == 1 and cards[0][1] is None for cards in _claim_cards()), _claim_cards()
    assert report.traces_seen == report.already_scored + report.unusable + report.scored + report.deferred


def test_two_passes_at_once_give_each_trace_one_card_and_a_pass_s_counts_add_up(scripted_server, mlflow_store, monkeypatch):
    """Two passes at once (a scheduled one that overran) both scored every trace: two cards each, paid twice. Here
    the second pass runs whole between the first's reading of the traces and its writing of the cards."""
    from mlflow_genai_metrics.tracking import monitor

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    judges = [ClaimAlignment(judge_for(endpoint))]
    read, second = monitor.trace_rows, []

    def then_another_pass(*args, **kwargs):
        rows = read(*args, **kwargs)
        if not second:
            second.append(None)
            second[0] = score_traces("mgm-tests", judges=judges)
        return rows

    monkeypatch.setattr(monitor, "trace_rows", then_another_pass)
    first = score_traces("mgm-tests", judges=judges)
    assert [len(cards) for cards in _claim_cards()] == [1] * 6
    assert (second[0].scored, first.scored, first.already_scored) == (6, 0, 6)
    assert first.traces_seen == first.already_scored + first.unusable + first.scored + first.deferred


def test_judge_errors_counts_the_error_cards_a_pass_wrote_and_max_traces_is_checked(scripted_server, mlflow_store):
    """Adding Grounding to traces already judged, during an outage: every row's judgement failed, no card of the
    judge was written (its verdicts were there), the grounding cards were, and the pass said "6 judge errors"."""
    from mlflow_genai_metrics.testing import Fault

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(endpoint))])
    endpoint.script = lambda request: Fault("status", 500)
    report = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(endpoint, max_retries=0)), Grounding()])
    assert (report.scored, report.judge_errors) == (6, 0)
    with pytest.raises(ValueError, match="max_traces must be 0 or more"):
        score_traces("mgm-tests", judges=[Grounding()], max_traces=-1)


def test_mgm_monitor_scores_an_experiment_and_fails_fast_on_a_wrong_model(scripted_server, mlflow_store, capsys):
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    app_traces()
    common = ["--experiment", "mgm-tests", "--judge-base-url", endpoint.base_url, "--tracking-uri", mlflow_store, "--no-coverage"]
    assert mgm(["monitor", *common, "--judge-model", "scripted-judg"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("mgm monitor: ") and "does not serve model 'scripted-judg'" in error and len(error.strip().splitlines()) == 1
    assert endpoint.request_count == 0
    assert mgm(["monitor", *common, "--judge-model", "scripted-judge"]) == 0
    assert "6 scored now (0 judge errors, 0 asked again after an error), 0 already scored, 1 not a source and a summary" in capsys.readouterr().out
