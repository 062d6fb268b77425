"""The sample summaries that ship with the package (the quickstart's data): what they hold, the command that writes
them to a file, and that the wheel carries them."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from mlflow_genai_metrics.study import demo_articles, sample_summaries
from mlflow_genai_metrics.study.sample import main as write_sample

PACKAGE = Path(__file__).resolve().parents[1] / "mlflow_genai_metrics"


def test_the_sample_pairs_each_demo_article_with_a_summary_and_its_reference():
    sample, articles = sample_summaries(), demo_articles()
    assert list(sample.columns) == ["id", "category", "text", "reference", "summary"]
    assert sample["id"].tolist() == articles["id"].tolist() and sample["text"].tolist() == articles["text"].tolist()
    assert sample["reference"].tolist() == articles["reference_summary_sentences"].map(" ".join).tolist()
    assert sample["summary"].str.strip().str.len().gt(0).all() and not (sample["summary"] == sample["reference"]).any()


def test_the_planted_faults_the_data_readme_lists_are_in_the_sample():
    readme = (PACKAGE / "data" / "README.md").read_text()
    faults = dict(re.findall(r"^\| `([a-z]+/\d+)` \| [^|]*?\"([^\"]+)\"", readme, re.MULTILINE))
    assert len(faults) == 4
    summaries = sample_summaries().set_index("id")["summary"]
    for row_id, planted in faults.items():
        assert planted in summaries[row_id], row_id


@pytest.mark.parametrize("name", ["my_summaries.csv", "my_summaries.jsonl", "my_summaries.parquet"])
def test_the_sample_command_writes_the_sample_to_the_file_named(tmp_path, name, capsys):
    write_sample([str(tmp_path / name)])
    reader = {".csv": pd.read_csv, ".jsonl": lambda p: pd.read_json(p, lines=True), ".parquet": pd.read_parquet}
    written = reader[Path(name).suffix](tmp_path / name)
    pd.testing.assert_frame_equal(written.astype(str), sample_summaries().astype(str))
    assert capsys.readouterr().out == f"wrote {tmp_path / name}: 8 rows, columns id, category, text, reference, summary\n"


def test_the_sample_command_refuses_a_file_type_it_cannot_write(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        write_sample([str(tmp_path / "my_summaries.xlsx")])
    assert stop.value.code == 2 and "name a .csv, .jsonl or .parquet file" in capsys.readouterr().err
    assert not (tmp_path / "my_summaries.xlsx").exists()


def test_the_wheel_carries_every_shipped_data_file():
    patterns = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mlflow_genai_metrics"]
    shipped = [f"data/{path.name}" for path in (PACKAGE / "data").iterdir() if path.is_file()]
    assert [name for name in shipped if not any(fnmatch.fnmatch(name, p) for p in patterns)] == []
