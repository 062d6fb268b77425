"""``mgm evaluate`` through ``mlflow.genai.evaluate`` (issue 25): on a real SQLite store against the scripted
endpoint, the run has one trace per row with one card per judge, people's feedback on those traces reads back
through ``mgm agreement``, the run logs its headline figures (every one with ``--all-metrics``), links the candidate
model it evaluated, keeps to the judge's budget, and fails in one line when its rows do not add up."""

from __future__ import annotations

import re

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY
from mlflow.entities import AssessmentSource, AssessmentSourceType
from mlflow.tracking import MlflowClient
from mlflow_helpers import CONTRADICTIONS, Endpoint, frame
from run_traces import cards_per_row

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.testing import Fault
from mlflow_genai_metrics.tracking import load_run
from mlflow_genai_metrics.tracking.rows import ERROR_TAG

ALL_CARDS = ["claim_alignment", "grounding", "key_point_coverage"]


@pytest.fixture
def endpoint(scripted_server, mlflow_store, monkeypatch, tmp_path):
    """The scripted judge and candidates, named by mgm's environment."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                        "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    return server


def summaries(tmp_path, table: pd.DataFrame | None = None):
    path = tmp_path / "summaries.csv"
    (frame() if table is None else table).to_csv(path, index=False)
    return path


def evaluated(capsys, *options: str) -> tuple[str, str]:
    """``mgm evaluate OPTIONS --id-col id``, which must exit 0: (run id, printed output)."""
    code = mgm(["evaluate", *options, "--id-col", "id"])
    out = capsys.readouterr().out
    assert code == 0, out
    return re.search(r"^run ([0-9a-f]{32}) ", out, re.MULTILINE).group(1), out


@pytest.mark.parametrize(("options", "cards"), [([], ALL_CARDS), (["--no-coverage"], ["claim_alignment", "grounding"])])
def test_a_cli_run_has_one_trace_per_row_with_one_card_per_judge(endpoint, tmp_path, capsys, options, cards):
    run_id, out = evaluated(capsys, str(summaries(tmp_path)), "--run-name", "cli-genai", *options)
    assert cards_per_row(run_id) == {row_id: cards for row_id in frame()["id"]}
    assert MlflowClient().get_run(run_id).info.run_name == "cli-genai"
    assert out.startswith(f"run {run_id} (6 rows)")  # MLflow's own "Evaluation completed" block is not printed


def test_people_s_feedback_on_a_cli_run_s_traces_reads_back_through_mgm_agreement(endpoint, tmp_path, capsys):
    bad = frame().assign(summary=CONTRADICTIONS["no"] + list(frame()["summary"][3:]))  # the judge says no on 3 of 6
    run_id, _ = evaluated(capsys, str(summaries(tmp_path, bad)), "--no-coverage")
    people = dict(zip(bad["id"], ["no", "no", "yes", "yes", "yes", "yes"]))  # one "no" of the judge's they call "yes"
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        row_id = next(s for s in trace.data.spans if s.parent_id is None).inputs["id"]
        mlflow.log_feedback(trace_id=trace.info.trace_id, name="claim_alignment", value=people[row_id],
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="alice"))
    assert mgm(["agreement", "--run-id", run_id, "--no-log"]) == 0
    out = capsys.readouterr().out
    # people as the truth: the judge finds 3 of their 4 yes and both their no, (3/4 + 2/2) / 2
    assert re.search(r"^  balanced_accuracy +0\.875  ", out, re.MULTILINE), out
    assert re.search(r"^  pairs_used +6$", out, re.MULTILINE), out


def test_the_run_logs_its_headline_figures_and_every_one_with_all_metrics(endpoint, tmp_path, capsys):
    data = str(summaries(tmp_path))
    headline = MlflowClient().get_run(evaluated(capsys, data, "--reference-col", "reference")[0]).data.metrics
    every = MlflowClient().get_run(evaluated(capsys, data, "--reference-col", "reference", "--all-metrics")[0]).data.metrics
    assert len(headline) < 40 and {"alignment", "alignment_ci_low", "alignment_n", "rougeL", "judge/calls"} <= set(headline)
    assert set(headline) < set(every) and {"rouge1", "bleu", "claim_support_rate", "judge/suspect_rate"} <= set(every)


def test_the_printed_figures_are_the_run_s_to_3_significant_digits(endpoint, tmp_path, capsys):
    run_id, out = evaluated(capsys, str(summaries(tmp_path)), "--reference-col", "reference")
    figures = load_run(run_id).metrics  # the run's metrics and its report's
    printed = dict(re.findall(r"^  (\S+) +(\S+)(?:  .*)?$", out, re.MULTILINE))
    assert {"alignment", "rougeL", "grounding", "judge/suspect_rate", "judge/calls"} <= set(printed)
    for name, text in printed.items():
        assert text == f"{float(f'{figures[name]:.3g}'):g}", (name, text, figures[name])


def test_with_a_model_the_run_links_the_candidate_it_evaluated(endpoint, tmp_path, capsys):
    articles = summaries(tmp_path, frame().drop(columns=["summary"]))
    run_id, out = evaluated(capsys, str(articles), "--model", "good-summarizer", "--model-base-url", endpoint.base_url)
    model_uri = re.search(r"^logged candidate good-summarizer as (models:/(m-[0-9a-f]+))$", out, re.MULTILINE)
    run = MlflowClient().get_run(run_id)
    assert [m.model_id for m in run.inputs.model_inputs] == [model_uri.group(2)]
    assert run.data.tags["mgm.candidate"] == "good-summarizer"
    assert cards_per_row(run_id) == {row_id: ALL_CARDS for row_id in frame()["id"]}  # the summaries it wrote, judged


def test_a_candidate_that_fails_on_rows_is_one_line_and_a_failed_run(endpoint, tmp_path, capsys):
    """A traceback ended with RuntimeError: the candidate's endpoint failing is no bug of mgm's."""
    script = endpoint.script

    def refuses_the_first_article(request):
        if request.body.get("model") == "bad-summarizer" and frame()["text"][0] in request.last_user_message:
            return Fault.http(400, "this article is too long for the model")
        return script(request)

    endpoint.script = refuses_the_first_article
    articles = summaries(tmp_path, frame().drop(columns=["summary"]))
    code = mgm(["evaluate", str(articles), "--id-col", "id", "--model", "bad-summarizer", "--model-base-url", endpoint.base_url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("mgm evaluate: bad-summarizer failed to summarize 1 of ") and "row 0: bad_request (HTTP 400)" in err[0]
    (run,) = MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()])
    assert run.info.status == "FAILED"


def test_a_candidate_its_endpoint_does_not_serve_is_refused_before_a_run_starts(endpoint, tmp_path, capsys):
    """The run was started and the candidate logged first; then the judge's advice (MGM_JUDGE_MODEL) for the
    candidate's mistake."""
    articles = summaries(tmp_path, frame().drop(columns=["summary"]))
    code = mgm(["evaluate", str(articles), "--id-col", "id", "--model", "no-such-model", "--model-base-url", endpoint.base_url])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (f"mgm evaluate: the candidate's endpoint {endpoint.base_url} does not serve it (it serves "
                                 "bad-summarizer, good-summarizer, scripted-judge); check --model no-such-model and --model-base-url")
    experiments = [e.experiment_id for e in MlflowClient().search_experiments()]
    assert MlflowClient().search_runs(experiments) == [] and MlflowClient().search_logged_models(experiments) == []


def test_ter_is_printed_and_in_the_run_s_rows(endpoint, tmp_path, capsys):
    run_id, out = evaluated(capsys, str(summaries(tmp_path)), "--reference-col", "reference", "--no-coverage", "--ter")
    assert re.search(r"^  ter +\S+", out, re.MULTILINE), out
    assert load_run(run_id).rows["ter"].notna().all()


def test_the_judge_s_call_budget_holds_on_the_cli(endpoint, tmp_path, capsys):
    run_id, _ = evaluated(capsys, str(summaries(tmp_path)), "--no-coverage", "--max-calls", "4")
    assert 0 < endpoint.request_count <= 4
    errors = load_run(run_id).rows["error"].fillna("")
    assert 0 < errors.str.contains("budget").sum() < len(errors)


def test_rows_the_run_does_not_list_fail_the_command_in_one_line_with_both_counts(endpoint, tmp_path, capsys, monkeypatch, caplog):
    """The store losing a row's trace (as MLflow's default threads do on SQLite), played by hiding one trace from
    the run's listing: the run gets no figures, is marked FAILED, and mgm says so in one line."""
    from mlflow_genai_metrics.tracking import rows as evaluation

    listed = evaluation.run_row_ids
    monkeypatch.setattr(evaluation, "run_row_ids", lambda run_id: set(sorted(listed(run_id))[1:]))
    assert mgm(["evaluate", str(summaries(tmp_path)), "--id-col", "id"]) == 1
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("mgm evaluate:"))
    assert err.count("mgm evaluate:") == 1
    # and not a second time as the library's warning (outside pytest, Python prints a warning nothing handles)
    assert not [r for r in caplog.records if r.getMessage().startswith("no results logged")]
    run_id = re.search(r"no results logged for run ([0-9a-f]{32}): ", line).group(1)
    assert "the scorers were handed 6 rows, the run lists 5 evaluated traces" in line
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags[ERROR_TAG].startswith("no results logged") and "alignment" not in run.data.metrics


def test_repeated_ids_are_refused_in_one_line_before_any_run_or_judge_call(endpoint, tmp_path, capsys):
    table = frame().assign(id=["a", "b", "a", "c", "d", "e"])
    assert mgm(["evaluate", str(summaries(tmp_path, table)), "--id-col", "id"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mgm evaluate: cannot judge these rows: row 2 (id 'a'): the id repeats row 0 (id 'a')"), err
    assert endpoint.request_count == 0
    assert mlflow.search_runs(search_all_experiments=True, output_format="list") == []
    # answers and rewrites likewise (each refusal left a FAILED run behind)
    rows = pd.DataFrame({"id": ["a", "b", "a"], "question": ["Who?"] * 3, "passages": ['["Ann came."]'] * 3, "answer": ["Ann."] * 3,
                         "input": ["Ann came."] * 3, "rewrite": ["Ann arrived."] * 3})
    rows.to_csv(tmp_path / "rows.csv", index=False)
    for task in (["--task", "rag"], ["--task", "rewrite", "--instruction", "Say it formally."]):
        assert mgm(["evaluate", str(tmp_path / "rows.csv"), "--id-col", "id", *task]) == 2
        assert "row 2 (id 'a'): the id repeats row 0 (id 'a')" in capsys.readouterr().err
    assert endpoint.request_count == 0 and mlflow.search_runs(search_all_experiments=True, output_format="list") == []
