"""People's labels on a random sample of a run's rows (issue 48, 1-2), end to end in MLflow: ``label_sample`` draws
seeded rows once per run, tags them, records the draw and puts them in a review queue asking the card's question;
``people_estimate`` reads people's HUMAN feedback on the drawn traces only (labels elsewhere counted apart), logs
``people/strict_alignment`` with its interval, and a gate rule on it registers, or refuses saying "too few labels"."""

from __future__ import annotations

import json

import mlflow
import pytest
from helpers import judge_for
from mlflow.entities import AssessmentSource, AssessmentSourceType
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.people import ppi_proportion
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import (
    ClaimAlignment,
    SummarizerModel,
    evaluate_summaries,
    label_sample,
    people_estimate,
    register_if_passing,
)
from mlflow_genai_metrics.tracking.labels import SAMPLE_TAG

ROWS = 24
PERSON = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann@example.com")


def rows() -> list[dict]:
    """Summaries of which every third invents a detail (the judge says no); the rest copy the article."""
    data = []
    for k in range(ROWS):
        text = f"Article {k}. The club {k} won its match on Saturday. The coach {k} praised the defence."
        summary = f"The club {k} won its match." + (f" The striker {k} scored a hat-trick." if k % 3 == 0 else "")
        data.append({"inputs": {"text": text, "id": f"r{k}"}, "outputs": summary})
    return data


def evaluated_run(server, *, model: bool = False) -> tuple[str, str | None]:
    with mlflow.start_run() as run:
        uri = SummarizerModel("good-summarizer", server.base_url, input_col="text").log(name="summarizer").model_uri if model else None
        evaluate_summaries(rows(), [ClaimAlignment(judge_for(server))])
    return run.info.run_id, uri


def judge_said(trace) -> bool:
    card = next(a for a in trace.info.assessments if a.name == "claim_alignment" and a.source.source_type == "LLM_JUDGE")
    return str(card.value).lower() == "yes"


def traces_of(run_id: str) -> dict[str, object]:
    mlflow.flush_trace_async_logging()
    return {t.info.trace_id: t for t in mlflow.search_traces(run_id=run_id, return_type="list")}


def test_a_sample_is_drawn_at_random_once_per_run_recorded_and_queued(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    run_id, _ = evaluated_run(server)
    sample = label_sample(run_id, 8, seed=3)
    assert len(set(sample.trace_ids)) == 8 and sample.evaluated == ROWS and sample.card == "claim_alignment"
    traces = traces_of(run_id)
    assert {t for t, trace in traces.items() if SAMPLE_TAG in trace.info.tags} == set(sample.trace_ids)
    tags = MlflowClient().get_run(run_id).data.tags
    assert tags[f"{SAMPLE_TAG}.seed"] == "3" and tags[f"{SAMPLE_TAG}.n"] == "8" and tags[f"{SAMPLE_TAG}.queue"] == sample.queue
    recorded = json.loads(open(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="mgm_label_sample.json")).read())
    assert recorded["trace_ids"] == list(sample.trace_ids) and recorded["row_ids"] == list(sample.row_ids)
    from mlflow.genai import review_queues

    queued = review_queues.list_review_queue_items(sample.queue)
    assert {item.item_id for item in queued} == set(sample.trace_ids) and "review queue" in sample.where
    # the draw depends on the seed alone: the same rows of another run of the same data
    again, _ = evaluated_run(server)
    for n in (0, ROWS + 1):
        with pytest.raises(ValueError, match=f"n={n}: run {again} has {ROWS} evaluated rows"):
            label_sample(again, n)
    assert label_sample(again, 8, seed=3).row_ids == sample.row_ids
    with pytest.raises(ValueError, match=r"has a sample already \(8 rows, seed 3\): label those"):
        label_sample(run_id, 8, seed=4)


def test_people_s_rate_is_estimated_from_the_sample_s_labels_only_and_a_gate_rule_reads_it(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    run_id, uri = evaluated_run(server, model=True)
    with pytest.raises(ValueError, match="has no sample to estimate from"):
        people_estimate(run_id)
    sample = label_sample(run_id, 12, seed=11)
    traces = traces_of(run_id)
    drawn = [traces[t] for t in sample.trace_ids]
    # people disagree with the judge's yes on every other drawn row it said yes to
    said_yes = [t for t in drawn if judge_said(t)]
    people = {t.info.trace_id: (judge_said(t) and t not in said_yes[::2]) for t in drawn}
    first = next(iter(people))
    mlflow.log_feedback(trace_id=first, name="claim_alignment", value="yes" if people[first] else "no", source=PERSON)
    report = people_estimate(run_id)
    assert report.estimate.too_few and report.estimate.labelled == 1
    logged = MlflowClient().get_run(run_id).data
    assert "people/strict_alignment" not in logged.metrics and logged.metrics["people/strict_alignment_labelled"] == 1  # nothing to pass on
    assert "too few labels: 1" in logged.tags["mgm.people.strict_alignment"]
    refused = register_if_passing(uri, "people-gated", run_id=run_id, rules={"people/strict_alignment": ">= 0.1"})
    assert not refused.passed and "too few labels: 1" in str(refused.outcomes[0])
    for trace_id, verdict in list(people.items())[1:]:
        mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="yes" if verdict else "no", source=PERSON)
    outside = next(t for t in traces if t not in people)
    mlflow.log_feedback(trace_id=outside, name="claim_alignment", value="no", source=PERSON)  # not drawn: never used
    report = people_estimate(run_id)
    judge_all = [judge_said(t) for t in traces.values()]
    expected = ppi_proportion(judge_all, [judge_said(traces[t]) for t in people], list(people.values()))
    assert report.estimate == expected and report.outside_sample == 1 and report.unlabelled == 0
    assert report.estimate.estimate < report.estimate.judge_rate  # people are stricter than the judge here
    logged = MlflowClient().get_run(run_id).data
    assert logged.metrics["people/strict_alignment"] == pytest.approx(expected.estimate)
    assert logged.metrics["people/strict_alignment_ci_low"] == pytest.approx(expected.ci_low)
    assert logged.metrics["people/strict_alignment_labelled"] == 12 and logged.metrics["people/strict_alignment_n"] == ROWS
    assert "1 label on rows not drawn (not used)" in logged.tags["mgm.people.strict_alignment"]
    passed = register_if_passing(uri, "people-gated", run_id=run_id, rules={"people/strict_alignment_ci_low": f">= {expected.ci_low - 0.01:.3f}"})
    assert passed.passed and passed.registered_version is not None


def test_mgm_label_sample_and_mgm_people_print_where_to_label_and_the_estimate(scripted_server, mlflow_store, capsys):
    server = scripted_server(SummarizationJudgeScript())
    run_id, _ = evaluated_run(server)
    assert mgm(["label-sample", "--run-id", run_id, "--n", "5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert f"drew 5 of the {ROWS} rows of run {run_id} at random (seed 1, recorded on the run)" in out
    assert "review queue" in out and f"mgm people --run-id {run_id}" in out
    assert mgm(["label-sample", "--run-id", run_id, "--n", "5"]) == 2
    assert "has a sample already" in capsys.readouterr().err
    assert mgm(["people", "--run-id", run_id, "--no-log"]) == 0
    assert "too few labels: 0" in capsys.readouterr().out
