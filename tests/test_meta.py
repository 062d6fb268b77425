"""Agreement with human labels: the statistics on known cases, the labelled files, and `mgm meta-eval`."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from conftest import SHARED_DATA
from helpers import judge_for

from mlflow_genai_metrics.meta_evaluation import agreement, load_labelled, meta_evaluate, stratified_labelled_sample
from mlflow_genai_metrics.testing import SummarizationJudgeScript

FAITHFULNESS = SHARED_DATA / "faithfulness"


def test_perfect_agreement_and_chance_agreement():
    metrics, confusion = agreement([1, 0, 1, 0], [1, 0, 1, 0], [1.0, 0.0, 0.8, 0.2], [1.0, 0.0, 0.9, 0.1])
    assert (metrics["balanced_accuracy"], metrics["cohen_kappa"], metrics["spearman"], metrics["kendall"]) == (1.0, 1.0, 1.0, 1.0)
    assert confusion.to_numpy().tolist() == [[2, 0], [0, 2]]
    always_no, _ = agreement([1, 0, 1, 0], [0, 0, 0, 0], [1.0, 0.0, 0.8, 0.2], [0.0, 0.0, 0.0, 0.0])
    assert always_no["balanced_accuracy"] == 0.5 and math.isnan(always_no["cohen_kappa"])  # one class: undefined, not 0
    assert math.isnan(always_no["spearman"])  # a constant judge has no rank correlation


def test_rows_the_judge_failed_on_are_left_out_and_counted():
    metrics, _ = agreement([1, 0, 1], [1, 0, float("nan")], [1.0, 0.0, 1.0], [1.0, 0.0, float("nan")])
    assert metrics["rows_compared"] == 2 and metrics["balanced_accuracy"] == 1.0


def labelled_set(tmp_path):
    rows = []
    for i in range(10):
        consistent = i % 2 == 0
        summary = f"The council approved budget {i}." if consistent else f"The council rejected budget {i}."
        rows.append({"id": f"p{i}", "source": f"Article {i}. The council approved budget {i}.", "summary": summary,
                     "label": 1.0 if consistent else 0.0})
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    verdicts = {r["summary"]: ("yes" if r["label"] else "no") for r in rows}
    return path, verdicts


def test_meta_evaluate_measures_a_judge_that_agrees_with_people(scripted_server, tmp_path):
    path, verdicts = labelled_set(tmp_path)
    server = scripted_server(SummarizationJudgeScript(verdicts=verdicts))
    report = meta_evaluate(load_labelled(path), judge=judge_for(server))
    assert report.metrics["balanced_accuracy"] == 1.0 and report.metrics["cohen_kappa"] == 1.0
    assert report.metrics["spearman"] == pytest.approx(1.0) and report.metrics["rows"] == 10
    assert server.count(purpose="ExtractedKeyPoints") == 0  # agreement needs claims and verification only
    figure = report.figure()
    assert figure.axes[0].get_xlabel() == "judge: aligned"


def test_mgm_meta_eval_prints_the_agreement_and_logs_nothing_with_no_log(scripted_server, tmp_path, monkeypatch, capsys, mlflow_store):
    import mlflow

    from mlflow_genai_metrics.cli import main as mgm

    path, verdicts = labelled_set(tmp_path)
    server = scripted_server(SummarizationJudgeScript(verdicts=verdicts))
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    assert mgm(["meta-eval", str(path), "--sample", "6", "--plot", str(tmp_path / "cm.png"), "--no-log"]) == 0
    out = capsys.readouterr().out
    # 6 of 6 agree: no zero-width [1.000, 1.000] (what it once printed) but the exact interval of so few pairs
    assert "cohen_kappa              1.000  [-0.595, 1.000]  n=6" in out
    assert "balanced_accuracy        1.000  [0.232, 1.000]  n=6" in out  # exact: each class's 3 of 3 at 97.5%, averaged
    assert (tmp_path / "cm.png").exists()
    assert "logged as run" not in out and mlflow.get_experiment_by_name("mgm-meta-eval") is None


def test_mgm_meta_eval_with_a_judge_that_fails_on_every_row_exits_1(scripted_server, tmp_path, monkeypatch, capsys, mlflow_store):
    """It exited 0 (CI passed on a dead judge), printing "undefined n=0: people's labels or the judge's verdicts are
    all of one class" and a bare nan."""
    from mlflow_genai_metrics.cli import main as mgm
    from mlflow_genai_metrics.testing import Reply

    path, _ = labelled_set(tmp_path)
    server = scripted_server(SummarizationJudgeScript(fault=lambda request, kind: Reply("this is not json")))
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))  # not the answers other tests had for these rows
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    assert mgm(["meta-eval", str(path), "--sample", "6", "--no-log"]) == 1
    said = capsys.readouterr()
    assert "mgm meta-eval: the judge failed on every row" in said.err
    assert "one class" not in said.out and " nan" not in said.out and "balanced_accuracy        undefined  n=0: no row to stand on" in said.out


def test_mgm_meta_eval_logs_its_report_as_a_run(scripted_server, tmp_path, monkeypatch, mlflow_store):
    import mlflow
    from mlflow.tracking import MlflowClient

    from mlflow_genai_metrics.cli import main as mgm

    path, verdicts = labelled_set(tmp_path)
    server = scripted_server(SummarizationJudgeScript(verdicts=verdicts))
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    experiment_id = mlflow.create_experiment("meta", artifact_location=(tmp_path / "meta").as_uri())
    assert mgm(["meta-eval", str(path), "--sample", "6", "--experiment", "meta"]) == 0
    [run] = MlflowClient().search_runs([experiment_id])
    assert run.data.metrics["cohen_kappa"] == 1.0 and run.data.metrics["balanced_accuracy_n"] == 6
    assert run.data.params["mgm.meta.data"] == "labelled.jsonl" and run.data.params["mgm.meta.sample"] == "6"
    assert run.data.tags["mgm.signature"].startswith("judge:scripted-judge|")
    confusion = MlflowClient().load_table(experiment_id, "mgm/meta_confusion.json", run_ids=[run.info.run_id])
    assert confusion.set_index("people").loc["people: consistent", "judge: aligned"] == 3


@pytest.mark.parametrize("name", ["frank.jsonl", "qags_cnndm.jsonl", "qags_xsum.jsonl", "summedits.jsonl"])
def test_the_shared_labelled_sets_load_with_binary_and_graded_labels(name):
    path = FAITHFULNESS / name
    if not path.exists():
        pytest.skip(f"the labelled sets are not at {FAITHFULNESS} (../shared/data beside the project)")
    frame = load_labelled(path)
    assert set(frame["human_binary"]) == {0, 1}
    assert frame["human_graded"].between(0, 1).all()
    sample = stratified_labelled_sample(frame, 40)
    assert len(sample) == 40 and set(sample["human_binary"]) == {0, 1}
    if name == "frank.jsonl":
        assert (frame["human_binary"] == pd.read_json(path, lines=True)["label_binary"]).all()


def test_mgm_meta_eval_refuses_a_deleted_experiment_before_judging_any_row(scripted_server, tmp_path, monkeypatch, mlflow_store, capsys):
    import mlflow

    from mlflow_genai_metrics.cli import main as mgm

    path, verdicts = labelled_set(tmp_path)
    server = scripted_server(SummarizationJudgeScript(verdicts=verdicts))
    monkeypatch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
    monkeypatch.setenv("MGM_JUDGE_BASE_URL", server.base_url)
    mlflow.delete_experiment(mlflow.create_experiment("meta", artifact_location=(tmp_path / "meta").as_uri()))
    assert mgm(["meta-eval", str(path), "--experiment", "meta"]) == 2
    assert "experiment 'meta' is deleted" in capsys.readouterr().err and server.count() == 0


def test_a_stratified_sample_has_exactly_n_rows_and_both_classes():
    """Rounding half to even gave 4 rows for --sample 5 at equal shares, and cutting the sorted rows to n dropped
    the only inconsistent row (the last) for --sample 3."""
    one_rare = pd.DataFrame({"human_binary": [1] * 9 + [0]})
    for n in range(2, 10):
        drawn = stratified_labelled_sample(one_rare, n)
        assert len(drawn) == n and set(drawn["human_binary"]) == {0, 1}, n
    for ones, zeros, n in ((5, 5, 5), (70, 30, 15), (3, 3, 3)):
        assert len(stratified_labelled_sample(pd.DataFrame({"human_binary": [1] * ones + [0] * zeros}), n)) == n
