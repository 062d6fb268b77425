"""People's labels in a table, for results judged without MLflow (issue 48, 1: "or a label column in a table for
``judge_summaries``/``judge_answers`` users"): ``draw_sample`` draws seeded rows of a result (the same rows whatever
order they were judged in), ``people_from_table`` reads people's verdicts from an id + label table, uses the drawn
rows' labels only (others counted apart), leaves out a drawn row the judge failed on, and refuses, naming the rows,
labels it cannot use. The estimate is the one a run gets (``people.ppi_proportion``, ``recalibrated_grounding``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.people import ppi_proportion, recalibrated_grounding
from mlflow_genai_metrics.people_labels import CARDS, TableSample, draw_sample, people_from_table
from mlflow_genai_metrics.rag import judge_answers
from mlflow_genai_metrics.rewrites import judge_rewrites
from mlflow_genai_metrics.testing import AnswersJudgeScript, Fault, SummarizationJudgeScript

ROWS = 30
FAILING = 4  # the judge fails on this row's verification


def texts() -> tuple[list[str], list[str], list[str]]:
    """Articles and summaries of which every third invents a detail (the judge says no); ids in no sorted order."""
    articles = [f"Article {k}. The club {k} won its match on Saturday. The coach {k} praised the defence." for k in range(ROWS)]
    summaries = [f"The club {k} won its match." + (f" The striker {k} scored a hat-trick." if k % 3 == 0 else "") for k in range(ROWS)]
    return articles, summaries, [f"row-{(7 * k) % ROWS:02d}" for k in range(ROWS)]


def failing_script() -> SummarizationJudgeScript:
    invented = {f"The striker {k} scored a hat-trick.": "no" for k in range(0, ROWS, 3)}
    return SummarizationJudgeScript(verdicts=invented, fault=lambda request, kind: Fault("status", status=400, message="refused")
                                    if kind == "verify" and f"Article {FAILING}." in request.prompt_text else None)


@pytest.fixture
def result(scripted_server):
    articles, summaries, ids = texts()
    return judge_summaries(articles, summaries, judge=judge_for(scripted_server(failing_script())), ids=ids, progress=False)


def people_say(row_id: str, rows: pd.DataFrame) -> str:
    """People's verdict: the judge's (yes where it failed), but for rows whose id ends in 1 (people disagree there)."""
    judged = rows.set_index("id").loc[row_id, "strictly_aligned"]
    agree = not row_id.endswith("1")
    return "yes" if (pd.isna(judged) or judged == 1) == agree else "no"


def test_a_draw_is_seeded_recorded_and_the_same_whatever_order_the_rows_came_in(result, tmp_path):
    sample = draw_sample(result, 12, seed=5)
    assert sample.card == "claim_alignment" and sample.rows == ROWS and len(set(sample.ids)) == 12 and sample.seed == 5
    assert set(sample.ids) <= set(result.rows["id"])
    shuffled = result.rows.sample(frac=1, random_state=np.random.default_rng(0))
    assert draw_sample(shuffled, 12, seed=5, card="claim_alignment") == sample  # rows, not their order, decide
    assert draw_sample(result, 12, seed=6).ids != sample.ids
    assert draw_sample(result, 12).seed >= 0  # no seed: one is drawn and recorded
    sheet = sample.sheet()
    assert sheet["id"].tolist() == list(sample.ids) and sheet["position"].tolist() == list(range(1, 13))
    assert (sheet["question"] == CARDS["claim_alignment"][0]).all() and sheet["label"].isna().all()
    sample.save(tmp_path / "sample.json")
    assert TableSample.load(tmp_path / "sample.json") == sample
    for n in (0, ROWS + 1):
        with pytest.raises(ValueError, match=f"n={n}: the result has {ROWS} rows"):
            draw_sample(result, n)
    with pytest.raises(ValueError, match="a rows table does not say which task it is"):
        draw_sample(result.rows, 5)
    twice = pd.concat([result.rows, result.rows.iloc[[3, 0]]])  # two results' rows put together, say
    first, fourth = sorted(result.rows["id"].iloc[[0, 3]])
    with pytest.raises(ValueError, match=f"the rows' ids repeat \\('{first}', '{fourth}'\\)"):
        draw_sample(twice, 5, card="claim_alignment")


def test_the_estimate_uses_the_drawn_rows_labels_only_and_counts_the_rest_apart(result):
    rows = result.rows
    sample = draw_sample(result, 15, seed=2)
    failing_id = rows.loc[FAILING, "id"]
    labelled = list(sample.ids[:-2])  # two drawn rows not labelled yet
    assert failing_id in labelled  # the seed draws the row the judge failed on, and it is labelled
    outside = [i for i in rows["id"] if i not in sample.ids][:3]
    table = pd.DataFrame({"id": labelled + outside, "label": [people_say(i, rows) for i in labelled + outside]})
    report = people_from_table(result, sample, table)

    judged = rows[rows["error"] == ""].set_index("id")
    pairs = [(judged.loc[i, "strictly_aligned"], people_say(i, rows) == "yes") for i in labelled if i in judged.index]
    expected = ppi_proportion(judged["strictly_aligned"].to_numpy(), [j for j, _ in pairs], [h for _, h in pairs])
    assert report.estimate == expected and report.metric == "strict_alignment"
    assert (report.estimate.n, report.estimate.labelled) == (ROWS - 1, len(labelled) - 1)
    assert (report.outside_sample, report.judge_failed, report.unlabelled) == (3, 1, 2)
    assert "3 labels on rows not drawn (not used)" in report.sentence and "1 drawn row the judge failed on" in report.sentence
    # labels outside the draw change nothing; the drawn ones do
    assert people_from_table(result, sample, table[table["id"].isin(labelled)]).estimate == report.estimate
    flipped = table.assign(label=[("no" if v == "yes" else "yes") if i in labelled else v for i, v in zip(table["id"], table["label"])])
    assert people_from_table(result, sample, flipped).estimate != report.estimate
    # grounding re-calibrated on the same labelled drawn rows (the failed row included: grounding needs no judge), in draw order
    scores = dict(zip(rows["id"], rows["grounding"]))
    expected_grounding = recalibrated_grounding(rows["grounding"], [scores[i] for i in labelled], [people_say(i, rows) == "yes" for i in labelled])
    assert report.grounding.labelled == len(labelled) and report.grounding.mean == pytest.approx(expected_grounding.mean)
    assert report.grounding.shift == pytest.approx(expected_grounding.shift) and set(report.metrics()) >= {
        "people/strict_alignment", "people/strict_alignment_ci_low", "people/grounded_rate"}


def test_labels_in_any_of_the_usual_spellings_give_the_same_estimate(result):
    sample = draw_sample(result, 10, seed=3)
    said = [people_say(i, result.rows) == "yes" for i in sample.ids]
    spellings = [["yes" if v else "no" for v in said], [" YES " if v else "No" for v in said], said, [int(v) for v in said],
                 np.array(said), [float(v) for v in said], ["true" if v else "false" for v in said]]
    estimates = {people_from_table(result, sample, pd.DataFrame({"id": list(sample.ids), "label": labels})).estimate for labels in spellings}
    assert len(estimates) == 1


def test_a_label_table_it_cannot_use_is_refused_naming_each_row(result):
    sample = draw_sample(result, 10, seed=3)
    first, second = sample.ids[:2]
    bad = pd.DataFrame({"id": [first, second, second, "no-such-row", sample.ids[3]], "label": ["maybe", "yes", "no", "yes", ""]})
    with pytest.raises(ValueError, match="3 labels cannot be used") as refused:
        people_from_table(result, sample, bad)
    message = str(refused.value)
    assert f"id {first!r} (table row 0): label 'maybe' is not a verdict" in message
    assert f"id {second!r} is labelled twice (table rows 1 and 2)" in message
    assert "id 'no-such-row' (table row 3): the result has no row with this id" in message
    with pytest.raises(ValueError, match="the labels table has no 'verdict' column"):
        people_from_table(result, sample, bad, label_col="verdict")


@pytest.mark.parametrize("n", [5.0, "5", True, None])
def test_a_number_of_rows_that_is_not_a_whole_number_is_refused_saying_so(result, n):
    with pytest.raises(TypeError, match=f"n={n!r}: the number of rows to draw is a whole number \\(between 1 and {ROWS}\\)"):
        draw_sample(result, n, seed=1)
    assert draw_sample(result, np.int64(5), seed=1).ids == draw_sample(result, 5, seed=1).ids


def test_a_sample_of_other_rows_is_refused(result, scripted_server):
    articles, summaries, ids = texts()
    other = judge_summaries(articles[:-1], summaries[:-1], judge=judge_for(scripted_server(SummarizationJudgeScript())), ids=ids[:-1], progress=False)
    sample = draw_sample(other, 5, seed=1)
    with pytest.raises(ValueError, match=f"drawn from {ROWS - 1} other rows than the result's {ROWS}"):
        people_from_table(result, sample, pd.DataFrame({"id": list(sample.ids), "label": "yes"}))


def test_answers_and_rewrites_name_their_own_question(scripted_server):
    answers = judge_answers([f"Who won match {k}?" for k in range(6)], [[f"The club {k} won match {k}."] for k in range(6)],
                            [f"The club {k} won match {k}." for k in range(6)], judge=judge_for(scripted_server(AnswersJudgeScript())), progress=False)
    sample = draw_sample(answers, 4, seed=0)
    assert sample.card == "answer_faithfulness" and "passages" in sample.sheet()["question"].iloc[0]
    report = people_from_table(answers, sample, pd.DataFrame({"id": list(sample.ids), "label": ["yes", "yes", "no", "yes"]}))
    assert report.estimate.labelled == 4 and report.grounding is None  # answers carry no grounding score
    text = "The library opens at nine on weekdays and closes at noon on Saturdays."
    rewrites = judge_rewrites([text] * 4, ["The library opens at nine.", "It opens at ten.", "Closed Saturdays.", "Opens at nine."],
                              instruction="Say it briefly.", judge=judge_for(scripted_server(SummarizationJudgeScript())), progress=False)
    with pytest.raises(ValueError, match="name one with card="):
        draw_sample(rewrites, 2)
    sample = draw_sample(rewrites, 3, seed=0, card="instruction_following")
    report = people_from_table(rewrites, sample, pd.DataFrame({"id": list(sample.ids), "label": ["yes", "no", "yes"]}))
    assert report.metric == "instruction_following" and report.estimate.labelled == 3
    assert report.estimate.judge_rate == pytest.approx(rewrites.rows["instruction_followed"].mean())
