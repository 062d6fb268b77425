"""A run's figures are its report's, not only the headline figures it logs as run metrics (issue 25).

A default run logs under 40 run metrics; ``mgm/report.json`` holds every figure, and ``load_run``, the gate's rules
and ``compare_runs`` read them all (``run_figures``), so a rule or a comparison on ``claim_support_rate`` or
``defect_rate/unverifiable`` works on a default run. Runs are real MLflow runs in a SQLite store, judged by the
scripted server."""

from __future__ import annotations

import json
import os

import mlflow
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import SummarizerModel, evaluate_summaries, judge_summaries, register_if_passing
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.summarization.metrics import RUN_METRICS
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, compare_runs, load_run, log_result
from mlflow_genai_metrics.tracking.compare import run_figures
from mlflow_genai_metrics.tracking.run_logging import loggable_metrics

GOOD = "The council approved budget {i}."
VAGUE = "Aliens visited town {i}."  # the source neither supports nor contradicts it: idk
BEYOND_BUDGET = ("claim_support_rate", "defect_rate/unverifiable", "defect_rate/empty")


def _article(i: int) -> str:
    return f"Article {i}. The council approved budget {i}. The mayor welcomed decision {i}."


def _logged(server, summaries: list[str], *, run_name: str, **logging) -> tuple[str, str]:
    """A run holding a SummarizerModel and the judged summaries of articles 0, 1, ...: (run id, model URI)."""
    server.script = SummarizationJudgeScript(verdicts={VAGUE.format(i=i): "idk" for i in range(len(summaries))})
    with mlflow.start_run(run_name=run_name) as run:
        info = SummarizerModel(run_name, "http://127.0.0.1:9/v1", input_col="text").log(name="summarizer")
        result = judge_summaries([_article(i) for i in range(len(summaries))], summaries, judge=judge_for(server),
                                 ids=[f"a{i}" for i in range(len(summaries))], coverage=False, grounding=False)
        log_result(result, log_metrics=True, **logging)
    return run.info.run_id, info.model_uri


def _report(run_id: str) -> dict[str, float | None]:
    return json.loads(mlflow.artifacts.load_text(f"runs:/{run_id}/mgm/report.json"))["metrics"]


def _half_vague() -> list[str]:
    """4 supported summaries and 2 unverifiable ones: defect_rate/unverifiable 1/3, claim_support_rate 2/3."""
    return [GOOD.format(i=i) if i < 4 else VAGUE.format(i=i) for i in range(6)]


def test_a_default_run_logs_under_40_metrics_and_its_report_has_every_figure(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    data = [
        {"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text),
         "expectations": {"expected_response": first_sentence(text) + " " + text.split(". ")[1]}}
        for row_id, _, text in ARTICLES
    ]
    evaluation = evaluate_summaries(data, judges=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    run = MlflowClient().get_run(evaluation.run_id)
    assert len(run.data.metrics) < 40 and set(RUN_METRICS) <= set(run.data.metrics)
    report = _report(evaluation.run_id)
    assert set(report) == set(evaluation.metrics)  # every figure, the undefined ones as null
    assert {*BEYOND_BUDGET, "rouge1", "bleu", "judge/prompt_tokens"} <= set(report) - set(run.data.metrics)
    figures = run_figures(run)
    assert figures == pytest.approx({**run.data.metrics, **loggable_metrics(evaluation.metrics)})
    assert load_run(evaluation.run_id).metrics == figures


def test_a_gate_rule_on_a_figure_the_run_does_not_log_is_decided_by_the_report(scripted_server, mlflow_store):
    run_id, uri = _logged(scripted_server(), _half_vague(), run_name="half vague")
    assert not set(BEYOND_BUDGET) & set(MlflowClient().get_run(run_id).data.metrics)
    report = _report(run_id)
    assert report["defect_rate/unverifiable"] == pytest.approx(1 / 3) and report["claim_support_rate"] == pytest.approx(2 / 3)

    failed = register_if_passing(uri, "summarizer", run_id=run_id, rules={"defect_rate/unverifiable": "<= 0.2", "claim_support_rate": ">= 0.6"})
    assert not failed.passed and [str(o.rule) for o in failed.failed] == ["defect_rate/unverifiable <= 0.2"]
    assert [o.actual for o in failed.outcomes] == [report["defect_rate/unverifiable"], report["claim_support_rate"]]

    passed = register_if_passing(uri, "summarizer", run_id=run_id, rules={"defect_rate/unverifiable": "<= 0.4", "claim_support_rate_n": "== 6"})
    assert passed.passed and passed.registered_version == "1"
    tags = MlflowClient().get_model_version("summarizer", "1").tags
    assert tags["mgm.gate.rule.defect_rate/unverifiable"] == "<= 0.4 actual 0.333333 passed"


def test_a_missing_interval_of_a_figure_the_run_does_not_log_says_how_many_rows_it_stands_on(scripted_server, mlflow_store):
    run_id, uri = _logged(scripted_server(), _half_vague(), run_name="six rows")
    gate = register_if_passing(uri, "summarizer", run_id=run_id, rules={"claim_support_rate_ci_low": ">= 0.5"})
    assert not gate.passed and gate.failed[0].detail.startswith("no interval: claim_support_rate stands on 6 rows")


def test_a_comparison_on_figures_the_runs_do_not_log(scripted_server, mlflow_store):
    server = scripted_server()
    first, _ = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="good")
    second, _ = _logged(server, _half_vague(), run_name="half vague")
    table = compare_runs([first, second], metrics=["defect_rate/unverifiable", "claim_support_rate"]).set_index(["run_name", "metric"])
    unverifiable = table.loc[("half vague", "defect_rate/unverifiable")]
    assert unverifiable["value"] == pytest.approx(1 / 3) and unverifiable["n"] == 6 and unverifiable["ci_low"] > 0
    assert unverifiable["difference_vs_first"] == pytest.approx(1 / 3) and unverifiable["test"] == "exact McNemar"
    assert table.loc[("half vague", "claim_support_rate"), "value"] == pytest.approx(2 / 3)
    assert table.loc[("good", "claim_support_rate"), "value"] == 1.0


def test_mgm_compare_shows_a_figure_the_runs_do_not_log_and_names_the_closest_for_a_typo(scripted_server, mlflow_store, capsys):
    server = scripted_server()
    first, _ = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="good")
    second, _ = _logged(server, _half_vague(), run_name="half vague")
    assert mgm(["compare", first, second, "--metric", "defect_rate/unverifiable", "--tracking-uri", mlflow_store]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["half", "vague", "defect_rate/unverifiable", "0.3333"] == next(line for line in lines if line[:2] == ["half", "vague"])[:4]
    with pytest.raises(ValueError, match=r"'defect_rate/unverifable' \(closest: defect_rate/unverifiable"):
        compare_runs([first, second], metrics=["defect_rate/unverifable"])


def test_the_report_wins_over_a_stale_run_metric_and_the_run_metrics_add_the_names_it_lacks(scripted_server, mlflow_store):
    """A run logged again (first with every figure as a run metric, then with the headline ones) keeps the first
    logging's other run metrics: its figures are the second report's. A figure the report leaves undefined (null)
    is missing, whatever an earlier logging left; a run metric the report does not name (the user's) stays."""
    server = scripted_server()
    run_id, _ = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="logged twice", all_metrics=True)
    # A Judge that asked nothing knows no response mode, and the run's signature param cannot change: this one has
    # found its mode (the same as the first logging's judge) before judging summaries that need no question.
    judge = judge_for(server)
    judge_summaries([_article(0)], [GOOD.format(i=0)], judge=judge, coverage=False, grounding=False)
    empty = judge_summaries([_article(i) for i in range(6)], [""] * 6, judge=judge, ids=[f"a{i}" for i in range(6)],
                            coverage=False, grounding=False)  # no claim anywhere: claim_support_rate undefined
    log_result(empty, run_id=run_id, log_metrics=True)
    MlflowClient().log_metric(run_id, "generation_error_rate", 0.25)
    run = MlflowClient().get_run(run_id)
    assert run.data.metrics["claim_support_rate"] == 1.0 and run.data.metrics["defect_rate/empty"] == 0.0  # stale
    figures = run_figures(run)
    assert "claim_support_rate" not in figures and figures["defect_rate/empty"] == 1.0
    assert figures["generation_error_rate"] == 0.25


def test_a_run_without_a_report_has_its_run_metrics_and_is_not_loaded(mlflow_store):
    with mlflow.start_run() as run:
        mlflow.log_metric("accuracy", 0.9)
    assert run_figures(MlflowClient().get_run(run.info.run_id)) == {"accuracy": 0.9}
    with pytest.raises(ValueError, match="has no mgm.signature tag"):
        load_run(run.info.run_id)


def test_the_gate_reads_each_run_s_report_once(scripted_server, mlflow_store, monkeypatch):
    server = scripted_server()
    champion, champion_uri = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="champion")
    assert register_if_passing(champion_uri, "summarizer", run_id=champion, rules={"claim_support_rate": ">= 0.9"}).passed
    candidate, uri = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="candidate")
    downloads: list[tuple[str, str]] = []
    download = MlflowClient.download_artifacts

    def counted(self, run_id, path, dst_path=None):
        downloads.append((run_id, path))
        return download(self, run_id, path, dst_path)

    monkeypatch.setattr(MlflowClient, "download_artifacts", counted)
    register_if_passing(uri, "summarizer", run_id=candidate, rules={"claim_support_rate": ">= 0.9"}, beat_champion=True)
    reports = sorted(run_id for run_id, path in downloads if path == "mgm/report.json")
    assert reports == sorted([candidate, champion])


@pytest.mark.parametrize("quiet", [True, False], ids=["ours", "the user's own setting"])
def test_compare_runs_and_the_gate_print_no_download_bars_unless_the_user_asks(scripted_server, mlflow_store, capfd, monkeypatch, quiet):
    server = scripted_server()
    first, _ = _logged(server, [GOOD.format(i=i) for i in range(6)], run_name="good")
    second, uri = _logged(server, _half_vague(), run_name="half vague")
    if quiet:
        monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    else:  # the control: MLflow's bar is there to be hidden
        monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "true")
    capfd.readouterr()
    compare_runs([first, second])
    printed = "".join(capfd.readouterr())
    assert ("Downloading artifacts" in printed) is not quiet
    assert not register_if_passing(uri, "summarizer", run_id=second, rules={"richness": ">= 9"}).passed
    assert register_if_passing(uri, "summarizer", run_id=second, rules={"richness": ">= 0"}).passed  # adds to the first's table
    printed = "".join(capfd.readouterr())
    assert ("Downloading artifacts" in printed) is not quiet, printed
    assert os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR") == (None if quiet else "true")


def test_the_evaluated_model_carries_the_run_s_headline_figures(scripted_server, mlflow_store):
    """Issue 46: the Models tab compares versions by their evaluation's headline figures (MLflow 3's model metrics)."""
    server = scripted_server()
    run_id, uri = _logged(server, _half_vague(), run_name="half vague")
    model_id = uri.removeprefix("models:/")
    model_metrics = {m.key: m.value for m in MlflowClient().get_logged_model(model_id).metrics}
    run_metrics = MlflowClient().get_run(run_id).data.metrics
    assert model_metrics["strict_alignment"] == run_metrics["strict_alignment"] == pytest.approx(4 / 6)
    assert "alignment" in model_metrics and not [k for k in model_metrics if k.endswith(("_ci_low", "_ci_high", "_n"))]
    assert all(m.run_id == run_id for m in MlflowClient().get_logged_model(model_id).metrics)
