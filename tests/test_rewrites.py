"""Rewrites judged against their inputs (issue 28, 2): no new facts (claims against the input), nothing lost (the
input's key points), the instruction followed (a judged yes/no with a reason); every failure a row error, never a
score; a rewrites run is never compared with a summaries run as an equal."""

from __future__ import annotations

import re

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.tracking import MlflowClient
from run_traces import cards_per_row

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.rewrites import demo_rewrites, judge_rewrites, judge_rewrites_frame
from mlflow_genai_metrics.summarization import SignatureMismatchError, compare_results, judge_summaries
from mlflow_genai_metrics.testing import Fault, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import log_result

TEXT = "The library opens at nine on weekdays. It closes at noon on Saturdays. Books are due back within three weeks."
BRIEF = "Make it brief."


def test_the_planted_rewrites_show_a_new_fact_a_lost_key_point_and_an_ignored_instruction(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_rewrites_frame(demo_rewrites(), judge=judge_for(server), instruction_col="instruction", id_col="id")
    rows = result.rows.set_index("id")
    assert rows.loc["meeting", ["strictly_aligned", "coverage", "instruction_followed"]].tolist() == [1, 1.0, 1]
    assert rows.loc["refund", "unverifiable_claims"] == 1 and rows.loc["refund", "strictly_aligned"] == 0  # the voucher
    assert rows.loc["outage", "coverage"] == pytest.approx(1 / 3) and rows.loc["outage", "strictly_aligned"] == 1  # nothing new, 2 points lost
    assert rows.loc["parking", "instruction_followed"] == 0
    assert rows.loc["parking", "instruction_reasoning"].startswith("Instruction no: ")
    assert result.metrics["instruction_following"] == 0.75 and result.metrics["instruction_following_n"] == 4
    assert result.metrics["instruction_following_ci_low"] < 0.75 < result.metrics["instruction_following_ci_high"]  # Clopper-Pearson, never [x, x]
    assert "|instruction:v1-" in result.signature and "|verify:" in result.signature


def test_one_instruction_serves_every_row_and_an_empty_rewrite_follows_none_with_no_call(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_rewrites([TEXT, TEXT], ["The library opens at nine on weekdays.", "  "], instruction=BRIEF, judge=judge_for(server))
    assert result.rows["instruction_followed"].tolist() == [1, 0]
    assert result.rows.loc[1, "defect_empty"] == 1 and result.rows.loc[1, "instruction_reasoning"].startswith("Instruction no: The rewrite is empty")
    asked = [r for r in server.requests if "=====INSTRUCTION " in r.body["messages"][0]["content"]]
    assert len(asked) == 1  # the empty rewrite's check made no call


def test_a_failed_instruction_check_is_that_rows_error_and_gives_it_no_value(scripted_server):
    failing = "The library closes at noon on Saturdays."
    script = SummarizationJudgeScript(fault=lambda request, kind: Fault("status", status=400, message="refused")
                                      if kind == "instruction" and failing in request.prompt_text else None)
    server = scripted_server(script)
    result = judge_rewrites([TEXT] * 3, ["The library opens at nine on weekdays.", failing, "Books are due back within three weeks."],
                            instruction=BRIEF, judge=judge_for(server), ids=["a", "b", "c"])
    rows = result.rows.set_index("id")
    assert rows.loc["b", "error"].startswith("instruction check failed")
    assert rows.loc["b", ["instruction_followed", "claim_count", "coverage"]].isna().all()  # no value, never 0
    assert (rows.drop("b")["error"] == "").all() and result.metrics["judge_error_rate"] == 1 / 3
    assert result.metrics["instruction_following_n"] == 2 and result.metrics["strict_alignment_n"] == 2
    assert result.usage.calls == sum(j.usage.calls for j in result.judgements)  # the failed call is counted


def test_every_call_a_row_sends_is_in_its_usage_the_instruction_check_s_too(scripted_server):
    """An answered instruction check's call went uncounted (4 calls a row in the figures for 5 sent: claims,
    verification, key points, coverage, instruction), so tokens and cost were short with no warning."""
    server = scripted_server(SummarizationJudgeScript())
    result = judge_rewrites([TEXT, TEXT], ["The library opens at nine on weekdays.", "Books are due back within three weeks."],
                            instruction=BRIEF, judge=judge_for(server, prices="0.15,0.60"))
    assert result.metrics["judge/calls"] == server.request_count == result.rows["judge_calls"].sum()  # one source: its key points once
    assert all(j.usage_by_pass["instruction"].calls == 1 for j in result.judgements)
    assert result.metrics["judge/cost_usd"] == pytest.approx(sum(j.usage.cost_usd for j in result.judgements))


@pytest.mark.parametrize(("instruction", "message"), [
    (["ok", "  "], r"row 1: the instruction is empty or not text"),
    (["ok"], r"instruction has 1 rows but inputs has 2"),
    ([None, "ok"], r"row 0: the instruction is missing"),
    # once refused only after the other passes' calls, by a bare UnicodeEncodeError naming no row
    (["ok", "Be brief \ud800."], r"row 1: the instruction cannot be encoded as UTF-8: surrogates not allowed"),
])
def test_a_bad_instruction_is_refused_naming_its_row_before_any_call(scripted_server, instruction, message):
    server = scripted_server(SummarizationJudgeScript())
    with pytest.raises(ValueError, match=message):
        judge_rewrites([TEXT, TEXT], ["a", "b"], instruction=instruction, judge=judge_for(server))
    assert server.request_count == 0


def test_instructions_in_another_order_than_the_inputs_are_refused(scripted_server):
    """Rows are paired by position: a Series of instructions indexed b, a beside inputs indexed a, b gave row a row
    b's instruction, silently (inputs and rewrites in different orders were refused already)."""
    server = scripted_server(SummarizationJudgeScript())
    inputs, rewrites = pd.Series([TEXT, TEXT], index=["a", "b"]), pd.Series(["one", "two"], index=["a", "b"])
    with pytest.raises(ValueError, match="inputs and instruction are pandas Series with different indexes"):
        judge_rewrites(inputs, rewrites, instruction=pd.Series(["Make it brief.", "Translate it."], index=["b", "a"]), judge=judge_for(server))
    assert server.request_count == 0


def test_a_rewrites_run_is_not_compared_with_a_summaries_run_as_an_equal(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    rewrites = judge_rewrites([TEXT], ["The library opens at nine on weekdays."], instruction=BRIEF, judge=judge)
    summaries = judge_summaries([TEXT], ["The library opens at nine on weekdays."], judge=judge, grounding=False)
    with pytest.raises(SignatureMismatchError):
        compare_results(summaries, rewrites)


def test_identical_rewrites_judged_under_different_instructions_never_pair(scripted_server):
    from mlflow_genai_metrics.summarization import SourceMismatchError

    server = scripted_server(SummarizationJudgeScript(followed={"The library opens at nine on weekdays.": "yes"}))
    judge = judge_for(server)
    rewrite = ["The library opens at nine on weekdays."] * 12
    brief = judge_rewrites([TEXT] * 12, rewrite, instruction=BRIEF, judge=judge, ids=range(12))
    # once: instruction_following 1.00 vs 0.00, difference -1.00, p = 0.00049, "significant", same signature
    server.script = SummarizationJudgeScript(followed={"The library opens at nine on weekdays.": "no"})
    french = judge_rewrites([TEXT] * 12, rewrite, instruction="Translate it into French.", judge=judge, ids=range(12))
    assert brief.signature == french.signature
    with pytest.raises(SourceMismatchError, match="for rewrites: inputs or instructions"):
        compare_results(brief, french)
    same = judge_rewrites([TEXT] * 12, rewrite, instruction=BRIEF, judge=judge, ids=range(12))
    assert compare_results(brief, same).pairs_used == 12  # the same input and instruction still pair


def test_a_rewrites_run_logs_instruction_following_as_a_headline_metric(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_rewrites([TEXT, TEXT], ["The library opens at nine on weekdays.", TEXT + " It has a cafe."], instruction=BRIEF,
                            judge=judge_for(server))
    with mlflow.start_run() as run:
        log_result(result, log_metrics=True)
    logged = MlflowClient().get_run(run.info.run_id).data
    assert logged.metrics["instruction_following"] == 0.5 and logged.metrics["instruction_following_n"] == 2
    assert logged.metrics["coverage"] == pytest.approx(2 / 3) and logged.tags["mgm.signature"] == result.signature


def test_mgm_evaluate_task_rewrite_logs_a_run_and_refuses_the_other_tasks_options(scripted_server, mlflow_store, tmp_path, capsys, monkeypatch):
    server = scripted_server(SummarizationJudgeScript())
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                        "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "rewrites.jsonl"
    demo_rewrites().to_json(path, orient="records", lines=True)

    assert mgm(["evaluate", str(path), "--task", "rewrite", "--instruction-col", "instruction", "--id-col", "id"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^run [0-9a-f]{32} \(4 rewrites\)", out, re.MULTILINE)
    assert re.search(r"^  instruction_following\s+0\.75  \[", out, re.MULTILINE) and re.search(r"^  coverage\s+0\.75", out, re.MULTILINE)
    run_id = re.search(r"^run ([0-9a-f]{32})", out, re.MULTILINE).group(1)  # through mlflow.genai.evaluate: a trace and 3 cards a row
    assert cards_per_row(run_id) == {row_id: ["claim_alignment", "instruction_following", "key_point_coverage"]
                                     for row_id in ("meeting", "refund", "outage", "parking")}
    assert mgm(["evaluate", str(path), "--task", "rewrite"]) == 2
    assert "needs --instruction TEXT (every row's) or --instruction-col COLUMN" in capsys.readouterr().err
    assert mgm(["evaluate", str(path), "--task", "rewrite", "--instruction", "x", "--expected-col", "e"]) == 2
    assert "--expected-col is not for --task rewrite" in capsys.readouterr().err
    assert mgm(["evaluate", str(path), "--source-col", "input", "--summary-col", "rewrite", "--instruction", "x"]) == 2
    assert "--instruction is not for --task summary" in capsys.readouterr().err


def test_a_short_budget_finishes_the_rewrites_it_starts_their_instruction_checks_included(scripted_server):
    """A row's instruction check is set aside with its other calls (claims, verification, key points, coverage: 5 a
    row here, each row its own input): 12 calls finish two rows whole and refuse the other two before any call. The
    check once ran after every row, outside their share: three rows' other passes took the 12 calls, then every
    check was refused, and each of those rows, paid for, ended an "instruction check" error (none judged)."""
    server = scripted_server(SummarizationJudgeScript())
    inputs = [TEXT.replace("nine", hour) for hour in ("seven", "eight", "nine", "ten")]
    rewrites = [text.split(". ")[0] + "." for text in inputs]
    result = judge_rewrites(inputs, rewrites, instruction=BRIEF, judge=judge_for(server, max_calls=12), ids=list("abcd"))
    rows = result.rows.set_index("id")
    judged = rows[rows["error"] == ""]
    assert len(judged) == 2 and judged["instruction_followed"].notna().all() and judged["strictly_aligned"].notna().all()
    refused = rows[rows["error"] != ""]["error"]
    assert len(refused) == 2 and refused.str.contains("judge's budget cannot pay for this row's 5 calls").all(), refused.tolist()
    assert server.request_count == result.metrics["judge/calls"] == 10


def test_a_rewrite_whose_claims_failed_is_not_asked_its_instruction(scripted_server):
    """The row is an error whatever its instruction check says: the check would only be paid for."""
    failing = "The library closes at noon on Saturdays."
    script = SummarizationJudgeScript(fault=lambda request, kind: Fault("status", status=400, message="refused")
                                      if kind == "claims" and failing in request.prompt_text else None)
    server = scripted_server(script)
    result = judge_rewrites([TEXT] * 2, ["The library opens at nine on weekdays.", failing], instruction=BRIEF, judge=judge_for(server), ids=["a", "b"])
    assert result.rows.set_index("id").loc["b", "error"].startswith("claim extraction failed")
    asked = [r for r in server.requests if "=====INSTRUCTION " in r.body["messages"][0]["content"]]
    assert len(asked) == 1 and failing not in asked[0].body["messages"][0]["content"]
    assert result.metrics["instruction_following_n"] == 1
