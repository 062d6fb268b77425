"""Comparison and the gate on runs logged from ``judge_summaries`` results (40 rows, ids logged): pairs by id,
pairs a judge failure leaves out, aggregates no row stood on, too few usable pairs."""

from __future__ import annotations

import mlflow
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics import SummarizerModel, compare_runs, register_if_passing
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.summarization.gating import missing_because


def _logged_result(server, summaries, *, fail_on_bad: bool, run_name: str) -> tuple[str, str]:
    """A run holding a SummarizerModel and ``judge_summaries`` over 40 articles, logged with its metrics."""
    from test_comparison_pairing import _article, _result

    from mlflow_genai_metrics.tracking import log_result

    with mlflow.start_run(run_name=run_name) as run:
        info = SummarizerModel("good-summarizer", "http://127.0.0.1:9/v1", input_col="text").log(name="summarizer")
        result = _result(server, [_article(i) for i in range(40)], summaries, fail_on_bad=fail_on_bad)
        log_result(result, log_metrics=True)
    return run.info.run_id, info.model_uri


def test_beat_champion_is_not_fooled_by_judge_failures_on_the_champion_s_bad_rows(scripted_server, mlflow_store):
    from test_comparison_pairing import _summaries

    server = scripted_server()
    champion_run, champion_uri = _logged_result(server, _summaries(40), fail_on_bad=False, run_name="champion")
    assert register_if_passing(champion_uri, "summarizer", run_id=champion_run, rules={"richness": ">= 1"}).passed
    # The same summaries, the same verdicts, but the judge answered 500 on every row the champion had contradicted.
    candidate_run, candidate_uri = _logged_result(server, _summaries(40), fail_on_bad=True, run_name="candidate")
    assert MlflowClient().get_run(candidate_run).data.metrics["alignment"] == 1.0

    gate = register_if_passing(candidate_uri, "summarizer", run_id=candidate_run, rules={"richness": ">= 1"}, beat_champion=True)

    assert not gate.passed and gate.registered_version is None
    detail = gate.failed[0].detail  # the missing pairs could decide it: refused, not decided on the rest
    assert detail.startswith("refused: 20 of the 40 shared pairs failed for the infrastructure") and "20 dropped for judge errors" in detail
    assert str(MlflowClient().get_model_version_by_alias("summarizer", "champion").version) == "1"


def test_compare_runs_pairs_logged_ids_and_reports_pairs_left_out(scripted_server, mlflow_store):
    from test_comparison_pairing import _summaries

    server = scripted_server()
    first, _ = _logged_result(server, _summaries(40), fail_on_bad=False, run_name="a")
    second, _ = _logged_result(server, _summaries(40), fail_on_bad=True, run_name="b")
    table = compare_runs([first, second], log=False)
    row = table[(table["run_id"] == second) & (table["metric"] == "alignment")].iloc[0]
    assert (row["pairs_used"], row["pairs_dropped_for_errors"], row["only_in_first"], row["only_in_this"]) == (20, 20, 0, 0)
    assert row["difference_vs_first"] == 0.0 and "20 dropped for judge errors" in row["note"]
    assert row["n"] == 20 and row["ci_low"] < 1.0  # the candidate's own alignment: 20 judged rows, Wilson interval


def test_a_gate_rule_on_an_aggregate_no_row_stood_on_fails_with_the_reason(scripted_server, mlflow_store):
    from test_comparison_pairing import BAD

    server = scripted_server()
    run_id, uri = _logged_result(server, [BAD.format(i=i) for i in range(40)], fail_on_bad=True, run_name="all failed")
    assert "alignment" not in MlflowClient().get_run(run_id).data.metrics  # no judged row: no value is logged
    gate = register_if_passing(uri, "summarizer", run_id=run_id, rules={"alignment": ">= 0.5", "judge_error_rate": "<= 0.25"})
    assert not gate.passed and gate.registered_version is None
    assert [o.detail for o in gate.failed][0] == "no value: no row of the run was judged (judge_error_rate 1)"


def test_mgm_compare_refuses_runs_with_too_few_usable_pairs_with_exit_code_2(scripted_server, mlflow_store, capsys):
    from test_comparison_pairing import _summaries

    server = scripted_server()
    first, _ = _logged_result(server, _summaries(40), fail_on_bad=False, run_name="a")
    most_failed = [s if i < 8 else s.replace("approved", "rejected") for i, s in enumerate(_summaries(40))]
    second, _ = _logged_result(server, most_failed, fail_on_bad=True, run_name="b")
    assert mgm(["compare", first, second, "--tracking-uri", mlflow_store]) == 2
    assert "fewer than half of run A's 40 rows" in capsys.readouterr().err
    assert mgm(["compare", first, second, "--tracking-uri", mlflow_store, "--allow-partial"]) == 0
    assert "PARTIAL" in capsys.readouterr().out


def test_a_rule_on_grounding_with_no_row_scored_says_why_not_that_no_row_was_judged():
    """A grounding-only run whose summaries are all empty, function words or another script: once "no row of the run
    was judged (no judge_error_rate either)", though no judge was asked."""
    assert missing_because("grounded_rate", {"grounding_n": 0.0, "grounded_rate_n": 0.0}) == (
        "no value: the grounding check scored no row of the run (each summary empty, without a content word, or in a "
        "language or script it cannot read: the reasons are in grounding_reasoning)")
    assert missing_because("grounding", {"strict_alignment": 0.5}) == "no value: the run has no grounding (judged with grounding=False)"
    assert missing_because("strict_alignment", {"judge_error_rate": 1.0}) == "no value: no row of the run was judged (judge_error_rate 1)"

