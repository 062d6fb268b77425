"""The judge's agreement with people, read back from feedback planted on traces in a real SQLite MLflow store:
``judge_agreement`` and ``mgm agreement``."""

from __future__ import annotations

import time

import mlflow
import pandas as pd
import pytest
from mlflow.entities import AssessmentError, AssessmentSource
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.summarization.verdicts import normalise_verdict
from mlflow_genai_metrics.tracking import judge_agreement
from mlflow_genai_metrics.tracking.agreement import CONFUSION_TABLE, TRACES_TABLE

NAME = "claim_alignment"
ERROR = object()  # a judge feedback with an error instead of a value


def judge(value, model: str = "openai:/judge-model"):
    return ("LLM_JUDGE", model, value)


def person(source_id: str, value):
    return ("HUMAN", source_id, value)


def plant(*feedback, name: str = NAME) -> str:
    """One trace (one summarized row) with ``feedback`` logged on it in this order."""
    with mlflow.start_span(name="summarize") as span:
        span.set_inputs({"text": "The council approved the budget."})
        span.set_outputs("The council approved it.")
    mlflow.flush_trace_async_logging()
    for source_type, source_id, value in feedback:
        given = {"error": AssessmentError(error_code="JUDGE_FAILED", error_message="timed out")} if value is ERROR else {"value": value}
        mlflow.log_feedback(trace_id=span.trace_id, name=name, source=AssessmentSource(source_type=source_type, source_id=source_id), **given)
        time.sleep(0.002)  # each feedback in its own millisecond: "latest" is unambiguous
    return span.trace_id


def outcome_of(report, trace_id: str) -> str:
    return report.traces.set_index("trace_id").loc[trace_id, "outcome"]


@pytest.fixture(autouse=True)
def traces_written_as_they_end(monkeypatch):
    """The planted traces are written when their span ends, not by MLflow's background queue: flushing that queue
    (``plant`` must, before it logs feedback) waits out the queue's 1-second poll, 14 times per store."""
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")


@pytest.fixture
def planted(mlflow_store):
    """14 traces: 7 pairs (people no/yes x judge no/yes = [[2, 1], [1, 3]]), in every value form, and one trace
    for each other count."""
    # people yes, judge yes: 3
    plant(judge("yes"), person("alice", "yes"))
    plant(judge(True), person("alice", True))
    plant(judge(1), person("alice", 1), person("bob", 1), person("carol", 0))  # majority yes
    # people yes, judge no: 1
    plant(judge("no"), person("alice", "Yes"))
    # people no, judge no: 2
    plant(judge("No "), person("alice", "no"))
    plant(judge(False), judge(ERROR), person("alice", 0.0))  # a later error does not erase the verdict
    # people no, judge yes: 1
    plant(judge("yes"), person("alice", False))
    plant(judge("yes"))  # judge only
    plant(person("alice", "no"))  # human only
    plant(judge(ERROR), person("alice", "yes"))  # judge error
    plant(judge("unknown"), person("alice", "yes"))  # unusable: the judge's value
    plant(judge("yes"), person("alice", 0.5))  # unusable: the only person's value
    plant(judge("yes"), person("alice", "yes"), person("bob", "no"))  # tie
    plant(judge("yes"), name="key_point_coverage")  # another name: unlabelled under claim_alignment
    return mlflow_store


def test_normalise_verdict_reads_yes_no_booleans_and_ones_and_zeros_and_nothing_else():
    assert [normalise_verdict(v) for v in ("yes", " NO ", "true", "False", "1", "0", True, False, 1, 0, 1.0, 0.0)] == [True, False] * 6
    assert [normalise_verdict(v) for v in ("unknown", "y", "", 0.5, 2, None, ["yes"], {"value": "yes"})] == [None] * 8


def test_agreement_figures_match_the_hand_computed_confusion_matrix(planted):
    report = judge_agreement("mgm-tests", log=False)
    assert report.confusion.to_numpy().tolist() == [[2, 1], [1, 3]]
    m = report.metrics
    assert m["balanced_accuracy"] == pytest.approx((3 / 4 + 2 / 3) / 2)  # recall of people's yes and of their no
    assert m["cohen_kappa"] == pytest.approx((5 / 7 - 25 / 49) / (1 - 25 / 49))  # observed 5/7, chance 25/49
    assert m["balanced_accuracy_n"] == m["cohen_kappa_n"] == 7
    for name in ("balanced_accuracy", "cohen_kappa"):
        assert m[f"{name}_ci_low"] < m[name] < m[f"{name}_ci_high"] <= 1


def test_each_trace_lands_in_exactly_one_count(planted):
    counts = judge_agreement("mgm-tests", log=False).counts
    assert counts == {"traces_seen": 14, "pairs_used": 7, "judge_only": 1, "human_only": 1, "judge_error": 1, "application_error": 0,
                      "unusable_values": 2, "human_ties": 1, "unlabelled": 1, "people": 3, "votes_not_verdicts": 1,
                      "other_sources": 0, "judges": 1}


def test_each_person_counts_once_with_their_latest_verdict(mlflow_store):
    changed_mind = plant(judge("yes"), person("alice", "yes"), person("bob", "yes"), person("alice", "no"))
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, changed_mind) == "human_ties"  # alice now says no, bob yes: two votes, not three


def test_a_judge_verdict_a_person_overrode_is_still_the_judges_and_the_override_is_that_persons_vote(mlflow_store):
    """MLflow's way to correct a judge (``override_feedback``) marks the judge's feedback not valid: it was left out,
    and with it exactly the disagreements (the trace counted ``human_only``, agreement read higher than it is)."""
    trace_id = plant(judge("yes"))
    verdict = mlflow.get_trace(trace_id).info.assessments[0]
    mlflow.override_feedback(trace_id=trace_id, assessment_id=verdict.assessment_id, value="no",
                             source=AssessmentSource(source_type="HUMAN", source_id="alice"))
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, trace_id) == "pairs_used"
    assert report.confusion.to_numpy().tolist() == [[0, 1], [0, 0]]  # people no, the judge yes


def test_a_persons_verdict_another_person_overrode_is_no_longer_a_vote(mlflow_store):
    trace_id = plant(judge("yes"), person("alice", "yes"))
    alices = next(a for a in mlflow.get_trace(trace_id).info.assessments if a.source.source_id == "alice")
    mlflow.override_feedback(trace_id=trace_id, assessment_id=alices.assessment_id, value="no",
                             source=AssessmentSource(source_type="HUMAN", source_id="bob"))
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, trace_id) == "pairs_used"  # bob's no alone, not alice's yes beside it (a tie)
    assert report.confusion.to_numpy().tolist() == [[0, 1], [0, 0]]


def test_a_run_filter_reads_only_that_runs_traces(mlflow_store):
    with mlflow.start_run() as agreeing:
        plant(judge("yes"), person("alice", "yes"))
        plant(judge("no"), person("alice", "no"))
    with mlflow.start_run():
        plant(judge("yes"), person("alice", "no"))
    report = judge_agreement(run_id=agreeing.info.run_id, log=False)
    assert report.counts["traces_seen"] == 2 and report.confusion.to_numpy().tolist() == [[1, 0], [0, 1]]
    assert report.source_run_id == agreeing.info.run_id


def test_one_judge_is_read_when_several_judged(mlflow_store):
    trace_id = plant(judge("yes", model="openai:/big"), judge("no", model="openai:/small"), person("alice", "yes"))
    report = judge_agreement("mgm-tests", judge_source_id="openai:/big", log=False)
    assert report.traces.set_index("trace_id").loc[trace_id, "judge"] == True  # noqa: E712 (the small judge came later)


def test_the_report_is_logged_as_a_run_with_metrics_tables_and_tags(planted):
    report = judge_agreement("mgm-tests")
    run = MlflowClient().get_run(report.run_id)
    assert run.info.status == "FINISHED" and run.info.experiment_id != report.experiment_id  # not among the candidates
    assert MlflowClient().get_experiment(run.info.experiment_id).name == "mgm-tests/agreement"  # beside them
    metrics = run.data.metrics
    assert metrics["balanced_accuracy"] == pytest.approx(17 / 24) and metrics["cohen_kappa_n"] == 7
    assert {"cohen_kappa_ci_low", "cohen_kappa_ci_high", "balanced_accuracy_ci_low"} <= set(metrics)
    assert (metrics["pairs_used"], metrics["judge_error"], metrics["unusable_values"], metrics["traces_seen"]) == (7, 1, 2, 14)
    tags = run.data.tags
    assert tags["mgm.agreement.feedback_name"] == NAME and tags["mgm.agreement.source_experiment"] == report.experiment_id
    confusion = _table(report.run_id, CONFUSION_TABLE)
    assert confusion.set_index("people").loc["people: yes", "judge: yes"] == 3
    assert len(_table(report.run_id, TRACES_TABLE)) == 14


def _table(run_id: str, artifact_file: str) -> pd.DataFrame:
    """A table ``mlflow.log_table`` wrote (its ``split`` JSON), read from any experiment."""
    table = mlflow.artifacts.load_dict(f"runs:/{run_id}/{artifact_file}")
    return pd.DataFrame(table["data"], columns=table["columns"])


def test_log_false_logs_no_run(planted):
    judge_agreement("mgm-tests", log=False)
    assert MlflowClient().search_runs([mlflow.get_experiment_by_name("mgm-tests").experiment_id]) == []


def test_an_unknown_experiment_or_run_is_bad_input(mlflow_store):
    with pytest.raises(ValueError, match="no experiment 'nope'"):
        judge_agreement("nope", log=False)
    with pytest.raises(ValueError, match="no run 'f00d'"):
        judge_agreement(run_id="f00d", log=False)


def test_mgm_agreement_prints_the_figures_and_logs_a_run(planted, capsys):
    assert mgm(["agreement", "--experiment", "mgm-tests"]) == 0
    out = capsys.readouterr().out
    assert "balanced_accuracy        0.708  [" in out and "pairs_used               7" in out and "logged as run" in out


def test_mgm_agreement_without_any_pair_exits_2_with_one_line_and_logs_nothing(mlflow_store, capsys):
    plant(judge("yes"))
    assert mgm(["agreement", "--experiment", "mgm-tests"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trace of experiment mgm-tests has both" in err and "judge_only 1" in err
    assert MlflowClient().search_runs([mlflow.get_experiment_by_name("mgm-tests").experiment_id]) == []


@pytest.mark.parametrize("source", [["--experiment", "nope"], ["--run-id", "f00d"]])
def test_mgm_agreement_with_an_unknown_experiment_or_run_exits_2(mlflow_store, capsys, source):
    assert mgm(["agreement", *source, "--no-log"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mgm agreement: no ")
