"""What ``mgm`` reports as bad input (exit code 2, one line naming the problem) and what it lets surface as a bug."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

from mlflow_genai_metrics import Judge, cli, judge_summaries_frame


def test_an_internal_key_error_surfaces_as_a_traceback_with_exit_code_1(tmp_path):
    code = (
        "import sys\nfrom mlflow_genai_metrics import cli\n"
        "cli._compare = lambda args: {}['a key the code expected']  # a bug inside a command\n"
        f"sys.exit(cli.main(['compare', 'run-a', '--tracking-uri', 'sqlite:///{tmp_path / 'mlflow.db'}']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "KeyError: 'a key the code expected'" in done.stderr


def test_a_missing_column_is_bad_input_with_exit_code_2(monkeypatch, capsys):
    frame = pd.DataFrame({"article": ["The council met."], "summary": ["It met."]})
    judge = Judge("scripted-judge", "http://127.0.0.1:9/v1", cache_dir=None)  # never called: the columns are checked first
    monkeypatch.setattr(cli, "_evaluate", lambda args: judge_summaries_frame(frame, judge=judge))
    assert cli.main(["evaluate", "rows.csv"]) == 2
    assert "mgm evaluate: the DataFrame has no column ['source']" in capsys.readouterr().err
