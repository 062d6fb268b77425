"""Rows that cannot be read, on the ``mlflow.genai.evaluate`` path: refused where the row is read, naming the row and
its problem, never judged as something else and never found only when the run is logged.

An output dict without the key the judges read (an application's ``{"response": ...}``) is a ``BAD_ROW`` card, as
a number is, not an empty summary or answer. A category is text (a number is kept as its text, as ids are; None or
NaN is none); a list, a dict or a boolean is refused before any judge call, not by the run's tables after every
call was spent. ``log_results`` of a run with such a row says which row and why, on the run too (``mgm.error``).
On a real SQLite store and the scripted judge."""

from __future__ import annotations

import math
import re

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import evaluate_summaries
from mlflow_genai_metrics.tracking import ClaimAlignment, KeyPointCoverage, log_results
from mlflow_genai_metrics.tracking.answers import parse_answer
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch
from mlflow_genai_metrics.tracking.genai import parse_row
from mlflow_genai_metrics.tracking.rows import ERROR_TAG

NOT_A_SUMMARY = "`outputs` must be the summary text (or {'summary': text}); got "


def records() -> list[dict]:
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES[:3]]


@pytest.fixture
def server(scripted_server):
    return scripted_server(Endpoint(), models=Endpoint.models)


def cards(run_id: str, name: str) -> dict[str, object]:
    """Each row's card ``name``, by row id."""
    mlflow.flush_trace_async_logging()
    found = {}
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        found[next(s for s in trace.data.spans if s.parent_id is None).inputs["id"]] = next(a for a in trace.info.assessments if a.name == name)
    return found


def error_tag(run_id: str) -> str:
    return MlflowClient().get_run(run_id).data.tags.get(ERROR_TAG, "")


# -- outputs ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("outputs", "found"), [
    ({"response": "The council approved it."}, "a dict with keys ['response'] and no 'summary'"),
    ({}, "an empty dict"),
    ({"summary": 42}, "{'summary': int}"),
    (42, "int"),
])
def test_an_output_that_is_not_the_summary_is_refused_saying_what_it_is(outputs, found):
    with pytest.raises(ValueError, match=re.escape(NOT_A_SUMMARY + found)):
        parse_row({"text": ARTICLES[0][2]}, outputs)


def test_an_output_dict_holding_the_summary_or_none_is_read():
    assert parse_row({"text": ARTICLES[0][2]}, {"summary": "The council approved it.", "model": "x"}).row.summary == "The council approved it."
    assert parse_row({"text": ARTICLES[0][2]}, {"summary": None}).row.summary == ""  # a missing summary, said as such


def test_an_answer_dict_without_the_answer_key_is_refused():
    inputs = {"question": "What prize did Tomas Reyes win?", "passages": ["Tomas Reyes won the Coastal Book Prize."]}
    with pytest.raises(ValueError, match=re.escape("`outputs` must be the answer text (or {'answer': text}); got a dict with keys "
                                                   "['response'] and no 'answer'")):
        parse_answer(inputs, {"response": "The Coastal Book Prize."})
    assert parse_answer(inputs, {"answer": "The Coastal Book Prize."}).row.answer == "The Coastal Book Prize."


def test_plain_evaluate_gives_an_output_under_another_key_a_bad_row_card_not_an_empty_summary(server, mlflow_store):
    data = records()
    data[1]["outputs"] = {"response": data[1]["outputs"]}
    scorers = [ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server))]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    for name in ("claim_alignment", "key_point_coverage"):
        card = cards(result.run_id, name)["biz/2"]
        assert card.feedback.value is None and card.feedback.error.error_code == "BAD_ROW"
        assert NOT_A_SUMMARY + "a dict with keys ['response'] and no 'summary'" in card.feedback.error.error_message
        assert all(cards(result.run_id, name)[row_id].feedback.error is None for row_id in ("biz/1", "spo/1"))


def test_evaluate_summaries_refuses_an_output_under_another_key_before_any_call(server, mlflow_store):
    data = records()
    data[1]["outputs"] = {"response": data[1]["outputs"]}
    with pytest.raises(ValueError, match=re.escape("row 1 (id 'biz/2'): " + NOT_A_SUMMARY + "a dict with keys ['response']")):
        evaluate_summaries(data, judges=[ClaimAlignment(judge_for(server))])
    assert server.request_count == 0


# -- categories ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("category", "stored"), [
    ("sport", "sport"), (7, "7"), (7.0, "7"), (2.5, "2.5"), (None, None), (math.nan, None), (pd.NA, None),
])
def test_a_category_is_text_a_number_its_text_and_none_none(category, stored):
    assert parse_row({"text": ARTICLES[0][2], "category": category}, "The council approved it.").category == stored


@pytest.mark.parametrize(("category", "found"), [
    (["politics", "local"], "list ['politics', 'local']"), ({"k": 1}, "dict {'k': 1}"), (True, "bool True"),
    (math.inf, "float inf"),
])
def test_a_category_that_is_not_text_or_a_number_is_refused(category, found):
    with pytest.raises(ValueError, match=re.escape(f"the category `inputs['category']` must be text (or a number); got {found}")):
        parse_row({"text": ARTICLES[0][2], "category": category}, "The council approved it.")


def test_evaluate_summaries_logs_categories_of_mixed_types_as_text(server, mlflow_store):
    data = records()
    for row, category in zip(data, ["politics", 7, "sport"]):
        row["inputs"]["category"] = category
    evaluation = evaluate_summaries(data, judges=[ClaimAlignment(judge_for(server))])
    assert evaluation.result.rows.set_index("id")["category"].to_dict() == {"biz/1": "politics", "biz/2": "7", "spo/1": "sport"}
    assert evaluation.metrics["alignment_n"] == 3


def test_evaluate_summaries_refuses_a_list_category_naming_the_row_before_any_call(server, mlflow_store):
    data = records()
    data[2]["inputs"]["category"] = ["sport", "football"]
    with pytest.raises(ValueError, match=re.escape("row 2 (id 'spo/1'): the category `inputs['category']` must be text (or a number); "
                                                   "got list ['sport', 'football']")):
        evaluate_summaries(data, judges=[ClaimAlignment(judge_for(server))])
    assert server.request_count == 0


def test_log_results_of_a_plain_run_with_categories_of_mixed_types_logs_them(server, mlflow_store):
    data = records()
    for row, category in zip(data, ["politics", 7, "sport"]):
        row["inputs"]["category"] = category
    scorers = [ClaimAlignment(judge_for(server))]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    logged = log_results(result.run_id, scorers)
    assert logged.rows["category"].tolist() == ["politics", "7", "sport"]
    assert MlflowClient().get_run(result.run_id).data.metrics["alignment_n"] == 3


# -- log_results of a run with a row that cannot be read --------------------------------------------------------------


def test_log_results_names_the_row_a_dict_category_left_unread_and_its_problem_before_any_call(server, mlflow_store):
    data = records()
    data[1]["inputs"]["category"] = {"k": 1}
    scorers = [ClaimAlignment(judge_for(server))]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    assert cards(result.run_id, "claim_alignment")["biz/2"].feedback.error.error_code == "BAD_ROW"
    asked = server.request_count
    with pytest.raises(RunRowsMismatch) as raised:
        log_results(result.run_id, scorers)
    problem = "(id 'biz/2'): the category `inputs['category']` must be text (or a number); got dict {'k': 1}"
    assert problem in str(raised.value) and problem in error_tag(result.run_id)
    assert server.request_count == asked


def test_log_results_without_data_names_a_bad_row_and_its_problem_on_the_run(server, mlflow_store):
    data = records()
    data[1]["outputs"] = 42
    scorers = [ClaimAlignment(judge_for(server))]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    with pytest.raises(RunRowsMismatch) as raised:
        log_results(result.run_id, scorers)
    trace = next(t.info.trace_id for t in mlflow.search_traces(run_id=result.run_id, return_type="list")
                 if next(s for s in t.data.spans if s.parent_id is None).inputs["id"] == "biz/2")
    said = f"the row of trace {trace} (id 'biz/2'): {NOT_A_SUMMARY}int"
    assert said in str(raised.value) and said in error_tag(result.run_id)


def test_log_results_with_data_names_a_bad_row_and_its_problem_on_the_run(server, mlflow_store):
    data = records()
    data[1]["outputs"] = 42
    scorers = [ClaimAlignment(judge_for(server))]
    result = mlflow.genai.evaluate(data=data, scorers=scorers)
    said = f"row 1 (id 'biz/2'): {NOT_A_SUMMARY}int"
    with pytest.raises(ValueError, match=re.escape(said)):
        log_results(result.run_id, scorers, data=data)
    assert said in error_tag(result.run_id)


def test_log_results_refuses_a_run_that_holds_two_evaluations(server, mlflow_store):
    """Two plain evaluations inside one active run (a notebook cell run twice, on other rows): ``log_results`` once
    reported over both evaluations' rows as one (strict_alignment over 6 rows, MLflow's own mean over the last 3)."""
    data = records()
    scorers = [ClaimAlignment(judge_for(server))]
    with mlflow.start_run() as run:
        mlflow.genai.evaluate(data=data[:2], scorers=scorers)
        mlflow.genai.evaluate(data=data[2:], scorers=scorers)
    asked = server.request_count

    with pytest.raises(ValueError, match=r"holds 2 evaluations .*evaluate each into a run of its own") as raised:
        log_results(run.info.run_id, scorers)

    assert str(raised.value) in error_tag(run.info.run_id) and server.request_count == asked
    assert "strict_alignment" not in MlflowClient().get_run(run.info.run_id).data.metrics
