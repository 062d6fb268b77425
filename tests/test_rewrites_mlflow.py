"""Rewrites through MLflow (issue 46, 2): ``mlflow.genai.evaluate`` with ``rewrite_scorers`` gives one trace per row
with its claim-alignment, coverage and instruction cards; ``evaluate_rewrites`` (and ``mgm evaluate --task rewrite``)
logs the figures ``judge_rewrites`` computes, and ``log_results`` logs them for a plain run; a row without its
instruction is refused naming it, and a failed instruction check is that row's error card, never a "no"."""

from __future__ import annotations

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for, same_metrics
from mlflow.tracking import MlflowClient
from run_traces import cards_per_row

from mlflow_genai_metrics.rewrites import demo_rewrites, judge_rewrites_frame
from mlflow_genai_metrics.testing import Fault, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import InstructionFollowing, evaluate_rewrites, log_results, rewrite_scorers

CARDS = ["claim_alignment", "instruction_following", "key_point_coverage"]


def _records(frame=None) -> list[dict]:
    frame = demo_rewrites() if frame is None else frame
    return [{"inputs": {"input": row["input"], "instruction": row["instruction"], "id": row["id"]}, "outputs": row["rewrite"]}
            for row in frame.to_dict(orient="records")]


def _card(run_id: str, row_id: str, name: str):
    mlflow.flush_trace_async_logging()
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        if next(s for s in trace.data.spans if s.parent_id is None).inputs["id"] == row_id:
            return next(a for a in trace.info.assessments if a.name == name)
    raise AssertionError(f"no trace of row {row_id}")


def test_evaluate_rewrites_gives_a_trace_and_three_cards_per_row_and_the_figures_of_judge_rewrites(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    direct = judge_rewrites_frame(demo_rewrites(), judge=judge, instruction_col="instruction", id_col="id")
    with mlflow.start_run() as run:
        evaluation = evaluate_rewrites(_records(), rewrite_scorers(judge))
    assert cards_per_row(run.info.run_id) == {row_id: CARDS for row_id in ("meeting", "refund", "outage", "parking")}
    assert same_metrics(evaluation.metrics, direct.metrics) and evaluation.result.signature == direct.signature
    assert evaluation.metrics["instruction_following"] == 0.75 and evaluation.metrics["instruction_following_n"] == 4
    # the rows pair across runs by input *and* instruction, as judge_rewrites keys them
    assert sorted(evaluation.result.rows["source_key"]) == sorted(direct.rows["source_key"])
    ignored = _card(run.info.run_id, "parking", "instruction_following")
    assert ignored.value == "no" and "does not follow its instruction" in ignored.rationale
    assert _card(run.info.run_id, "meeting", "instruction_following").value == "yes"
    assert _card(run.info.run_id, "refund", "claim_alignment").value == "no"  # the voucher is a new fact
    logged = MlflowClient().get_run(run.info.run_id).data
    assert logged.metrics["instruction_following"] == 0.75 and logged.tags["mgm.signature"] == direct.signature


def test_plain_mlflow_genai_evaluate_gives_the_cards_and_log_results_the_report(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    direct = judge_rewrites_frame(demo_rewrites(), judge=judge, instruction_col="instruction", id_col="id")
    evaluation = mlflow.genai.evaluate(data=_records(), scorers=rewrite_scorers(judge))
    assert cards_per_row(evaluation.run_id) == {row_id: CARDS for row_id in ("meeting", "refund", "outage", "parking")}
    assert evaluation.metrics["instruction_following/mean"] == 0.75  # MLflow's own aggregate of the yes/no cards
    result = log_results(evaluation.run_id, rewrite_scorers(judge), data=_records())
    # the run's judge usage is the evaluation's (its cards) and the report's own (no cache here: every call again)
    spent = ("judge/calls", "judge/prompt_tokens", "judge/completion_tokens")
    assert all(result.metrics[name] == 2 * direct.metrics[name] for name in spent)
    assert same_metrics({k: v for k, v in result.metrics.items() if k not in spent},
                        {k: v for k, v in direct.metrics.items() if k not in spent}) and result.signature == direct.signature
    assert MlflowClient().get_run(evaluation.run_id).data.metrics["instruction_following_n"] == 4


def test_a_row_without_its_instruction_is_refused_naming_it_before_any_call(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    records = _records()
    del records[1]["inputs"]["instruction"]
    records[2]["inputs"]["instruction"] = "   "
    with pytest.raises(ValueError) as raised:
        evaluate_rewrites(records, rewrite_scorers(judge_for(server)))
    message = str(raised.value)
    assert "row 1 (id 'refund'): a rewrite's instruction must be text in `inputs['instruction']`; it is missing" in message
    assert "row 2 (id 'outage'): a rewrite's instruction must be text in `inputs['instruction']`; it is empty" in message
    assert server.request_count == 0
    # plain mlflow.genai.evaluate: that row's instruction card is an error naming what is wrong, never a "no"
    evaluation = mlflow.genai.evaluate(data=records[:2], scorers=[InstructionFollowing(judge_for(server))])
    card = _card(evaluation.run_id, "refund", "instruction_following")
    assert card.value is None and card.error.error_code == "BAD_ROW" and "it is missing" in card.error.error_message
    assert _card(evaluation.run_id, "meeting", "instruction_following").value == "yes"
    # an instruction that cannot be sent as UTF-8 was a bare UnicodeEncodeError midway, after other rows' calls
    unsendable = _records()
    unsendable[1]["inputs"]["instruction"] = "Be brief \ud800."
    asked = server.request_count
    with pytest.raises(ValueError, match=r"row 1 \(id 'refund'\): the instruction cannot be encoded as UTF-8"):
        evaluate_rewrites(unsendable, rewrite_scorers(judge_for(server)))
    assert server.request_count == asked


def test_a_failed_instruction_check_is_that_rows_error_card_and_the_run_counts_it(scripted_server, mlflow_store):
    parking = demo_rewrites().set_index("id").loc["parking", "rewrite"]
    script = SummarizationJudgeScript(fault=lambda request, kind: Fault("status", status=400, message="refused")
                                      if kind == "instruction" and parking in request.prompt_text else None)
    server = scripted_server(script)
    with mlflow.start_run() as run:
        evaluation = evaluate_rewrites(_records(), rewrite_scorers(judge_for(server)))
    card = _card(run.info.run_id, "parking", "instruction_following")
    assert card.value is None and card.error.error_message.startswith("instruction check failed")
    assert evaluation.metrics["instruction_following_n"] == 3 and evaluation.metrics["judge_error_rate"] == 0.25
    assert evaluation.metrics["instruction_following"] == 1.0  # the three rows judged all follow theirs: no 0 for the failure


def test_the_instruction_judge_registers_and_rebuilds_as_the_same_judge(scripted_server, monkeypatch):
    from mlflow.genai.scorers import Scorer

    server = scripted_server(SummarizationJudgeScript())
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")  # MLflow runs a loaded @scorer's source only then
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # the rebuilt judge reads the key where it runs
    original = InstructionFollowing(judge_for(server))
    loaded = Scorer.model_validate(original.model_dump())
    row = _records()[3]  # parking: the instruction ignored
    assert loaded.name == "instruction_following"
    assert loaded(inputs=row["inputs"], outputs=row["outputs"]).value == original(inputs=row["inputs"], outputs=row["outputs"]).value == "no"
    with pytest.raises(ValueError, match="InstructionFollowing needs instruction_key"):
        InstructionFollowing(judge_for(server), instruction_key=None)


def test_a_short_budget_through_mlflow_finishes_the_rewrites_it_starts(scripted_server, mlflow_store):
    """The plain route's rewrites set each row's instruction check aside with its other calls, as judge_rewrites
    does (test_rewrites.py): 12 calls judge two of the four demo rows whole (5 calls each) and refuse the other two
    before any call, each with an error card, never a "no"."""
    server = scripted_server(SummarizationJudgeScript())
    with mlflow.start_run() as run:
        evaluation = evaluate_rewrites(_records(), rewrite_scorers(judge_for(server, max_calls=12)))
    assert evaluation.metrics["instruction_following_n"] == 2 and evaluation.metrics["strict_alignment_n"] == 2
    assert server.request_count == 10
    refused = [row_id for row_id in ("meeting", "refund", "outage", "parking")
               if _card(run.info.run_id, row_id, "instruction_following").error is not None]
    assert len(refused) == 2
    assert all(_card(run.info.run_id, row_id, "instruction_following").value is None for row_id in refused)
