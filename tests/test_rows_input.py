"""Rows are checked before any judge call: ids in the form they are stored in, the shapes of the inputs, text
that cannot be sent, and the numeric settings; every problem names its row (or the argument)."""

from __future__ import annotations

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.summarization.judging import prepare_rows
from mlflow_genai_metrics.testing import SummarizationJudgeScript

SOURCES = ["The council approved the budget.", "The mayor resigned on Monday."]
SUMMARIES = ["The budget was approved.", "The mayor resigned."]


@pytest.mark.parametrize(
    ("first", "second", "stored"),
    [(1.5, "1.5", "1.5"), ((1, 2), "(1, 2)", "(1, 2)"), (1, "1", "1"), (1.0, 1, "1")],
)
def test_two_ids_that_are_stored_as_the_same_text_are_refused_naming_both_rows_and_ids(first, second, stored):
    with pytest.raises(ValueError) as caught:
        prepare_rows(SOURCES, SUMMARIES, [first, second])
    message = str(caught.value)
    assert f"row 1 (id {second!r}): the id repeats row 0 (id {first!r})" in message
    assert repr(stored) in message


@pytest.mark.parametrize("infinite", [float("inf"), float("-inf")])
def test_a_non_finite_id_is_refused_naming_its_row(infinite):
    with pytest.raises(ValueError, match=r"row 1: the id .*inf.* is not finite"):
        prepare_rows(SOURCES, SUMMARIES, ["a", infinite])


def test_a_boolean_id_is_refused_naming_its_row():
    with pytest.raises(ValueError, match=r"row 0: a boolean \(True\) cannot be a row id"):
        prepare_rows(SOURCES, SUMMARIES, [True, 7])


def test_ids_keep_the_value_the_user_gave():
    import numpy as np

    rows = prepare_rows(SOURCES * 2, SUMMARIES * 2, [np.int64(3), "b/1", 2.0, 1.5])
    assert [row.id for row in rows] == [3, "b/1", 2, "1.5"]
    assert type(rows[0].id) is int


@pytest.mark.parametrize("missing", [None, float("nan"), "pd.NA"])
def test_a_missing_id_is_refused_naming_its_row(missing):
    import pandas as pd

    with pytest.raises(ValueError, match=r"row 1: the id is missing"):
        prepare_rows(SOURCES, SUMMARIES, ["a", pd.NA if missing == "pd.NA" else missing])


@pytest.mark.parametrize("argument", ["sources", "summaries", "ids", "references"])
def test_a_mapping_is_refused_wherever_rows_are_expected_before_any_call(scripted_server, argument):
    from types import MappingProxyType

    server = scripted_server(SummarizationJudgeScript())
    inputs = {"sources": SOURCES, "summaries": SUMMARIES, "ids": ["a", "b"], "references": SUMMARIES}
    inputs[argument] = MappingProxyType(dict(zip(["a", "b"], inputs[argument])))
    sources, summaries = inputs.pop("sources"), inputs.pop("summaries")
    with pytest.raises(TypeError, match=rf"{argument} is a mapping \(mappingproxy\)"):
        judge_summaries(sources, summaries, judge=judge_for(server), **inputs)
    assert server.request_count == 0


def test_a_dict_of_sources_is_refused_not_judged_by_its_keys():
    with pytest.raises(TypeError, match="sources is a mapping"):
        prepare_rows({"article one": SOURCES[0], "article two": SOURCES[1]}, SUMMARIES, None)


@pytest.mark.parametrize("shape", ["set", "DataFrame"])
def test_a_set_or_a_dataframe_is_refused_as_rows(shape):
    import pandas as pd

    value = set(SOURCES) if shape == "set" else pd.DataFrame({"source": SOURCES})
    with pytest.raises(TypeError, match=f"sources is a {shape}"):
        prepare_rows(value, SUMMARIES, None)


@pytest.mark.parametrize("argument", ["summaries", "ids", "references"])
def test_pandas_series_with_different_indexes_are_refused_not_paired_by_position(scripted_server, argument):
    import pandas as pd

    server = scripted_server(SummarizationJudgeScript())
    inputs = {"summaries": SUMMARIES, "ids": ["a", "b"], "references": SUMMARIES}
    inputs[argument] = pd.Series(inputs[argument], index=[1, 0])
    with pytest.raises(ValueError, match=f"sources and {argument} are pandas Series with different indexes"):
        judge_summaries(pd.Series(SOURCES), judge=judge_for(server), **inputs)
    assert server.request_count == 0


def test_series_with_equal_indexes_or_mixed_with_lists_are_paired_by_position():
    import pandas as pd

    index = ["x", "y"]
    rows = prepare_rows(pd.Series(SOURCES, index=index), pd.Series(SUMMARIES, index=index), ["a", "b"], SUMMARIES)
    assert [(row.id, row.source, row.summary) for row in rows] == [("a", SOURCES[0], SUMMARIES[0]), ("b", SOURCES[1], SUMMARIES[1])]


def test_references_of_the_wrong_length_are_refused_before_any_call(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    with pytest.raises(ValueError, match="references has 1 rows but sources has 2"):
        judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server), references=SUMMARIES[:1])
    assert server.request_count == 0


@pytest.mark.parametrize("field", ["id", "source", "summary", "reference"])
def test_an_unpaired_surrogate_is_refused_naming_the_row_and_the_field_before_any_call(scripted_server, field):
    server = scripted_server(SummarizationJudgeScript())
    inputs = {"id": ["a", "b"], "source": list(SOURCES), "summary": list(SUMMARIES), "reference": list(SUMMARIES)}
    inputs[field][1] = inputs[field][1] + " broken \ud800 text"
    with pytest.raises(ValueError, match=rf"row 1 \(id '.*'\): the {field} cannot be encoded as UTF-8: .*'\\ud800' at character"):
        judge_summaries(inputs["source"], inputs["summary"], judge=judge_for(server), ids=inputs["id"], references=inputs["reference"])
    assert server.request_count == 0


def test_an_unpaired_surrogate_in_a_reference_sentence_list_is_refused_naming_the_row():
    with pytest.raises(ValueError, match=r"row 0 \(id 0\): the reference cannot be encoded"):
        prepare_rows(SOURCES, SUMMARIES, None, [["Fine.", "Bad \udfff."], "Fine."])


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("resamples", 0, "resamples must be an integer >= 1"),
        ("resamples", 2.5, "resamples must be an integer >= 1"),
        ("confidence", 1.0, "confidence must be a number strictly between 0 and 1"),
        ("confidence", 95, "confidence must be a number strictly between 0 and 1"),
        ("confidence", float("nan"), "confidence must be a number strictly between 0 and 1"),
        ("seed", -1, "seed must be an integer >= 0"),
        ("seed", "7", "seed must be an integer >= 0"),
        ("max_source_tokens", -100, "max_source_tokens must be None or an integer >= 32"),
        ("max_source_tokens", 10, "max_source_tokens must be None or an integer >= 32"),
        ("max_source_tokens", True, "max_source_tokens must be None or an integer >= 32"),
    ],
)
def test_a_bad_statistics_or_chunking_setting_is_refused_before_any_call(scripted_server, setting, value, expected):
    server = scripted_server(SummarizationJudgeScript())
    with pytest.raises(ValueError, match=expected):
        judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server), **{setting: value})
    assert server.request_count == 0


def test_judge_summaries_frame_refuses_what_is_not_a_dataframe(scripted_server):
    from mlflow_genai_metrics import judge_summaries_frame

    with pytest.raises(TypeError, match="needs a pandas DataFrame, not dict"):
        judge_summaries_frame({"source": SOURCES, "summary": SUMMARIES}, judge=judge_for(scripted_server()))
