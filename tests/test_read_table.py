"""``mgm evaluate`` reads its data with ``tables.read_table``: a malformed file is an error naming the file (and line)."""

from __future__ import annotations

import pandas as pd
import pytest

from mlflow_genai_metrics.tables import read_table


def test_a_malformed_jsonl_line_is_an_error_naming_the_file_and_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"source": "a", "summary": "b"}\n\n{"source": "c", "summary": \n{"source": "e", "summary": "f"}\n')
    with pytest.raises(ValueError, match=rf"{path}, line 3: not valid JSON \(Expecting value, column 28\)"):
        read_table(str(path))


def test_a_jsonl_line_that_is_not_an_object_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"source": "a", "summary": "b"}\n["c", "d"]\n')
    with pytest.raises(ValueError, match=r"line 2: each line must be one JSON object \(a row\), not list"):
        read_table(str(path))


def test_a_jsonl_line_that_is_not_utf8_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"source": "a", "summary": "b"}\n{"source": "\xff", "summary": "b"}\n')
    with pytest.raises(ValueError, match=r"line 2: not UTF-8 text"):
        read_table(str(path))


def test_jsonl_values_are_kept_as_json_gives_them_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"id": "001", "source": "a"}\n\n{"id": "002", "source": "b", "sentences": ["x", "y"]}\n')
    table = read_table(str(path))
    assert list(table["id"]) == ["001", "002"] and table.loc[1, "sentences"] == ["x", "y"]


def test_a_malformed_csv_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('source,summary\n"a","b"\n"c","d","e"\n')
    with pytest.raises(ValueError, match=rf"cannot read {path} as CSV: .*line 3"):
        read_table(str(path))



def test_a_csv_s_text_columns_are_read_as_written(tmp_path):
    """pandas guesses numbers and missing values: ids 001 and 1 became one id (refused as repeated), 007 became 7
    (no pair with the same rows from JSONL), and a summary or id reading NA, None or null became missing."""
    path = tmp_path / "data.csv"
    path.write_text("id,text,summary,score\n001,NA,None,\n1,a,,3\nNA,b,null,NA\n007,n/a,nan,2\n")
    table = read_table(str(path), text_columns=["id", "text", "summary"])
    assert table["id"].tolist() == ["001", "1", "NA", "007"]
    assert table["text"].tolist() == ["NA", "a", "b", "n/a"]
    assert table["summary"].tolist()[0] == "None" and pd.isna(table["summary"][1]) and table["summary"].tolist()[2:] == ["null", "nan"]
    assert pd.isna(table["score"][0]) and pd.isna(table["score"][2]) and table["score"][1] == 3  # other columns: pandas' defaults
