"""A hostile look at the grounding check's label (issue 47, 2): ``grounding`` is a score calibrated on the check's
training mix, for comparing systems on the same data; wherever a person reads ``grounded`` (the command's printout,
the demo's table, the scorer's description, the docs) the data it was calibrated on is named, and no doc calls it a
calibrated probability or gates on ``grounded_rate`` alone."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pandas as pd
from mlflow_helpers import ARTICLES

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.grounding.model import calibrated_on, calibration_note
from mlflow_genai_metrics.tracking import Grounding

ROOT = Path(__file__).resolve().parents[1]


def test_mgm_evaluate_grounding_only_says_what_grounded_rate_is_calibrated_on(mlflow_store, tmp_path, monkeypatch, capsys):
    """`mgm evaluate --grounding-only` printed `grounded_rate 1 [0.541, 1]` on six new rows and nothing else: a person
    read "every summary grounded" as people's verdict on their data. The line under the figures names the data."""
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "rows.csv"
    pd.DataFrame({"id": [i for i, _, _ in ARTICLES], "text": [a for _, _, a in ARTICLES],
                  "summary": [a.split(". ")[0] + "." for _, _, a in ARTICLES]}).to_csv(path, index=False)
    capsys.readouterr()
    assert mgm(["evaluate", str(path), "--source-col", "text", "--id-col", "id", "--tracking-uri", mlflow_store, "--grounding-only"]) == 0
    out = capsys.readouterr().out.splitlines()
    figure = next(k for k, line in enumerate(out) if line.split()[:1] == ["grounded_rate"])
    note = calibration_note()
    assert f"  (grounding, grounded_rate: {note[:1].lower()}{note[1:]})" in out[figure:]
    assert calibrated_on() in note and "not a probability" in note
    run_id = next(line.split()[1] for line in out if line.startswith("run "))
    assert mlflow.MlflowClient().get_run(run_id).data.tags["mgm.grounding.calibrated_on"] == calibrated_on()


def test_the_demo_s_table_is_followed_by_the_data_grounded_is_calibrated_on():
    """`mgm demo` printed the `grounded [95% CI]` column with a real judge and no word of its calibration (with the
    local judge, a note that it "stands as it is")."""
    from mlflow_genai_metrics.cli.local import DEMO_NOTE, demo_report

    table = pd.DataFrame({"candidate": ["a"], "grounding [95% CI]": ["0.448"], "grounded [95% CI]": ["0.125 [0.003, 0.527]"]})
    result = SimpleNamespace(table=table, by_category=pd.DataFrame(), judge_failures={}, cut_off={}, warnings={}, comparison_refused=None,
                             comparison=None, gates={}, run_ids={}, experiment_id="1")
    for local_judge in (False, True):
        out = demo_report(result, "sqlite:///mlflow.db", local_judge=local_judge, seconds=1).splitlines()
        below = out[out.index(next(line for line in out if "0.125 [0.003, 0.527]" in line)) + 1]
        assert below.startswith("(grounding, grounded: calibrated on ") and calibrated_on() in below and "not a probability" in below
    assert "stand as they are" not in DEMO_NOTE


def test_the_grounding_scorer_s_description_says_it_is_calibrated_on_its_training_mix():
    """The registered scorer's description (what MLflow shows beside its cards) called it only a score in [0, 1]."""
    assert "calibrated on its training mix" in Grounding().description


def _docs() -> dict[str, str]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.py"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths if p.name not in ("architecture.md", "testing.md")}


def test_no_doc_calls_grounding_a_probability_or_gates_on_grounded_rate_alone():
    """docs/metrics.md said "`grounding` is a probability" (its calibration section) and gave `{"grounded_rate_ci_low":
    ">= 0.5"}` alone as its example gate rule."""
    for name, text in _docs().items():
        prose = " ".join(text.split())
        assert not re.search(r"`grounding` is a (calibrated )?probability", prose), name
        # a rule written as a gate takes it ({"metric": ">= x", ...}), in braces or in a code span
        for rules in re.findall(r"\{[^{}]*\"grounded_rate\w*\"\s*:[^{}]*\}|`[^`{}]*\"grounded_rate\w*\"\s*:[^`{}]*`", prose):
            keys = re.findall(r"[\"']([\w/]+)[\"']\s*:", rules)
            assert any("grounded" not in key and "grounding" not in key for key in keys), (name, rules)


def test_reproduce_study_s_table_names_the_data_grounded_is_calibrated_on(tmp_path, monkeypatch, capsys):
    """`examples/reproduce_study.py --grounding-only` printed and wrote (`--out`) a table whose only faithfulness
    figures were `grounding` and `grounded`, with nothing saying what they hold on."""
    import importlib.util
    import sys

    from mlflow_helpers import frame

    spec = importlib.util.spec_from_file_location("reproduce_study_label", ROOT / "examples" / "reproduce_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = pd.DataFrame({"candidate": ["a"], "grounding [95% CI]": ["0.448"], "grounded [95% CI]": ["0.125 [0.003, 0.527]"]})
    by_category = pd.DataFrame({"candidate": ["a"], "category": ["sport"], "alignment": [None], "richness": [None], "grounding": [0.448]})
    result = SimpleNamespace(table=table, by_category=by_category, judge_failures={}, cut_off={}, warnings={}, comparison_refused=None,
                             comparison=None, run_ids={}, experiment_id="1")
    monkeypatch.setattr(module, "run_study", lambda *args, **kwargs: result)
    monkeypatch.setattr(module, "local_store", lambda folder: "sqlite:///unused.db")
    data, out = tmp_path / "articles.jsonl", tmp_path / "study.md"
    frame().drop(columns=["summary"]).to_json(data, orient="records", lines=True)
    monkeypatch.setattr(sys, "argv", ["reproduce_study.py", "--data", str(data), "--grounding-only", "--candidate", "a=m@http://127.0.0.1:9/v1",
                                      "--out", str(out)])
    assert module.main() == 0
    written = out.read_text().splitlines()
    below = written[written.index(next(line for line in written if "0.125 [0.003, 0.527]" in line)) + 1]
    assert below == f"(grounding, grounded: {calibration_note()})" and calibrated_on() in below
    assert below in capsys.readouterr().out
