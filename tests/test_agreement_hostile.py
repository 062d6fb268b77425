"""A hostile look at the judge's agreement with people (``judge_agreement``, ``mgm agreement``, ``align_judge``,
``meta_evaluation.binary_agreement``): every figure checked against scikit-learn and scipy, and each way feedback can
be left out (an application that failed, a label from a source that is not a person, a value that is not yes/no,
the verdicts of several judges) counted and said, never a silent change of the figures."""

from __future__ import annotations

import math
import time

import mlflow
import numpy as np
import pytest
from helpers import judge_for
from mlflow.entities import AssessmentError, AssessmentSource
from scipy.stats import binomtest
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.meta_evaluation import binary_agreement_metrics
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import align_judge, judge_agreement
from mlflow_genai_metrics.tracking.feedback import APPLICATION_ERROR

NAME = "claim_alignment"
ARTICLE = "The council approved the budget on Monday."


@pytest.fixture(autouse=True)
def traces_written_as_they_end(monkeypatch):
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")


def judge(value, model: str = "openai:/judge-model"):
    return ("LLM_JUDGE", model, value)


def person(source_id: str, value):
    return ("HUMAN", source_id, value)


def application_failed(model: str = "openai:/judge-model"):
    return ("APPLICATION", model, None)


def plant(*feedback, summary: str | None = "The council approved it.", article: str = ARTICLE) -> str:
    """One trace with ``feedback`` logged in this order; ``summary=None``: the application raised (no output)."""
    if summary is None:
        with pytest.raises(RuntimeError), mlflow.start_span(name="summarize") as span:
            span.set_inputs({"text": article})
            raise RuntimeError("the summarizer's endpoint is down")
    else:
        with mlflow.start_span(name="summarize") as span:
            span.set_inputs({"text": article})
            span.set_outputs(summary)
    for kind, source_id, value in feedback:
        if kind in ("APPLICATION", "JUDGE_ERROR"):  # the cards the scorers log where the row's application raised, or the judge failed
            code, message = (APPLICATION_ERROR, "RuntimeError: endpoint down") if kind == "APPLICATION" else ("JUDGE_ERROR", "timed out")
            mlflow.log_feedback(trace_id=span.trace_id, name=NAME, source=AssessmentSource(source_type="LLM_JUDGE", source_id=source_id),
                                error=AssessmentError(error_code=code, error_message=message))
        elif kind == "DEFAULT":  # mlflow.log_feedback without source=: MLflow makes it a CODE source
            mlflow.log_feedback(trace_id=span.trace_id, name=NAME, value=value)
        else:
            mlflow.log_feedback(trace_id=span.trace_id, name=NAME, value=value, source=AssessmentSource(source_type=kind, source_id=source_id))
        time.sleep(0.002)  # each in its own millisecond: "latest" is unambiguous
    return span.trace_id


def outcome_of(report, trace_id: str) -> str:
    return report.traces.set_index("trace_id").loc[trace_id, "outcome"]


# --- exactness: every agreement figure against independent code ------------------------------------------------


def _independent(matrix: np.ndarray) -> dict[str, float]:
    """Balanced accuracy and kappa by scikit-learn (undefined: NaN), balanced accuracy's interval from scipy."""
    (tn, fp), (fn, tp) = matrix
    people = np.repeat([0, 0, 1, 1], [tn, fp, fn, tp])
    judged = np.repeat([0, 1, 0, 1], [tn, fp, fn, tp])
    both_people = len(set(people)) == 2
    found = {"balanced_accuracy": balanced_accuracy_score(people, judged) if both_people else math.nan,
             "cohen_kappa": cohen_kappa_score(people, judged) if both_people and len(set(judged)) == 2 else math.nan,
             "balanced_accuracy_n": people.size, "cohen_kappa_n": people.size}
    low = high = math.nan
    if both_people:
        yes, no = (binomtest(int(x), int(n)).proportion_ci(confidence_level=0.975, method="exact") for x, n in ((tp, tp + fn), (tn, tn + fp)))
        low, high = (yes.low + no.low) / 2, (yes.high + no.high) / 2
    return {**found, "balanced_accuracy_ci_low": low, "balanced_accuracy_ci_high": high}


def test_every_agreement_figure_matches_scikit_learn_and_scipy_on_seeded_label_sets_tiny_and_one_class():
    rng = np.random.default_rng(14)
    matrices = [np.array(m) for m in ([[1, 0], [0, 0]], [[0, 0], [0, 1]], [[0, 1], [0, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]],
                                      [[0, 0], [3, 2]], [[2, 2], [0, 0]], [[0, 2], [0, 3]], [[1, 1], [1, 1]])]
    matrices += [rng.multinomial(int(rng.integers(2, 60)), rng.dirichlet(np.ones(4))).reshape(2, 2) for _ in range(60)]
    for matrix in matrices:
        got, expected = binary_agreement_metrics(matrix), _independent(matrix)
        for name, value in expected.items():
            assert (math.isnan(value) and math.isnan(got[name])) or got[name] == pytest.approx(value, abs=1e-12), (matrix.tolist(), name)
        if math.isnan(got["cohen_kappa"]):  # an undefined figure has no interval either
            assert math.isnan(got["cohen_kappa_ci_low"]) and math.isnan(got["cohen_kappa_ci_high"])
        elif not math.isnan(got["cohen_kappa_ci_low"]):
            assert got["cohen_kappa_ci_low"] <= got["cohen_kappa"] <= got["cohen_kappa_ci_high"]
            assert got["cohen_kappa_ci_low"] < got["cohen_kappa_ci_high"]  # never zero width


# --- the application failed: not the judge's error ------------------------------------------------------------


def test_a_labelled_trace_whose_application_failed_is_an_application_error_not_a_judge_error(mlflow_store):
    """It counted as ``judge_error``: a run whose summarizer crashed on some rows read as a judge that failed there."""
    agreed = plant(judge("yes"), person("alice", "yes"))
    crashed = plant(application_failed(), person("alice", "no"), summary=None)
    timed_out = plant(("JUDGE_ERROR", "openai:/judge-model", None), person("alice", "yes"))
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, agreed) == "pairs_used" and outcome_of(report, crashed) == "application_error"
    assert outcome_of(report, timed_out) == "judge_error"  # the judge's own failure stays the judge's
    counts = report.counts
    assert (counts["pairs_used"], counts["application_error"], counts["judge_error"], counts["traces_seen"]) == (1, 1, 1, 3)
    assert any("1 labelled traces whose application failed" in note and "not the judge's errors" in note for note in report.notes)
    assert sum(counts[o] for o in ("pairs_used", "judge_only", "human_only", "judge_error", "application_error", "unusable_values",
                                   "human_ties", "unlabelled")) == counts["traces_seen"]


def test_mgm_agreement_says_the_application_failed_and_logs_the_count(mlflow_store, capsys):
    plant(judge("yes"), person("alice", "yes"))
    plant(judge("no"), person("alice", "no"))
    plant(application_failed(), person("alice", "no"), summary=None)
    assert mgm(["agreement", "--experiment", "mgm-tests"]) == 0
    out = capsys.readouterr().out
    assert "application_error        1" in out and "judge_error              0" in out
    assert "NOTE: 1 labelled traces whose application failed (APPLICATION_ERROR cards: nothing was judged)" in out
    run = mlflow.search_runs(experiment_names=["mgm-tests/agreement"], output_format="list")[0]
    assert run.data.metrics["application_error"] == 1 and run.data.metrics["judge_error"] == 0
    assert "application failed" in run.data.tags["mgm.agreement.notes"]


# --- labels that are not used are counted and said ------------------------------------------------------------


def test_a_label_logged_without_a_human_source_is_counted_and_said_not_read_as_no_label(mlflow_store):
    """``mlflow.log_feedback`` without ``source=`` makes a CODE source: the label was dropped and the trace counted
    ``judge_only`` ("no person labelled it"), with no word of it."""
    plant(judge("yes"), person("alice", "yes"))
    coded = plant(judge("yes"), ("DEFAULT", None, "no"))
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, coded) == "judge_only" and report.counts["other_sources"] == 1
    assert any("1 traces carry feedback under 'claim_alignment' from neither a judge nor a person (CODE:default)" in note
               and "source_type='HUMAN'" in note for note in report.notes)


def test_a_persons_value_that_is_not_yes_or_no_is_counted_beside_the_pair_it_left(mlflow_store):
    """alice's "partly" was dropped and bob's yes decided the pair, with no count anywhere of alice's label."""
    pair = plant(judge("no"), person("alice", "partly"), person("bob", "yes"))
    plant(judge("yes"), person("carol", "Yes "), person("dave", 1), person("erin", True))  # verdicts in any form
    report = judge_agreement("mgm-tests", log=False)
    assert outcome_of(report, pair) == "pairs_used" and report.confusion.to_numpy().tolist() == [[0, 0], [1, 1]]
    assert report.counts["votes_not_verdicts"] == 1
    assert any("1 of people's values under 'claim_alignment' are not yes/no" in note for note in report.notes)


def test_the_verdicts_of_several_judges_are_said_to_be_mixed_and_one_can_be_named(mlflow_store, capsys):
    """Two judge models' verdicts were paired together into one balanced accuracy, which describes neither."""
    plant(judge("yes", "openai:/big"), person("alice", "yes"))
    plant(judge("no", "openai:/big"), person("alice", "no"))
    plant(judge("yes", "openai:/small"), person("alice", "no"))
    mixed = judge_agreement("mgm-tests", log=False)
    assert mixed.counts["judges"] == 2 and mixed.counts["pairs_used"] == 3
    assert any("mix the verdicts of 2 judges (openai:/big, openai:/small)" in note for note in mixed.notes)
    assert mgm(["agreement", "--experiment", "mgm-tests", "--judge-source", "openai:/big", "--no-log"]) == 0
    out = capsys.readouterr().out
    assert "pairs_used               2" in out and "judges                   1" in out and "NOTE" not in out
    assert "balanced_accuracy        1.000" in out


def test_a_report_with_nothing_left_out_has_no_notes(mlflow_store):
    plant(judge("yes"), person("alice", "yes"))
    plant(judge("no"), person("alice", "no"), person("bob", "no"))
    report = judge_agreement("mgm-tests", log=False)
    assert report.notes == () and (report.counts["votes_not_verdicts"], report.counts["other_sources"], report.counts["judges"]) == (0, 0, 1)


# --- align: labelled traces it cannot use are counted -----------------------------------------------------------


def test_align_counts_the_labelled_traces_whose_application_failed(mlflow_store, scripted_server, tmp_path):
    """They were dropped with no count: 4 labelled traces read as 3, and a refusal said "label more traces"."""
    for i in range(3):
        plant(person("alice", "yes"), summary=f"Council {i} approved it.", article=f"Council {i} approved the budget on Monday.")
    plant(application_failed(), person("alice", "no"), summary=None)
    server = scripted_server(SummarizationJudgeScript())
    report = align_judge("mgm-tests", judge=judge_for(server), output=tmp_path / "examples.json", log=False)
    assert report.counts["labelled_traces"] == 3 and report.counts["labelled_without_texts"] == 1
    assert report.counts["examples"] + report.counts["held_out"] == 3


def test_align_refusing_too_few_labels_names_those_without_texts(mlflow_store, scripted_server, tmp_path):
    plant(person("alice", "yes"))
    plant(application_failed(), person("alice", "no"), summary=None)
    server = scripted_server(SummarizationJudgeScript())
    with pytest.raises(ValueError, match=r"1 traces carry a decided .* \(1 labelled traces have no source and summary: the application failed"):
        align_judge("mgm-tests", judge=judge_for(server), output=tmp_path / "examples.json", log=False)
    assert not server.requests


# --- mgm people: a label from a source that is not a person -------------------------------------------------------


def test_people_estimate_counts_a_drawn_row_labelled_by_code_apart_from_those_not_labelled(mlflow_store, scripted_server):
    """A drawn row labelled with ``mlflow.log_feedback`` and no ``source=`` (a CODE source) read "not labelled yet"."""
    from mlflow_genai_metrics.tracking import ClaimAlignment, evaluate_summaries, label_sample, people_estimate

    server = scripted_server(SummarizationJudgeScript())
    data = [{"inputs": {"text": f"Article {k}. The club {k} won on Saturday.", "id": f"r{k}"}, "outputs": f"The club {k} won."} for k in range(6)]
    with mlflow.start_run() as run:
        evaluate_summaries(data, [ClaimAlignment(judge_for(server))])
    sample = label_sample(run.info.run_id, 4, seed=1)
    first, second, coded, _ = sample.trace_ids
    for trace_id in (first, second):
        mlflow.log_feedback(trace_id=trace_id, name=NAME, value="yes", source=AssessmentSource(source_type="HUMAN", source_id="ann"))
    mlflow.log_feedback(trace_id=coded, name=NAME, value="no")  # no source=: MLflow makes it CODE
    report = people_estimate(run.info.run_id, log=False)
    assert (report.estimate.labelled, report.other_sources, report.unlabelled) == (2, 1, 1)
    assert "1 drawn row labelled by a source that is not a person" in report.sentence and "1 drawn row not labelled yet" in report.sentence
