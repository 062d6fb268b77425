"""The grounding model's training export, and its measurement against people (``mgm meta-eval --grounding-only``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlflow_genai_metrics.grounding import ROW_FEATURES
from mlflow_genai_metrics.grounding.model import GroundingModel
from mlflow_genai_metrics.meta_evaluation import evaluation_rows, grounding_meta_evaluate, load_labelled, untrained_rule_scores

# The training script is a development script outside the package (scripts/, not in the wheel): loaded by its path.
_SPEC = importlib.util.spec_from_file_location("train_grounding", Path(__file__).resolve().parents[1] / "scripts" / "train_grounding.py")
train_grounding = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(train_grounding)
export_model, monotonic_constraints = train_grounding.export_model, train_grounding.monotonic_constraints

SOURCE = "The council approved a budget of 45 million pounds on Tuesday. The mayor said it pays for two schools."


def test_exported_trees_score_as_scikit_learn_does_including_missing_values():
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    width = len(ROW_FEATURES)  # export_model names the package's features
    features = rng.random((120, width))
    labels = (features[:, 0] + features[:, 3] > 1).astype(int)
    features[::7, 3] = np.nan  # trained with missing values: each split learns where they go
    fitted = HistGradientBoostingClassifier(max_iter=15, max_leaf_nodes=6, random_state=0).fit(features, labels)
    spec = export_model(fitted)
    spec.update(threshold=0.5, suspect={"support_low": 0.1, "support_high": 0.9}, calibration={"a": 1.0, "b": 0.0})
    loaded = GroundingModel.from_dict(json.loads(json.dumps(spec)), "grounding:test")  # through JSON text
    probe = rng.random((50, width))
    probe[::3, 3] = np.nan
    assert np.max(np.abs(loaded.predict(probe) - fitted.predict_proba(probe)[:, 1])) <= 1e-12


def test_error_detectors_may_only_lower_the_score():
    signs = dict(zip(ROW_FEATURES, monotonic_constraints()))
    assert signs["novel_numbers_max"] == signs["negation_added_sum"] == signs["antonym_flip_max"] == -1
    assert signs["pair_cooccurrence_min"] == signs["order_support_mean"] == signs["meaning_support_min"] == 1
    assert signs["content_support_min"] == signs["sentences"] == 0


def test_untrained_rule_is_the_weakest_sentences_share_and_zero_with_a_new_number():
    rule = untrained_rule_scores([SOURCE] * 3, [
        "The council approved a budget on Tuesday.",
        "The council approved a budget. The mayor resigned in disgrace.",
        "The council approved a budget of 60 million pounds.",
    ])
    assert rule[0] == 1.0
    assert rule[1] == pytest.approx(1 / 3)  # mayor found; resigned, disgrace not
    assert rule[2] == 0.0


def labelled(tmp_path, split: str = "test") -> pd.DataFrame:
    summaries = [("The council approved a budget of 45 million pounds on Tuesday.", 1.0),
                 ("The mayor said the budget pays for two schools.", 1.0),
                 ("The council rejected a budget of 90 million pounds on Friday.", 0.0),
                 ("The Prime Minister praised the football club in Parliament.", 0.0)]
    rows = [{"id": f"r{i}", "source": SOURCE, "summary": s, "label": label, "split": split, "domain": "news" if i % 2 else "sport",
             "label_scale": "share of summary sentences judged supported, [0,1]"} for i, (s, label) in enumerate(summaries * 2)]
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return load_labelled(path)


def test_training_splits_are_never_measured(tmp_path):
    frame = labelled(tmp_path, split="valid")
    assert evaluation_rows(frame, "frank").empty  # every row is FRANK's training split
    with pytest.raises(ValueError, match="trained the grounding model"):
        evaluation_rows(frame, "frank", "valid")
    assert len(evaluation_rows(frame, "qags_xsum")) == 8


def test_grounding_meta_evaluate_measures_the_shipped_model_and_the_rule(tmp_path):
    report = grounding_meta_evaluate(labelled(tmp_path), by="domain")
    m = report.metrics
    assert m["rows"] == 8 and m["grounding_auc"] == 1.0 and m["grounding_spearman"] > 0.8
    assert {"grounding_balanced_accuracy", "rule_auc", "rule_balanced_accuracy", "rule_spearman", "grounded_rate"} <= set(m)
    assert list(report.groups["domain"]) == ["news", "sport"] and report.model_tag.startswith("grounding:v2-")


def test_mgm_meta_eval_grounding_only_needs_no_judge(tmp_path, capsys):
    from mlflow_genai_metrics.cli import main as mgm

    frame = labelled(tmp_path)
    path = tmp_path / "qags_xsum.jsonl"
    frame.drop(columns=["human_binary", "human_graded"]).to_json(path, orient="records", lines=True)
    assert mgm(["meta-eval", str(path), "--grounding-only", "--no-log"]) == 0  # no judge model or endpoint configured
    out = capsys.readouterr().out
    assert "grounding_auc                    1.000" in out and "grounding model grounding:v2-" in out
    assert "reliability" in out and "consistent_rate" in out and "0.9-1.0" in out  # the reliability table, printed


def test_mgm_meta_eval_grounding_only_logs_its_report_as_a_run(tmp_path, mlflow_store, capsys):
    import mlflow
    from mlflow.tracking import MlflowClient

    from mlflow_genai_metrics.cli import main as mgm
    from mlflow_genai_metrics.grounding import model_tag
    from mlflow_genai_metrics.signature import parse_signature

    labelled(tmp_path)
    experiment_id = mlflow.create_experiment("mgm-meta-eval", artifact_location=(tmp_path / "meta").as_uri())
    assert mgm(["meta-eval", str(tmp_path / "labelled.jsonl"), "--grounding-only", "--tracking-uri", mlflow_store]) == 0
    client = MlflowClient()
    [run] = client.search_runs([experiment_id])
    assert run.info.run_id in capsys.readouterr().out
    assert run.data.metrics["grounding_auc"] == 1.0 and run.data.metrics["rows"] == 8
    assert run.data.params["mgm.meta.data"] == "labelled.jsonl" and run.data.params["mgm.meta.mode"] == "grounding"
    grounding = parse_signature(run.data.tags["mgm.signature"])["grounding"]
    assert grounding.startswith("v2-") and model_tag().endswith(grounding)  # the model file's tag
    confusion = client.load_table(experiment_id, "mgm/meta_confusion.json", run_ids=[run.info.run_id]).set_index("people")
    assert int(confusion.to_numpy().sum()) == 8 and list(confusion.columns) == ["grounding: not grounded", "grounding: grounded"]
    assert len(client.load_table(experiment_id, "mgm/meta_groups.json", run_ids=[run.info.run_id])) == 2  # per domain
    reliability = client.load_table(experiment_id, "mgm/meta_reliability.json", run_ids=[run.info.run_id])
    assert len(reliability) == 10 and reliability["rows"].sum() == 8  # every tenth of grounding, every scored row
