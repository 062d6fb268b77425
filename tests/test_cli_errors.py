"""What ``mgm`` reports as bad input (exit code 2, one line naming the problem) and what it lets surface as a bug."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from mlflow_genai_metrics import Judge, cli, judge_summaries_frame


def compare_with(broken_command: str, tmp_path) -> subprocess.CompletedProcess:
    """``mgm compare`` in a fresh interpreter, its command replaced by ``broken_command`` (code defining ``broken``)."""
    code = (
        "import sys\nfrom mlflow.exceptions import MlflowException\nfrom mlflow_genai_metrics import cli\nimport mlflow_genai_metrics.cli.runs\n"
        f"{broken_command}\ncli.runs.compare = broken\n"
        f"sys.exit(cli.main(['compare', 'run-a', 'run-b', '--tracking-uri', 'sqlite:///{tmp_path / 'mlflow.db'}']))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_an_internal_key_error_surfaces_as_a_traceback_with_exit_code_1(tmp_path):
    done = compare_with("broken = lambda args: {}['a key the code expected']  # a bug inside a command", tmp_path)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "KeyError: 'a key the code expected'" in done.stderr


def test_a_missing_column_is_bad_input_with_exit_code_2(monkeypatch, capsys):
    frame = pd.DataFrame({"article": ["The council met."], "summary": ["It met."]})
    judge = Judge("scripted-judge", "http://127.0.0.1:9/v1", cache_dir=None)  # never called: the columns are checked first
    monkeypatch.setattr(cli.evaluate, "evaluate", lambda args: judge_summaries_frame(frame, judge=judge))
    assert cli.main(["evaluate", "rows.csv"]) == 2
    assert "mgm evaluate: the DataFrame has no column ['source']" in capsys.readouterr().err


def test_an_mlflow_error_that_is_not_bad_input_surfaces_as_a_traceback(tmp_path):
    done = compare_with("def broken(args):\n    raise MlflowException('the store failed')  # INTERNAL_ERROR", tmp_path)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "MlflowException: the store failed" in done.stderr


def test_an_mlflow_not_found_error_is_bad_input_in_one_line_with_exit_code_2(monkeypatch, capsys):
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST

    def missing(args):
        raise MlflowException("Registered Model with name=summarizer not found\n(twice)", error_code=RESOURCE_DOES_NOT_EXIST)

    monkeypatch.setattr(cli.runs, "gate", missing)
    assert cli.main(["gate", "run-a", "--model-uri", "models:/summarizer/1", "--name", "summarizer", "--rule", "alignment>=0.9"]) == 2
    assert capsys.readouterr().err == "mgm gate: Registered Model with name=summarizer not found (twice)\n"



@pytest.mark.parametrize(("option", "said"), [
    (["--prices", "1"], "mgm evaluate: --prices: prices '1': write INPUT,OUTPUT[,CACHED_INPUT] in USD per million tokens, e.g. 0.15,0.60"),
    (["--prices", "a,b"], "mgm evaluate: --prices: prices 'a,b': each price must be a number (USD per million tokens)"),
    (["--examples", "nope.json"], "mgm evaluate: --examples: examples file nope.json does not exist (mgm align writes one)"),
])
def test_a_bad_setting_is_one_line_under_its_flag_not_pydantic_s_dump(tmp_path, capsys, mlflow_store, option, said):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "text": "The council met.", "summary": "The council met."}\n')
    code = cli.main(["evaluate", str(rows), "--judge-model", "x", "--judge-base-url", "http://127.0.0.1:9/v1", *option,
                     "--tracking-uri", mlflow_store])  # a store of its own: never the working folder's, shared by workers
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == said  # once: "1 validation error for JudgeSettings ... errors.pydantic.dev"
