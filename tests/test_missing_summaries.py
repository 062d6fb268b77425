"""A missing summary is an empty summary whatever pandas or Spark holds for "missing": None, NaN, or ``pd.NA`` (what
a pandas ``string`` Series holds); the same row on every path (``judge_summaries``, ``judge_summaries_frame``, Spark),
never refused as "not text" and never sent to the judge. A missing *source* is refused naming its row."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries, judge_summaries_frame
from mlflow_genai_metrics.testing import SummarizationJudgeScript

SOURCES = ["The council approved the budget on Monday.", "The mayor resigned on Friday."]
MISSING = {"None": None, "NaN": math.nan, "pd.NA": pd.NA}


def summaries(missing: str) -> pd.Series:
    """The second summary missing, in the Series pandas makes for it (``string`` dtype for ``pd.NA``)."""
    return pd.Series(["The council approved the budget.", MISSING[missing]], dtype="string" if missing == "pd.NA" else object)


def outcome(rows: pd.DataFrame) -> list[tuple]:
    return [(row["claim_count"], row["defect_empty"], row["error"]) for _, row in rows.sort_values("id").iterrows()]


EXPECTED = [(1, 0, ""), (0, 1, "")]  # the missing summary: no claim, an empty-summary defect, no error


@pytest.mark.parametrize("missing", sorted(MISSING))
def test_a_missing_summary_is_an_empty_summary_on_the_list_and_frame_paths(scripted_server, missing):
    server = scripted_server(SummarizationJudgeScript())
    source = pd.Series(SOURCES, dtype="string")
    listed = judge_summaries(source, summaries(missing), judge=judge_for(server), coverage=False)
    framed = judge_summaries_frame(pd.DataFrame({"source": source, "summary": summaries(missing)}), judge=judge_for(server), coverage=False)
    assert outcome(listed.rows) == outcome(framed.rows) == EXPECTED
    assert server.request_count > 0 and not any("mayor" in str(r.body) for r in server.requests)  # row 1 never sent


def test_a_missing_summary_in_a_spark_frame_made_from_a_pandas_string_series_is_an_empty_summary(spark, scripted_server):
    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.spark import judge_summaries_spark

    server = scripted_server(SummarizationJudgeScript())
    data = pd.DataFrame({"id": ["0", "1"], "source": pd.Series(SOURCES, dtype="string"), "summary": summaries("pd.NA")})
    judge = Judge(server.models[0], server.base_url, cache_dir=None)  # no key: nothing secret travels to the workers
    rows = judge_summaries_spark(spark.createDataFrame(data), judge=judge, coverage=False).rows.toPandas()
    assert outcome(rows) == EXPECTED


def test_a_missing_source_is_refused_naming_its_row_whatever_marks_it_missing(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    source = pd.Series([SOURCES[0], pd.NA], dtype="string")
    with pytest.raises(ValueError, match=r"row 1 \(id 1\): the source is missing \(NAType\)"):
        judge_summaries(source, ["The budget passed.", "He resigned."], judge=judge_for(server))
    assert server.request_count == 0
