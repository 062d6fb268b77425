"""``mgm evaluate`` reads its data with ``tables.read_table``: a malformed file is an error naming the file (and line)."""

from __future__ import annotations

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

