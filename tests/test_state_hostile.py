"""Hostile checks of state and identity across calls: what one evaluation sets up must not be seen by the next one,
nor by one running beside it in another thread, and a ``Judge`` passed in is the judge that is used."""

from __future__ import annotations

import json
import os
import threading

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.metrics import MetricValue, make_metric
from mlflow_helpers import ARTICLES, Endpoint, first_sentence, frame
from run_traces import cards_per_row

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.judge import BatchOptions
from mlflow_genai_metrics.study import Candidate, run_study
from mlflow_genai_metrics.testing import ScriptedBatches
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, evaluate, summarization_metrics


def _rows() -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]


def test_classic_metrics_shared_by_two_runs_at_once_judge_each_run_s_rows_once(scripted_server, mlflow_store):
    """One ``summarization_metrics`` list used by two ``mlflow.models.evaluate`` runs in two threads at once (6 and
    4 rows): the adapter kept the answers of one run and started afresh whenever a metric was called from the other,
    so nearly every metric call judged its rows again: 544 judge calls for the 40 the rows need, while each run's
    ``judge/calls`` said 24 and 16. Each run's answers are now its own: 40 calls, each run's rows and figures."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    ours = summarization_metrics(judge, source_col="text", id_col="id", coverage=True)
    together = threading.Barrier(2, timeout=120)

    def both_here(predictions):  # both runs past their first metric before either goes on: their calls interleave
        together.wait()
        return MetricValue(aggregate_results={})

    metrics = [ours[0], make_metric(eval_fn=both_here, greater_is_better=True, name="both_here"), *ours[1:]]
    data = {"six": frame(), "four": frame().iloc[:4].assign(id=lambda f: "four-" + f["id"])}
    done: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            with mlflow.start_run(run_name=name) as started:
                evaluation = mlflow.models.evaluate(data=data[name], predictions="summary", targets="reference", extra_metrics=metrics)
            done[name] = (started.info.run_id, evaluation.metrics)
        except Exception as error:  # said by the assertion below, not lost in the thread
            together.abort()
            done[name] = error

    threads = [threading.Thread(target=run, args=(name,)) for name in data]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(value, tuple) for value in done.values()), done
    assert judge.usage.calls == server.request_count == 4 * (6 + 4)  # claims, verdicts, key points, coverage per row
    for name, rows in (("six", 6), ("four", 4)):
        run_id, metrics_logged = done[name]
        report = json.loads(mlflow.artifacts.load_text(f"runs:/{run_id}/mgm/report.json"))
        assert report["rows"] == rows and metrics_logged["alignment_n"] == rows
        assert metrics_logged["judge/calls"] == 4 * rows


def test_scorers_of_one_set_made_with_two_judges_are_refused_naming_what_differs(scripted_server, mlflow_store, tmp_path, monkeypatch):
    """``evaluate(data, [ClaimAlignment(judge), KeyPointCoverage(capped)])`` with ``capped = Judge(..., max_calls=5)``:
    a set judges each row once with one Judge, which was the first scorer's, compared with the others on the
    settings the scorers carry (model, endpoint, temperature, ...) only. The capped Judge made no call, the run made
    24, past the cap of 5 the user set on coverage, with no word; a cache folder (or key) given to the second
    scorer's Judge went unused the same way. Now refused before any call, naming the setting."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server, cache_dir=tmp_path / "mine")
    for other, differs in ((judge_for(server, cache_dir=tmp_path / "mine", max_calls=5), "max_calls"),
                           (judge_for(server, cache_dir=tmp_path / "other"), "cache_dir")):
        with pytest.raises(ValueError, match=f"claim_alignment's Judge and key_point_coverage's differ in {differs}: make them with one Judge"):
            evaluate(_rows(), [ClaimAlignment(judge), KeyPointCoverage(other), Grounding()])
    assert server.request_count == 0
    # one Judge for both (a copy made alike counts as one): it is the one that asks, whatever MGM_JUDGE_MODEL says
    monkeypatch.setenv("MGM_JUDGE_MODEL", "another-model")
    evaluation = evaluate(_rows(), [ClaimAlignment(judge), KeyPointCoverage(judge_for(server, cache_dir=tmp_path / "mine")), Grounding()])
    assert judge.usage.calls == server.request_count == evaluation.metrics["judge/calls"] == 4 * len(ARTICLES)
    assert evaluation.result.signature.startswith(f"judge:{server.models[0]}|")


def test_run_study_leaves_the_caller_s_experiment_current(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """``run_study`` called ``mlflow.set_experiment`` on its own experiment and left it so: after the study, the
    caller's next run (an ``evaluate_summaries``, a ``start_run``) went into ``mgm-study``, not the experiment the
    caller had set, and ``$MLFLOW_EXPERIMENT_ID`` named the study's for every child process. The study names its
    experiment on the runs it starts; its runs are there, one trace per article, and the caller's stays current."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    mine = mlflow.set_experiment("mine").experiment_id
    server = scripted_server(Endpoint(), models=Endpoint.models)
    result = run_study(frame().drop(columns=["summary"]), [Candidate("good", "good-summarizer", server.base_url)], judge_for(server),
                       coverage=False, progress=False, artifact_location=tmp_path / "artifacts")
    assert result.experiment_id != mine
    study_run = mlflow.get_run(result.run_ids["good"])
    assert study_run.info.experiment_id == result.experiment_id
    assert cards_per_row(study_run.info.run_id) == {row_id: ["claim_alignment", "grounding"] for row_id, _, _ in ARTICLES}
    assert os.environ["MLFLOW_EXPERIMENT_ID"] == mine
    with mlflow.start_run() as after:
        assert after.info.experiment_id == mine



def test_a_judge_passed_to_a_batched_run_is_the_one_whose_usage_grows(scripted_server):
    """``judge_summaries(..., judge=judge, batch=True)`` asks through ``judge.batched()``, a copy with a usage of its
    own that went with the call: the run made 24 calls and ``judge.usage`` said 0 calls, 0 requests, no model, so a
    user adding up what the Judge spent (or checking which model answered) read nothing. The copy counts into its
    Judge's usage and reported models."""
    server = scripted_server(Endpoint(), models=Endpoint.models, batch_api=ScriptedBatches())
    judge = judge_for(server)
    texts = [text for _, _, text in ARTICLES]
    result = judge_summaries(texts, [first_sentence(t) for t in texts], judge=judge, batch=BatchOptions(poll_s=0.01), grounding=False, resamples=10)
    assert result.metrics["judge/calls"] == judge.usage.calls == judge.usage.batched_calls == server.request_count == 4 * len(ARTICLES)
    assert judge.usage.requests == 4 * len(ARTICLES) and judge.reported_models == {server.models[0]: 4 * len(ARTICLES)}


def test_mgm_called_in_the_process_leaves_the_caller_s_experiment_current(tmp_path, mlflow_store, monkeypatch):
    """``mlflow_genai_metrics.cli.main(["evaluate", ...])`` from a notebook or a script: the command sets its
    experiment (``mgm``) and put ``$MLFLOW_EXPERIMENT_ID`` back after, but not MLflow's current experiment, so the
    caller's next ``start_run`` went into ``mgm``. Both are the caller's again once the command returns."""
    from mlflow_genai_metrics import cli

    monkeypatch.setenv("MGM_JUDGE_MODEL", "no-judge-here")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    mine = mlflow.set_experiment("mine").experiment_id
    rows = tmp_path / "rows.csv"
    frame()[["id", "text", "summary"]].to_csv(rows, index=False)
    assert cli.main(["evaluate", str(rows), "--id-col", "id", "--grounding-only", "--experiment", "elsewhere"]) == 0
    assert os.environ["MLFLOW_EXPERIMENT_ID"] == mine
    with mlflow.start_run() as after:
        assert after.info.experiment_id == mine
