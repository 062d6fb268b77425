"""Rows are checked before any judge call: ids in the form they are stored in, the shapes of the inputs, text
that cannot be sent, and the numeric settings; every problem names its row (or the argument)."""

from __future__ import annotations

import pytest

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.summarization.judging import prepare_rows
from mlflow_genai_metrics.testing import SummarizationJudgeScript

from helpers import judge_for

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
