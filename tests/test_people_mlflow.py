"""People's labels on a random sample of a run's rows (issue 48, 1-2), end to end in MLflow: ``label_sample`` draws
seeded rows once per run, tags them, records the draw and puts them in a review queue asking the card's question;
``people_estimate`` reads people's HUMAN feedback on the drawn traces only (labels elsewhere counted apart), logs
``people/strict_alignment`` with its interval, and a gate rule on it registers, or refuses saying "too few labels"."""

from __future__ import annotations

import json
import math

import mlflow
import pytest
from helpers import judge_for
from mlflow.entities import AssessmentSource, AssessmentSourceType
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.people import ppi_proportion, recalibrated_grounding
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import (
    ClaimAlignment,
    Grounding,
    SummarizerModel,
    compare_runs,
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
    # the run's people report (mgm/people.json): the lines printed, the figures logged, what was counted apart
    people_report = json.loads(open(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="mgm/people.json")).read())
    assert people_report["lines"] == report.lines and people_report["card"] == "claim_alignment"
    assert people_report["metrics"] == pytest.approx(report.metrics()) and people_report["metrics"]["people/strict_alignment_labelled"] == 12
    assert (people_report["labelled"], people_report["rows"], people_report["outside_sample"], people_report["unlabelled"]) == (12, ROWS, 1, 0)
    passed = register_if_passing(uri, "people-gated", run_id=run_id, rules={"people/strict_alignment_ci_low": f">= {expected.ci_low - 0.01:.3f}"})
    assert passed.passed and passed.registered_version is not None
    # the run's description: the latest estimate (the one-label estimate replaced), then the latest gate decision
    note = MlflowClient().get_run(run_id).data.tags["mlflow.note.content"]
    estimate, gate = note.split("<!-- mlflow_genai_metrics gate decision -->\n")
    assert estimate.startswith("<!-- mlflow_genai_metrics people's estimate -->\n**People's strict_alignment: ")
    assert report.sentence[1:] in estimate and "too few labels" not in estimate and note.count("people's estimate -->") == 1
    assert gate.startswith("**Registry gate (people-gated): passed, registered version")


def test_people_who_correct_the_judge_by_overriding_its_card_count_with_the_judge_s_own_verdict(scripted_server, mlflow_store):
    """MLflow's way to correct a judge is ``override_feedback``, which marks the judge's card not valid: such rows were
    counted as rows the judge failed on and left out, and with them exactly people's disagreements (the estimate
    read the judge's own rate, 1, where people said no on half the sample)."""
    server = scripted_server(SummarizationJudgeScript())
    run_id, _ = evaluated_run(server)
    sample = label_sample(run_id, 12, seed=5)
    traces = traces_of(run_id)
    people = {}
    for position, trace_id in enumerate(sample.trace_ids):
        card = next(a for a in traces[trace_id].info.assessments if a.name == "claim_alignment" and a.source.source_type == "LLM_JUDGE")
        if position % 2 and judge_said(traces[trace_id]):  # people say no where the judge said yes: they override its card
            mlflow.override_feedback(trace_id=trace_id, assessment_id=card.assessment_id, value="no", source=PERSON)
            people[trace_id] = False
        else:
            mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value=card.value, source=PERSON)
            people[trace_id] = judge_said(traces[trace_id])
    assert False in people.values()
    report = people_estimate(run_id, log=False)
    assert report.judge_failed == 0 and report.estimate.labelled == 12 and report.estimate.n == ROWS
    judge_all = [judge_said(t) for t in traces.values()]
    assert report.estimate == ppi_proportion(judge_all, [judge_said(traces[t]) for t in people], list(people.values()))
    assert report.estimate.estimate < report.estimate.judge_rate


def test_a_card_the_run_s_traces_do_not_carry_is_refused_before_the_run_s_one_sample_is_drawn(scripted_server, mlflow_store):
    """``card="answer_faithfulness"`` on a summaries run once drew and recorded the run's one sample for a card no
    judge gave: "4 drawn rows the judge failed on", and no later draw allowed."""
    server = scripted_server(SummarizationJudgeScript())
    run_id, _ = evaluated_run(server)
    with pytest.raises(ValueError, match=r"card 'answer_faithfulness': the run's traces carry \['claim_alignment'\], not it"):
        label_sample(run_id, 4, seed=1, card="answer_faithfulness")
    assert SAMPLE_TAG + ".seed" not in MlflowClient().get_run(run_id).data.tags
    assert label_sample(run_id, 4, seed=1, card="claim_alignment").card == "claim_alignment"


def test_an_estimate_with_too_few_labels_supersedes_an_earlier_one_so_no_gate_passes_on_it(scripted_server, mlflow_store):
    """Three labels gave figures; a second person then disagreed on two of them (ties decide nothing), leaving one:
    the estimate said "too few labels: 1" but logged only its counts, so the three-label interval stayed the run's
    latest figure and a gate on it passed, registering on one label. Now the figures it cannot give are logged NaN."""
    server = scripted_server(SummarizationJudgeScript())
    run_id, uri = evaluated_run(server, model=True)
    drawn = label_sample(run_id, 6, seed=3).trace_ids[:3]
    other = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="bob@example.com")
    for trace_id in drawn:
        mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="yes", source=PERSON)
    assert people_estimate(run_id).estimate.labelled == 3
    low = MlflowClient().get_run(run_id).data.metrics["people/strict_alignment_ci_low"]
    assert register_if_passing(uri, "people-gated", run_id=run_id, rules={"people/strict_alignment_ci_low": f">= {low:.3f}"}).passed
    for trace_id in drawn[:2]:
        mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="no", source=other)

    report = people_estimate(run_id)

    assert report.estimate.too_few and report.estimate.labelled == 1
    logged = MlflowClient().get_run(run_id).data.metrics
    assert math.isnan(logged["people/strict_alignment"]) and math.isnan(logged["people/strict_alignment_ci_low"])
    assert logged["people/strict_alignment_labelled"] == 1
    refused = register_if_passing(uri, "people-gated", run_id=run_id, rules={"people/strict_alignment_ci_low": f">= {low:.3f}"})
    assert not refused.passed and "too few labels: 1" in str(refused.outcomes[0])


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


def label(run_id: str, trace_ids, verdict) -> dict[str, bool]:
    """People's verdict (``verdict(trace, position)``) logged as HUMAN feedback on each of these traces."""
    traces = traces_of(run_id)
    people = {t: bool(verdict(traces[t], k)) for k, t in enumerate(trace_ids)}
    for trace_id, said in people.items():
        mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="yes" if said else "no", source=PERSON)
    return people


def grounding_scores(run_id: str) -> dict[str, float]:
    return {t: float(next(a.value for a in trace.info.assessments if a.name == "grounding")) for t, trace in traces_of(run_id).items()}


def test_grounding_is_recalibrated_on_the_sample_s_labels_and_says_too_few_below_its_count(scripted_server, mlflow_store, capsys):
    """Issue 48, 3: with labels on the sample, the run's grounding score re-calibrated on them (cross-validated), logged
    as people/grounding, people/grounded_rate and the calibration error before and after, the calibration named."""
    server = scripted_server(SummarizationJudgeScript())
    with mlflow.start_run() as run:
        evaluate_summaries(rows(), [ClaimAlignment(judge_for(server)), Grounding()])
    run_id = run.info.run_id
    sample = label_sample(run_id, 14, seed=5)
    label(run_id, sample.trace_ids[:3], lambda trace, k: judge_said(trace))
    report = people_estimate(run_id)
    assert report.grounding is not None and report.grounding.too_few and report.grounding.labelled == 3
    logged = MlflowClient().get_run(run_id).data
    assert "people/grounding" not in logged.metrics and "people/grounding_ece_before" not in logged.metrics
    assert logged.metrics["people/grounding_labelled"] == 3
    assert logged.tags["mgm.people.grounding"].startswith("grounding re-calibrated on people's labels: too few labels to re-calibrate grounding: 3")
    assert logged.tags["mgm.grounding.recalibrated_on"] == "shipped (the training mix)"
    # people call consistent the rows the judge says yes to, but for every third of them
    people = label(run_id, sample.trace_ids, lambda trace, k: judge_said(trace) and k % 3 != 0)
    report = people_estimate(run_id)
    scores = grounding_scores(run_id)
    expected = recalibrated_grounding(list(scores.values()), [scores[t] for t in people], list(people.values()))
    found = report.grounding
    assert found.labelled == 14 and found.too_few is None
    assert (found.mean, found.grounded_rate, found.ece_before, found.ece_after) == pytest.approx(
        (expected.mean, expected.grounded_rate, expected.ece_before, expected.ece_after))
    logged = MlflowClient().get_run(run_id).data
    assert logged.metrics["people/grounding"] == pytest.approx(expected.mean)
    assert logged.metrics["people/grounded_rate"] == pytest.approx(expected.grounded_rate)
    assert logged.metrics["people/grounding_ece_before"] == pytest.approx(expected.ece_before)
    assert logged.metrics["people/grounding_ece_after"] == pytest.approx(expected.ece_after)
    assert logged.metrics["people/grounding_labelled"] == 14
    assert logged.tags["mgm.grounding.recalibrated_on"] == expected.calibration and expected.calibration.startswith("re-calibrated on 14")
    assert logged.tags["mgm.grounding.calibrated_on"]  # the shipped calibration stays named beside it
    line = logged.tags["mgm.people.grounding"]
    assert f"mean {expected.mean:.3g}, grounded {expected.grounded_rate:.3g}" in line and expected.calibration in line
    capsys.readouterr()
    assert mgm(["people", "--run-id", run_id, "--no-log"]) == 0
    assert capsys.readouterr().out.splitlines() == report.lines and len(report.lines) == 2
    # a run without grounding scores says nothing of grounding
    plain, _ = evaluated_run(server)
    label_sample(plain, 4, seed=1)
    assert people_estimate(plain, log=False).grounding is None and len(people_estimate(plain, log=False).lines) == 1


def test_two_runs_people_estimates_are_compared_and_printed_where_results_are(scripted_server, mlflow_store, capsys):
    """Issue 48, 2: the difference of two runs' people's estimates with its interval (compare_runs, mgm compare, the
    comparison run's tags), and the estimate printed by mgm agreement and by mgm evaluate's report of a run."""
    from types import SimpleNamespace

    from mlflow_genai_metrics.cli.run_output import report_evaluation
    from mlflow_genai_metrics.people import DIFFERENCE_ASSUMES, estimate_difference
    from mlflow_genai_metrics.tracking.labels import people_difference

    server = scripted_server(SummarizationJudgeScript())
    first, _ = evaluated_run(server)
    second, _ = evaluated_run(server)
    for run_id, strict in ((first, True), (second, False)):
        sample = label_sample(run_id, 12, seed=2)
        label(run_id, sample.trace_ids, lambda trace, k, strict=strict: judge_said(trace) and (not strict or k % 2 == 0))
    assert not [c for c in compare_runs([first, second])["metric"] if c.startswith("people/")]  # no estimate yet: no row
    reports = [people_estimate(run_id) for run_id in (first, second)]
    expected = estimate_difference(*(r.estimate for r in reports))
    found = people_difference(first, second)
    assert (found.difference, found.ci_low, found.ci_high) == pytest.approx((expected.difference, expected.ci_low, expected.ci_high))
    assert expected.ci_low < expected.difference < expected.ci_high and expected.difference > 0
    table = compare_runs([first, second], log=True)
    people = table[table["metric"] == "people/strict_alignment"].set_index("run_id")
    assert list(people.index) == [first, second] and people.loc[second, "n"] == 12
    assert people.loc[second, "difference_vs_first"] == pytest.approx(expected.difference)
    assert people.loc[second, "difference_ci_low"] == pytest.approx(expected.ci_low)
    assert people.loc[second, "metric_note"] == f"the difference assumes {DIFFERENCE_ASSUMES}"
    tags = MlflowClient().get_run(table.attrs["comparison_run_id"]).data.tags
    assert tags["mgm.people_difference.1"].endswith(f"minus the first, people/strict_alignment: {expected.difference:+.3g} "
                                                    f"[{expected.ci_low:+.3g}, {expected.ci_high:+.3g}] (the difference assumes {DIFFERENCE_ASSUMES})")
    capsys.readouterr()
    assert mgm(["compare", first, second]) == 0
    out = capsys.readouterr().out
    assert "people/strict_alignment" in out and "independent random samples" in out
    assert mgm(["agreement", "--run-id", second, "--no-log"]) == 0
    assert reports[1].sentence in capsys.readouterr().out.splitlines()
    experiment = MlflowClient().get_run(second).info.experiment_id
    assert mgm(["agreement", "--experiment", experiment, "--no-log"]) == 0  # every run of it with a sample, each named
    printed = capsys.readouterr().out.splitlines()
    assert f"run {first}: {reports[0].sentence}" in printed and f"run {second}: {reports[1].sentence}" in printed
    evaluation = SimpleNamespace(metrics={"strict_alignment": 0.5}, warnings=[])
    assert report_evaluation(MlflowClient().get_run(second), SimpleNamespace(name="mgm-tests"), evaluation, "24 rows") == 0
    assert reports[1].sentence in capsys.readouterr().out.splitlines()
    # a run whose sample has one label: the difference says "too few labels", no interval
    third, _ = evaluated_run(server)
    label(third, label_sample(third, 6, seed=2).trace_ids[:1], lambda trace, k: True)
    assert people_estimate(third).estimate.too_few
    assert people_difference(first, third).too_few.startswith("too few labels: 1")
    table = compare_runs([first, third])
    [row] = table[(table["metric"] == "people/strict_alignment") & (table["run_id"] == third)].to_dict("records")
    assert row["metric_note"].startswith("too few labels: 1") and row["difference_ci_low"] != row["difference_ci_low"]  # NaN


def test_our_sections_of_a_run_s_description_keep_the_person_s_text_and_fit_what_mlflow_stores(mlflow_store):
    """The description holds the person's text, then each of our sections (replaced by its latest); a section that
    would take it past MLflow's longest tag value is cut short, its mark whole, so the next section still finds it."""
    from mlflow_genai_metrics.tracking.run_logging import NOTE_LIMIT, NOTE_TAG, set_note_section

    client = MlflowClient()
    with mlflow.start_run() as run:
        mlflow.set_tag(NOTE_TAG, "Our own notes.")
    run_id = run.info.run_id
    set_note_section(client, run_id, "people's estimate", "x" * 20_000)
    set_note_section(client, run_id, "gate decision", "**passed**")
    set_note_section(client, run_id, "people's estimate", "y" * 20_000)
    note = client.get_run(run_id).data.tags[NOTE_TAG]
    assert len(note) == NOTE_LIMIT and note.startswith("Our own notes.\n\n<!-- mlflow_genai_metrics people's estimate -->\nyyy")
    assert note.endswith("y...\n\n<!-- mlflow_genai_metrics gate decision -->\n**passed**") and "x" not in note



def test_a_tag_too_long_for_mlflow_is_cut_short_and_says_so(mlflow_store):
    """Every tag of ours goes through ``tag_value``: a run's error (here, naming 2,000 lost rows) is stored whole up to
    MLflow's longest tag value and cut there with "...", never refused by MLflow (which would lose the run's reason)."""
    from mlflow_genai_metrics.tracking.rows import ERROR_TAG, fail
    from mlflow_genai_metrics.tracking.run_logging import NOTE_LIMIT

    with mlflow.start_run() as run:
        pass
    why = "MLflow did not store rows " + ", ".join(f"row-{k}" for k in range(2000))
    assert len(why) > NOTE_LIMIT
    fail(run.info.run_id, why)
    stored = MlflowClient().get_run(run.info.run_id).data.tags[ERROR_TAG]
    assert len(stored) == NOTE_LIMIT and stored.endswith("...") and stored[:-3] in f"no results logged for run {run.info.run_id}: {why}"
    short = "MLflow did not store row-7"
    fail(run.info.run_id, short)
    assert MlflowClient().get_run(run.info.run_id).data.tags[ERROR_TAG].endswith(short)


def test_a_run_holding_the_same_rows_twice_is_refused_a_sample_naming_them(scripted_server, mlflow_store):
    """Plain ``mlflow.genai.evaluate`` twice into one run: every row has two traces. A draw over them could take a row
    twice and the judge's rate would count each twice, so the sample is refused, naming the repeated rows."""
    server = scripted_server(SummarizationJudgeScript())
    with mlflow.start_run() as run:
        for _ in range(2):
            mlflow.genai.evaluate(data=rows()[:5], scorers=[ClaimAlignment(judge_for(server))])
    with pytest.raises(ValueError, match=r"repeat row ids \('r0', 'r1', 'r2', 'r3', 'r4': 5 in all\)"):
        label_sample(run.info.run_id, 3, seed=0)
    assert f"{SAMPLE_TAG}.seed" not in MlflowClient().get_run(run.info.run_id).data.tags  # refused before anything is written


def test_drawn_rows_whose_labels_decide_nothing_are_counted_apart_from_unlabelled_ones(scripted_server, mlflow_store):
    """People tied on a row, or answered something that is not yes/no: the row is not used, and the sentence says so
    apart from the rows nobody labelled yet (those only wait for people; these need a person to decide)."""
    server = scripted_server(SummarizationJudgeScript())
    run_id, _ = evaluated_run(server)
    sample = label_sample(run_id, 6, seed=4)
    labelled, maybe, tied, _waiting = sample.trace_ids[:3], sample.trace_ids[3], sample.trace_ids[4], sample.trace_ids[5]
    for trace_id in labelled:
        mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="yes", source=PERSON)
    mlflow.log_feedback(trace_id=maybe, name="claim_alignment", value="maybe", source=PERSON)
    other = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="bob@example.com")
    mlflow.log_feedback(trace_id=tied, name="claim_alignment", value="yes", source=PERSON)
    mlflow.log_feedback(trace_id=tied, name="claim_alignment", value="no", source=other)
    report = people_estimate(run_id, log=False)
    assert (report.estimate.labelled, report.undecided, report.unlabelled) == (3, 2, 1)
    assert "1 drawn row not labelled yet; 2 drawn rows whose labels decide nothing (people tied, or not yes/no; not used)" in report.sentence
