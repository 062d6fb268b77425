"""Comparing runs, the registration gate, the candidate-model wrapper, the full loop and the CLI."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass

import mlflow
import numpy as np
import pandas as pd
import pytest
from conftest import SECRET_KEY, copy_mlflow_database
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, CONTRADICTIONS, Endpoint, frame

from mlflow_genai_metrics import SummarizerModel, compare_runs, register_if_passing
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.paired import MIN_PAIRED_PROPORTION_ROWS
from mlflow_genai_metrics.summarization import SignatureMismatchError
from mlflow_genai_metrics.testing import ScriptedJudgeServer
from mlflow_genai_metrics.tracking import log_results, summarization_metrics, summarization_scorers


def evaluate_candidate(server, model_name: str, *, judge=None, run_name=None) -> tuple[str, str]:
    """Log a SummarizerModel for ``model_name`` and evaluate it on the classic path; return (run id, model uri)."""
    judge = judge or judge_for(server)
    with mlflow.start_run(run_name=run_name or model_name) as run:
        info = SummarizerModel(model_name, server.base_url, input_col="text").log(name="summarizer")
        mlflow.models.evaluate(
            model=info.model_uri,
            data=frame().drop(columns=["summary"]),
            targets="reference",
            extra_metrics=summarization_metrics(judge, source_col="text", id_col="id", category_col="category"),
        )
    return run.info.run_id, info.model_uri


# Evaluated runs are shared by the tests of this module (an evaluation costs seconds): one store, one endpoint, and
# a registered model name per test, so that no test sees another's registrations.


@contextlib.contextmanager
def isolated_environment(tmp_path_factory):
    """conftest's per-test isolation, for the module-wide set-up (which runs before it), with the candidates' key."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("MGM_JUDGE_MODEL", "MGM_JUDGE_BASE_URL", "OPENAI_BASE_URL"):
            patch.delenv(name, raising=False)
        patch.setenv("MGM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mgm-cache"))
        patch.setenv("OPENAI_API_KEY", SECRET_KEY)  # what a deployed SummarizerModel reads
        yield patch


@dataclass(frozen=True)
class SharedStore:
    uri: str
    experiment_id: str

    def activate(self) -> None:
        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)
        mlflow.set_experiment(experiment_id=self.experiment_id)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory, migrated_mlflow_database):
    folder = tmp_path_factory.mktemp("shared-store")
    uri = copy_mlflow_database(migrated_mlflow_database, folder / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    yield SharedStore(uri, mlflow.create_experiment("mgm-tests", artifact_location=(folder / "artifacts").as_uri()))
    mlflow.set_tracking_uri("")


@pytest.fixture(scope="module")
def shared_endpoint():
    with ScriptedJudgeServer(Endpoint(), models=Endpoint.models) as server:
        yield server


@pytest.fixture
def store(shared_store, monkeypatch):
    """The shared store as this test's tracking store and registry (as ``mlflow_store`` makes a fresh one)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", shared_store.uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", shared_store.uri)
    shared_store.activate()
    yield shared_store.uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri("")


@pytest.fixture
def endpoint(shared_endpoint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # what a deployed SummarizerModel reads
    return shared_endpoint


@pytest.fixture
def registered_name(request) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[-64:]


def shared_run(store: SharedStore, tmp_path_factory, server, model_name: str, **options) -> tuple[str, str]:
    with isolated_environment(tmp_path_factory):
        store.activate()
        return evaluate_candidate(server, model_name, **options)


@pytest.fixture(scope="module")
def good_run(shared_store, shared_endpoint, tmp_path_factory) -> tuple[str, str]:
    return shared_run(shared_store, tmp_path_factory, shared_endpoint, "good-summarizer")


@pytest.fixture(scope="module")
def bad_run(shared_store, shared_endpoint, tmp_path_factory) -> tuple[str, str]:
    return shared_run(shared_store, tmp_path_factory, shared_endpoint, "bad-summarizer")


@pytest.fixture(scope="module")
def bad_again_run(shared_store, shared_endpoint, tmp_path_factory) -> tuple[str, str]:
    """The bad summarizer evaluated a second time: a candidate exactly as good as the first."""
    return shared_run(shared_store, tmp_path_factory, shared_endpoint, "bad-summarizer", run_name="bad again")


@pytest.fixture(scope="module")
def other_judge_run(shared_store, shared_endpoint, tmp_path_factory) -> tuple[str, str]:
    """The good summarizer judged with another judge setting (a seed): a signature that differs."""
    return shared_run(shared_store, tmp_path_factory, shared_endpoint, "good-summarizer", judge=judge_for(shared_endpoint, seed=3))


def registered(name: str) -> list:
    return MlflowClient().search_registered_models(filter_string=f"name = '{name}'")


def champion_version(name: str) -> str:
    return str(MlflowClient().get_model_version_by_alias(name, "champion").version)


def test_a_logged_summarizer_model_pins_the_installed_version_of_each_dependency(store, good_run):
    from importlib.metadata import version
    from pathlib import Path

    requirements = Path(mlflow.pyfunc.get_model_dependencies(good_run[1])).read_text().split()
    for name in ("mlflow", "openai", "pandas", "pydantic", "sacrebleu", "tenacity"):
        assert f"{name}=={version(name)}" in requirements, requirements
    assert all("==" in requirement for requirement in requirements), requirements


def test_a_logged_summarizer_model_records_the_version_of_the_code_it_carries(store, good_run):
    import mlflow_genai_metrics

    info = mlflow.models.get_model_info(good_run[1])
    assert info.metadata["mlflow_genai_metrics_version"] == mlflow_genai_metrics.__version__


def test_compare_runs_tests_each_run_against_the_first_and_logs_a_comparison_run_on_request(store, good_run, bad_run):
    (good, _), (bad, _) = good_run, bad_run
    table = compare_runs([good, bad], log=True)
    alignment = table[(table["run_id"] == bad) & (table["metric"] == "alignment")].iloc[0]
    assert alignment["value"] == 0.5 and alignment["difference_vs_first"] == -0.5
    assert len(ARTICLES) < MIN_PAIRED_PROPORTION_ROWS and pd.isna(alignment["difference_ci_high"])  # too few pairs for Tango's
    assert alignment["pairs_used"] == len(ARTICLES) and alignment["pairs_dropped_for_errors"] == 0
    first = table[(table["run_id"] == good) & (table["metric"] == "alignment")].iloc[0]
    assert first["value"] == 1.0 and pd.isna(first["difference_vs_first"])
    comparison = MlflowClient().get_run(table.attrs["comparison_run_id"])
    assert comparison.data.tags["mgm.compared_runs"] == f"{good},{bad}"
    paths = {a.path for a in MlflowClient().list_artifacts(comparison.info.run_id, "mgm/plots")}
    assert paths == {"mgm/plots/alignment_vs_richness.png", "mgm/plots/metrics.png", "mgm/plots/categories.png"}


def runs_in(experiment_id: str) -> set[str]:
    return {run.info.run_id for run in MlflowClient().search_runs([experiment_id])}


def test_compare_runs_logs_nothing_unless_asked(store, good_run, bad_run, shared_store):
    before = runs_in(shared_store.experiment_id)
    table = compare_runs([good_run[0], bad_run[0]])
    assert "comparison_run_id" not in table.attrs and runs_in(shared_store.experiment_id) == before


def test_compare_runs_takes_each_run_once(store, good_run, bad_run):
    """[A, B, A] compared A with itself: its rows got a difference of 0, a test and pair counts."""
    with pytest.raises(ValueError, match=f"compare_runs takes each run once; given more than once: {good_run[0]}"):
        compare_runs([good_run[0], bad_run[0], good_run[0]])


def test_compare_runs_refuses_runs_judged_with_different_settings(store, good_run, other_judge_run):
    with pytest.raises(SignatureMismatchError, match=r"seed: \S+ != 3"):
        compare_runs([good_run[0], other_judge_run[0]])


def test_compare_runs_of_different_judges_on_request_marks_the_comparison_mixed(store, good_run, other_judge_run):
    table = compare_runs([good_run[0], other_judge_run[0]], allow_mixed_judges=True, log=True)
    assert table[table["run_id"] == other_judge_run[0]]["note"].str.startswith("MIXED JUDGES").all()
    assert MlflowClient().get_run(table.attrs["comparison_run_id"]).data.tags["mgm.note"].startswith("MIXED JUDGES")


def test_the_gate_registers_on_pass_and_moves_the_alias(store, good_run, registered_name):
    run_id, uri = good_run
    result = register_if_passing(uri, registered_name, run_id=run_id, rules={"alignment": ">= 0.9", "alignment_ci_low": ">= 0.5", "rougeL": ">= 0.3"})
    assert result.passed and result.registered_version == "1" and result.alias_moved
    version = MlflowClient().get_model_version_by_alias(registered_name, "champion")
    assert str(version.version) == "1"
    assert version.tags["mgm.gate.rule.alignment"] == ">= 0.9 actual 1 passed"
    assert version.tags["mgm.signature"].startswith("judge:scripted-judge") and version.tags["mgm.evaluation_run_id"] == run_id


def test_the_gate_tags_each_rule_with_its_threshold_and_actual_value_under_keys_without_spaces(first_candidate, good_run, registered_name):
    run_id, uri = good_run
    rules = {"alignment_ci_low": ">= 0.5", "defect_rate/contradiction": "<= 0.05"}
    assert register_if_passing(uri, registered_name, run_id=run_id, rules=rules).passed
    tags = MlflowClient().get_model_version(registered_name, "2").tags
    assert tags["mgm.gate.rule.defect_rate/contradiction"] == "<= 0.05 actual 0 passed"
    assert re.fullmatch(r">= 0\.5 actual 0\.\d+ passed", tags["mgm.gate.rule.alignment_ci_low"])
    assert [key for key in tags if " " in key] == []  # the champion rule's tag key: tests/test_gate_decisions.py


def test_the_registered_version_describes_the_run_the_rules_with_their_values_and_the_signature(store, good_run, registered_name):
    run_id, uri = good_run
    register_if_passing(uri, registered_name, run_id=run_id, rules=["alignment>=0.9", "rougeL>=0.3"])
    version = MlflowClient().get_model_version(registered_name, "1")
    assert f"evaluation run `{run_id}` (good-summarizer) passed every rule" in version.description
    assert "- `alignment >= 0.9`: actual 1\n" in version.description
    assert re.search(r"- `rougeL >= 0\.3`: actual 0\.\d+", version.description)
    assert f"Judge signature: `{version.tags['mgm.signature']}`" in version.description


@pytest.mark.parametrize(
    ("model_uri", "message"),
    [
        ("models:/m-0123456789abcdef0123456789abcdef", "names no model: Logged model with ID 'm-0123456789abcdef0123456789abcdef' not found"),
        ("models:/no-such-model@champion", "names no model: Registered Model with name=no-such-model not found"),
        ("models:/summarizer/1/extra", "malformed model URI 'models:/summarizer/1/extra'"),
        ("runs:/0123456789abcdef0123456789abcdef/summarizer", "names no model: Run with id=0123456789abcdef0123456789abcdef not found"),
    ],
    ids=["logged-model", "alias", "malformed", "run"],
)
def test_a_model_uri_naming_no_model_is_an_error_before_any_rule_is_evaluated(store, bad_run, registered_name, model_uri, message):
    with pytest.raises(ValueError, match=re.escape(message)):  # the rule would fail: the URI is found first
        register_if_passing(model_uri, registered_name, run_id=bad_run[0], rules={"alignment": ">= 0.9"})
    assert registered(registered_name) == []


def test_the_gate_registers_nothing_on_fail_and_says_why(store, bad_run, registered_name):
    run_id, uri = bad_run
    result = register_if_passing(uri, registered_name, run_id=run_id, rules=["alignment>=0.9", "defect_rate/contradiction<=0.05", "richness>=1"])
    assert not result.passed and result.registered_version is None
    assert [str(o.rule) for o in result.failed] == ["alignment >= 0.9", "defect_rate/contradiction <= 0.05"]
    assert result.failed[0].actual == 0.5
    assert "FAIL alignment >= 0.9: actual 0.5" in str(result)
    assert registered(registered_name) == []


@pytest.mark.parametrize(
    ("rules", "message"),
    [({"alignment": "at least 0.9"}, "malformed rule for 'alignment'"), (["alignment is high"], "malformed rule")],
    ids=["mapping", "text"],
)
def test_a_malformed_rule_is_an_error_before_anything_is_registered(store, good_run, registered_name, rules, message):
    run_id, uri = good_run
    with pytest.raises(ValueError, match=message):
        register_if_passing(uri, registered_name, run_id=run_id, rules=rules)
    assert registered(registered_name) == []


def test_a_rule_on_an_unknown_metric_is_an_error_before_anything_is_registered(store, good_run, registered_name):
    run_id, uri = good_run
    with pytest.raises(ValueError, match=r"unknown metric\(s\) in the gate's rules: 'alignmnet' \(closest: alignment") as raised:
        register_if_passing(uri, registered_name, run_id=run_id, rules={"alignmnet": ">= 0.9"})
    assert len(str(raised.value)) < 250  # the closest names, not the run's 80 metrics
    assert registered(registered_name) == []


@pytest.fixture
def first_candidate(store, bad_run, registered_name):
    """The bad summarizer gated with ``beat_champion`` while there is no champion yet: it becomes the champion."""
    run_id, uri = bad_run
    return register_if_passing(uri, registered_name, run_id=run_id, rules={"richness": ">= 1"}, beat_champion=True)


def test_beat_champion_registers_the_first_candidate_when_there_is_no_champion(first_candidate, registered_name):
    assert first_candidate.passed and first_candidate.registered_version == "1"
    assert champion_version(registered_name) == "1"


def test_beat_champion_refuses_a_candidate_no_better_than_the_champion(first_candidate, bad_again_run, registered_name):
    run_id, uri = bad_again_run
    again = register_if_passing(uri, registered_name, run_id=run_id, rules={"richness": ">= 1"}, beat_champion=True)
    assert not again.passed and again.registered_version is None and "difference +0 " in again.failed[0].detail
    assert champion_version(registered_name) == "1"


def test_beat_champion_refuses_a_candidate_judged_under_another_judge(first_candidate, other_judge_run, registered_name):
    run_id, uri = other_judge_run
    refused = register_if_passing(uri, registered_name, run_id=run_id, rules={"richness": ">= 1"}, beat_champion=True)
    assert not refused.passed and "refused: judge signatures differ" in refused.failed[0].detail
    assert champion_version(registered_name) == "1"


def test_beat_champion_refuses_a_gain_on_too_few_pairs_to_test(first_candidate, good_run, registered_name):
    # 3 of the 6 articles fixed: an exact one-sided test of 3 discordant pairs cannot go below 1/8. (A significant
    # gain that moves the alias: tests/test_gate_decisions.py, on 30 rows.)
    run_id, uri = good_run
    better = register_if_passing(uri, registered_name, run_id=run_id, rules={"richness": ">= 1"}, beat_champion=True)
    assert not better.passed and better.failed[0].detail.startswith("too few pairs to test (3 of 6 pairs differ)")
    assert champion_version(registered_name) == "1"


def test_the_full_loop_log_evaluate_both_paths_compare_gate_register(endpoint, mlflow_store, tmp_path):
    judge = judge_for(endpoint, cache_dir=tmp_path / "cache")
    version_a, uri_a = evaluate_candidate(endpoint, "bad-summarizer", judge=judge)
    version_b, uri_b = evaluate_candidate(endpoint, "good-summarizer", judge=judge)
    calls_after_classic = endpoint.count(purpose="ClaimVerdicts")
    model_b = mlflow.pyfunc.load_model(uri_b)
    scorers = summarization_scorers(judge)
    genai = mlflow.genai.evaluate(
        data=[{"inputs": {"text": text, "id": row_id, "category": category}} for row_id, category, text in ARTICLES],
        predict_fn=lambda text, id, category: model_b.predict(pd.DataFrame({"text": [text]}))[0],
        scorers=scorers,
    )
    log_results(genai.run_id, scorers)  # the plain run's full report
    assert endpoint.count(purpose="ClaimVerdicts") == calls_after_classic  # same rows, same judge: from the cache
    genai_metrics = MlflowClient().get_run(genai.run_id).data.metrics
    assert genai_metrics["alignment"] == MlflowClient().get_run(version_b).data.metrics["alignment"] == 1.0
    table = compare_runs([version_a, version_b])
    gain = table[(table["run_id"] == version_b) & (table["metric"] == "alignment")].iloc[0]
    # 3 of 6 articles fixed: a gain no exact test of 3 discordant pairs can call significant
    assert gain["difference_vs_first"] == 0.5 and gain["better"] == "this"
    assert np.isnan(gain["p_value"]) and gain["metric_note"] == "too few pairs to test (3 of 6 pairs differ)"
    assert not register_if_passing(uri_a, "summarizer", run_id=version_a, rules={"alignment": ">= 0.9"}).passed
    result = register_if_passing(uri_b, "summarizer", run_id=version_b, rules={"alignment": ">= 0.9"})
    assert result.passed and str(MlflowClient().get_model_version_by_alias("summarizer", "champion").version) == "1"


@pytest.fixture(scope="module")
def cli_evaluations(shared_store, shared_endpoint, tmp_path_factory) -> dict[str, tuple[int, str]]:
    """``mgm evaluate`` on a file of good summaries (with references) and on one of bad ones: (exit code, output)."""
    folder = tmp_path_factory.mktemp("cli-data")
    frame().to_csv(folder / "good.csv", index=False)
    bad = frame().assign(summary=CONTRADICTIONS["no"] + list(frame()["summary"][3:]))
    bad.to_json(folder / "bad.jsonl", orient="records", lines=True)
    evaluations = {}
    with isolated_environment(tmp_path_factory) as patch:
        patch.setenv("MGM_JUDGE_MODEL", "scripted-judge")
        patch.setenv("MGM_JUDGE_BASE_URL", shared_endpoint.base_url)
        for name, options in (("good", ["good.csv", "--reference-col", "reference"]), ("bad", ["bad.jsonl"])):
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                code = mgm(["evaluate", str(folder / options[0]), *options[1:], "--id-col", "id", "--tracking-uri", shared_store.uri, "--experiment", "cli"])
            evaluations[name] = (code, output.getvalue())
    return evaluations


def cli_run_id(evaluation: tuple[int, str]) -> str:
    return evaluation[1].split("run ")[1].split()[0]


def test_mgm_evaluate_logs_a_run_with_the_judge_s_metrics_and_exits_0(store, cli_evaluations):
    code, output = cli_evaluations["good"]
    assert code == 0, output
    metrics = MlflowClient().get_run(cli_run_id(cli_evaluations["good"])).data.metrics
    assert metrics["alignment"] == 1.0 and "rougeL" in metrics  # judged, and compared with the references
    assert "alignment" in output


def test_mgm_evaluate_exits_2_naming_a_missing_column(store, tmp_path, capsys):
    data = tmp_path / "data.csv"
    frame().to_csv(data, index=False)
    assert mgm(["evaluate", str(data), "--source-col", "article", "--tracking-uri", store, "--experiment", "cli"]) == 2
    assert "has no column ['article']" in capsys.readouterr().err


def test_mgm_compare_with_log_logs_a_comparison_run_prints_its_id_and_exits_0(store, cli_evaluations, capsys):
    runs = [cli_run_id(cli_evaluations["good"]), cli_run_id(cli_evaluations["bad"])]
    assert mgm(["compare", *runs, "--log", "--tracking-uri", store]) == 0
    comparison_run = capsys.readouterr().out.split("comparison logged as run ")[1].split()[0]
    assert MlflowClient().get_run(comparison_run).data.tags["mgm.compared_runs"] == ",".join(runs)


def test_mgm_compare_without_log_logs_nothing_and_exits_0(store, cli_evaluations, capsys):
    runs = [cli_run_id(cli_evaluations["good"]), cli_run_id(cli_evaluations["bad"])]
    experiment = MlflowClient().get_run(runs[0]).info.experiment_id
    before = runs_in(experiment)
    assert mgm(["compare", *runs, "--tracking-uri", store]) == 0
    assert "comparison logged" not in capsys.readouterr().out and runs_in(experiment) == before


def test_mgm_gate_exits_1_and_registers_nothing_when_a_rule_fails(store, bad_run, registered_name, capsys):
    gate = ["gate", bad_run[0], "--model-uri", bad_run[1], "--name", registered_name, "--tracking-uri", store]
    assert mgm([*gate, "--rule", "alignment>=0.9"]) == 1
    assert "gate failed: nothing registered" in capsys.readouterr().out
    assert registered(registered_name) == []


def test_mgm_gate_exits_0_and_registers_when_every_rule_passes(store, good_run, registered_name):
    gate = ["gate", good_run[0], "--model-uri", good_run[1], "--name", registered_name, "--tracking-uri", store]
    assert mgm([*gate, "--rule", "alignment>=0.9"]) == 0
    assert champion_version(registered_name) == "1"


def test_a_model_the_run_did_not_evaluate_is_refused_before_anything_is_registered(store, cli_evaluations, good_run, bad_run,
                                                                                   registered_name, capsys):
    """A CI job that mixes two candidates up: the good summarizer's run with the bad summarizer's model (or a run of
    outputs made elsewhere with some model) registered a model never evaluated on the strength of another's run."""
    for run_id in (good_run[0], cli_run_id(cli_evaluations["good"])):
        gate = ["gate", run_id, "--model-uri", bad_run[1], "--name", registered_name, "--tracking-uri", store]
        assert mgm([*gate, "--rule", "alignment>=0.9"]) == 2
        err = capsys.readouterr().err
        assert f"model URI {bad_run[1]!r} is not the model run {run_id} evaluated (logged in run {bad_run[0]}" in err
    assert registered(registered_name) == []


def test_mgm_gate_exits_2_on_a_malformed_rule(store, good_run, registered_name, capsys):
    gate = ["gate", good_run[0], "--model-uri", good_run[1], "--name", registered_name, "--tracking-uri", store]
    assert mgm([*gate, "--rule", "alignment>>0.9"]) == 2
    assert "malformed rule" in capsys.readouterr().err
