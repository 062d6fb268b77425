"""A hostile look at people's rate (``people/<metric>``): what a user labelling a sample and gating on it can be
misled by. A gate rule on people's rate is a decision like any other (guide "Decisions"): the rows the run's own
output made unreadable count against it, as they do on ``strict_alignment``."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.entities import AssessmentSource, AssessmentSourceType

from mlflow_genai_metrics.stats import StatisticsOptions
from mlflow_genai_metrics.summarization.unreadable import decision_figures
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import (
    ClaimAlignment,
    SummarizerModel,
    evaluate_summaries,
    label_sample,
    people_estimate,
    register_if_passing,
)

ROWS = 12
RAISES = (1, 2, 3)  # the application raises on these articles: no summary, an APPLICATION_ERROR card
PERSON = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann@example.com")


def predict(text: str, id: str) -> str:
    k = int(id[1:])
    if k in RAISES:
        raise RuntimeError("the summarizer's endpoint refused the article")
    return "I cannot summarize this article." if k in (4, 5) else f"The club {k} won its match."


def test_a_gate_on_people_s_rate_counts_the_rows_the_application_failed_on_as_failures(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    data = [{"inputs": {"text": f"Article {k}. The club {k} won its match on Saturday. The coach {k} praised the defence.",
                        "id": f"r{k}"}} for k in range(ROWS)]
    with mlflow.start_run() as run:
        uri = SummarizerModel("candidate", server.base_url, input_col="text").log(name="summarizer").model_uri
        evaluate_summaries(data, [ClaimAlignment(judge_for(server))], predict_fn=predict)
    sample = label_sample(run.info.run_id, ROWS, seed=1)
    for trace_id in sample.trace_ids:  # people agree with every verdict the judge gave
        card = next(a for a in mlflow.get_trace(trace_id).info.assessments if a.name == "claim_alignment")
        if card.error is None:
            mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value=str(card.value).lower(), source=PERSON)
    report = people_estimate(run.info.run_id)
    # 7 of the 9 summaries written are faithful; the 3 rows the application raised on have no verdict, and the
    # report says whose failure that was (before: "3 drawn rows the judge failed on")
    assert report.estimate.estimate == pytest.approx(7 / 9) and report.application_failed == 3
    assert "3 drawn rows the application failed on (no output; left out here, a gate counts such rows as failures)" in report.sentence
    assert "the judge failed on" not in report.sentence
    gate = register_if_passing(uri, "people-gated", run_id=run.info.run_id,
                               rules={"people/strict_alignment": ">= 0.6", "strict_alignment": ">= 0.6"})
    # both rules read the 3 failed rows as failures: 7 of 12 (before: people's 0.778 passed where strict_alignment's 0.583 failed)
    people_rule, judge_rule = gate.outcomes
    assert not gate.passed and not people_rule.passed and people_rule.actual == pytest.approx(7 / 12) == judge_rule.actual
    assert "3 row(s) with no output (the application failed on them) counted as failures; logged 0.7778 without them" in people_rule.detail


def test_people_s_interval_counting_failures_combines_the_share_read_and_people_s_rate():
    figures = {"people/strict_alignment": 0.8, "people/strict_alignment_ci_low": 0.6, "people/strict_alignment_ci_high": 0.9,
               "people/strict_alignment_n": 30.0, "people/strict_alignment_labelled": 10.0}
    rows = pd.DataFrame({"id": [str(k) for k in range(40)], "strictly_aligned": [1] * 30 + [None] * 10,
                         "error": [""] * 30 + ["the application failed: application: boom"] * 8 + ["verify failed: timeout: slow"] * 2})
    decided, counted = decision_figures(rows, figures, ["people/strict_alignment_ci_low"], StatisticsOptions())
    # the 2 timeouts too: with no champion to pair them against, a rule reads them as the worst they could have shown
    assert counted == {"people/strict_alignment": 10}
    read = 30 / 40
    assert decided["people/strict_alignment"] == pytest.approx(read * 0.8) and decided["people/strict_alignment_n"] == 40
    # wider than people's interval scaled by the share read (the share itself is a sample's), never past [0, 1]
    assert 0 < decided["people/strict_alignment_ci_low"] < read * 0.6 and read * 0.9 < decided["people/strict_alignment_ci_high"] < 1
    assert decided["people/strict_alignment_labelled"] == 10
    # too few labels: no figure was logged, none is made up
    few = {"people/strict_alignment_n": 30.0, "people/strict_alignment_labelled": 1.0}
    assert "people/strict_alignment" not in decision_figures(rows, few, ["people/strict_alignment"], StatisticsOptions())[0]


def test_a_labelled_sheet_whose_text_ids_were_read_back_as_numbers_names_the_result_s_ids(scripted_server, tmp_path):
    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.people_labels import draw_sample, people_from_table

    articles = [f"Article {k}. The club {k} won its match on Saturday. The coach {k} praised the defence." for k in range(10)]
    result = judge_summaries(articles, [f"The club {k} won its match." for k in range(10)], judge=judge_for(scripted_server(SummarizationJudgeScript())),
                             ids=[f"{k:03d}" for k in range(10)], progress=False)
    sample = draw_sample(result, 5, seed=1)
    sample.sheet().assign(label="yes").to_csv(tmp_path / "labelled.csv", index=False)  # the documented round trip
    # pandas reads the sheet's "003" as 3: the refusal names the result's id and how to read the table (before: "the
    # result has no row with this id" alone, for a row the result has)
    with pytest.raises(ValueError, match=r"id '3' \(table row \d\): the result has no row with this id \(the result has '003': the "
                                         r"table's ids were read as numbers; read it with pd.read_csv\(\.\.\., dtype=\{'id': str\}\)\)"):
        people_from_table(result, sample, pd.read_csv(tmp_path / "labelled.csv"))
    report = people_from_table(result, sample, pd.read_csv(tmp_path / "labelled.csv", dtype={"id": str}))
    assert report.estimate.labelled == 5 and report.estimate.estimate == 1.0


def test_a_label_schema_of_the_card_s_name_that_is_not_yes_or_no_is_not_used_for_the_sample_s_queue(scripted_server, mlflow_store):
    from mlflow.genai import label_schemas

    server = scripted_server(SummarizationJudgeScript())
    data = [{"inputs": {"text": f"Article {k}. The club {k} won its match on Saturday.", "id": f"r{k}"},
             "outputs": f"The club {k} won its match."} for k in range(4)]
    with mlflow.start_run() as run:
        evaluate_summaries(data, [ClaimAlignment(judge_for(server))])
    # the team's own review asks a 1-5 rating under the card's name: a queue on it would have people answer 1 (worst),
    # which reads as yes
    label_schemas.create_label_schema(name="claim_alignment", type="feedback", input=label_schemas.InputNumeric(min_value=1, max_value=5),
                                      instruction="How faithful is the summary, 1 to 5?", experiment_id=run.info.experiment_id)
    sample = label_sample(run.info.run_id, 2, seed=0)
    # before: a queue asking the 1-5 rating
    assert sample.queue is None and "label schema 'claim_alignment' asks for InputNumeric(min_value=1, max_value=5), not yes or no" in sample.where
    assert mlflow.MlflowClient().get_run(run.info.run_id).data.tags["mgm.label_sample.queue"] == "none"


@pytest.mark.parametrize("rows, failing, judge_yes, people_if_yes, people_if_no, labels", [
    (40, 0.25, 0.7, 0.85, 0.2, 10), (100, 0.1, 0.8, 0.95, 0.3, 25), (20, 0.3, 0.9, 0.9, 0.5, 5),
    (100, 0.5, 0.5, 0.6, 0.1, 20), (200, 0.05, 0.9, 0.99, 0.5, 50), (60, 0.4, 0.3, 0.9, 0.05, 15),
])
def test_people_s_rate_counting_failures_covers_at_its_level_by_simulation(rows, failing, judge_yes, people_if_yes,
                                                                           people_if_no, labels):
    """The interval a gate reads for ``people/<metric>`` with the failed rows counted (``decision_figures``) covers
    people's rate with failures as 0, (1 - failing) x people's rate, at its 95%: 250 seeded draws of a run each
    (which rows fail, the judge's verdicts, people's on the labelled sample), through the package's own functions."""
    import numpy as np

    from mlflow_genai_metrics.people import ppi_proportion
    from mlflow_genai_metrics.summarization.unreadable import _people_counting_failures

    rng = np.random.default_rng(rows * 1000 + labels)
    target = (1 - failing) * (judge_yes * people_if_yes + (1 - judge_yes) * people_if_no)
    covered = drawn = 0
    for _ in range(250):
        failed = rng.random(rows) < failing
        judge = rng.random(rows) < judge_yes
        person = np.where(judge, rng.random(rows) < people_if_yes, rng.random(rows) < people_if_no)
        sample = rng.choice(rows, size=labels, replace=False)
        sample = sample[~failed[sample]]  # a drawn row the application failed on has no verdict to label
        if len(sample) < 2:
            continue
        people = ppi_proportion(judge[~failed].astype(int), judge[sample].astype(int), person[sample].astype(int))
        name = "people/strict_alignment"
        figures = {name: people.estimate, f"{name}_ci_low": people.ci_low, f"{name}_ci_high": people.ci_high,
                   f"{name}_n": float((~failed).sum())}
        counted = _people_counting_failures(figures, name, int(failed.sum()))
        drawn += 1
        covered += counted[f"{name}_ci_low"] <= target <= counted[f"{name}_ci_high"]
    assert drawn >= 240 and covered / drawn >= 0.95, (covered, drawn)
