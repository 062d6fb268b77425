"""Decisions on the other tasks (rewrites, answers from passages): comparisons and the registry gate."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient
from rag_helpers import INVENTED, TOPICS, RagEndpoint

from mlflow_genai_metrics import SummarizerModel, judge_summaries, register_if_passing
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.signature import TaskMismatchError
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import (
    answer_scorers,
    compare_runs,
    evaluate_answers,
    evaluate_rewrites,
    log_result,
    rewrite_scorers,
)

INSTRUCTION = "Rewrite this email to be brief."


def _input(i: int) -> str:
    return f"Dear team, the council approved budget {i} today. The mayor welcomed decision {i} warmly."


def _rewrite_rows(rewrites: list[str]) -> list[dict]:
    return [{"inputs": {"input": _input(i), "instruction": INSTRUCTION, "id": f"r{i}"}, "outputs": text}
            for i, text in enumerate(rewrites)]


def _rewrite_run(server, rewrites: list[str], name: str) -> tuple[str, str]:
    with mlflow.start_run(run_name=name) as run:
        info = SummarizerModel(name, "http://127.0.0.1:9/v1", input_col="input").log(name="rewriter")
        evaluate_rewrites(_rewrite_rows(rewrites), rewrite_scorers(judge_for(server), coverage=False))
    return run.info.run_id, info.model_uri


GOOD = "The council approved budget {i}."
VAGUE = "Aliens visited town {i}."


def _script(**fields) -> SummarizationJudgeScript:
    return SummarizationJudgeScript(verdicts={VAGUE.format(i=i): "idk" for i in range(200)}, **fields)


def _answer_rows(answers: dict[str, str]) -> list[dict]:
    return [{"inputs": {"question": TOPICS[i][0], "passages": list(TOPICS[i][1:]), "id": i}, "outputs": answer}
            for i, answer in answers.items()]


def _answer_run(server, answers: dict[str, str], name: str) -> tuple[str, str]:
    with mlflow.start_run(run_name=name) as run:
        info = SummarizerModel(name, "http://127.0.0.1:9/v1", input_col="question").log(name="rag")
        evaluate_answers(_answer_rows(answers), answer_scorers(judge_for(server), sufficiency=False))
    return run.info.run_id, info.model_uri


def test_champion_data_for_a_rewrites_candidate_is_refused_up_front_naming_the_task(scripted_server, mlflow_store):
    server = scripted_server(_script())
    rewrites = [VAGUE.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(10)]
    champion, champion_uri = _rewrite_run(server, rewrites, "champion")
    assert register_if_passing(champion_uri, "rewriter", run_id=champion, rules={"richness": ">= 0"}).passed
    candidate, candidate_uri = _rewrite_run(server, [GOOD.format(i=i) for i in range(10)], "candidate")
    data = pd.DataFrame({"id": [f"r{i}" for i in range(10)], "input": [_input(i) for i in range(10)],
                         "instruction": INSTRUCTION, "rewrite": rewrites})
    asked = len(server.requests)
    # once: "refused: champion_data has no column ['text', 'summary']", and with those columns the champion's rows
    # were judged as summaries, whose signature never matches a rewrite's: refused, whatever the rows
    with pytest.raises(ValueError, match=r"it judged rewrites, and the champion's rows are judged again only as summaries"):
        register_if_passing(candidate_uri, "rewriter", run_id=candidate, rules={"richness": ">= 0"}, beat_champion=True,
                            champion_data=data.rename(columns={"input": "text", "rewrite": "summary"}), judge=judge_for(server))
    assert len(server.requests) == asked  # nothing judged again
    assert str(MlflowClient().get_model_version_by_alias("rewriter", "champion").version) == "1"
    assert "mgm.gate.decision" not in MlflowClient().get_run(candidate).data.tags


def test_mgm_gate_with_champion_data_for_an_answers_candidate_exits_2_naming_the_task(scripted_server, mlflow_store, tmp_path, capsys):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    champion, champion_uri = _answer_run(server, {i: TOPICS[i][1] for i in TOPICS}, "champion")
    assert register_if_passing(champion_uri, "rag", run_id=champion, rules={"richness": ">= 0"}).passed
    candidate, candidate_uri = _answer_run(server, {i: f"{TOPICS[i][1]} {INVENTED}" for i in TOPICS}, "candidate")
    pd.DataFrame({"id": list(TOPICS), "text": [TOPICS[i][0] for i in TOPICS],
                  "summary": [TOPICS[i][1] for i in TOPICS]}).to_csv(tmp_path / "champion.csv", index=False)
    asked = len(server.requests)

    code = mgm(["gate", candidate, "--model-uri", candidate_uri, "--name", "rag", "--rule", "richness>=0", "--beat-champion",
                "--champion-data", str(tmp_path / "champion.csv"), "--judge-model", server.models[0],
                "--judge-base-url", server.base_url, "--tracking-uri", mlflow_store])

    err = capsys.readouterr().err
    assert code == 2 and "it judged answers from passages, and the champion's rows" in err, err
    assert len(server.requests) == asked
    assert str(MlflowClient().get_model_version_by_alias("rag", "champion").version) == "1"


def _summaries_run(server, name: str = "summaries") -> str:
    with mlflow.start_run(run_name=name) as run:
        result = judge_summaries([f"{TOPICS[i][1]} {TOPICS[i][2]}" for i in TOPICS], [TOPICS[i][1] for i in TOPICS],
                                 judge=judge_for(server), ids=list(TOPICS), coverage=False)
        log_result(result, log_metrics=True)
    return run.info.run_id


def test_an_answers_run_and_a_summaries_run_or_a_rewrites_run_are_refused_as_different_tasks(scripted_server, mlflow_store, capsys):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    answers, _ = _answer_run(server, {i: TOPICS[i][1] for i in TOPICS}, "answers")
    summaries = _summaries_run(scripted_server(_script()))
    rewrites, _ = _rewrite_run(scripted_server(_script()), [GOOD.format(i=i) for i in range(8)], "rewrites")
    # once: "different judges or prompts ... Rejudge both with the same judge, or pass allow_mixed_judges=True", and
    # with it a "row id(s) name different source texts ... give each article the same id" or "no usable pair"
    for first, second, said in ((summaries, answers, "judged summaries and run B judged answers from passages"),
                                (rewrites, answers, "judged rewrites and run B judged answers from passages"),
                                (answers, summaries, "judged answers from passages and run B judged summaries")):
        for mixed in (False, True):
            with pytest.raises(TaskMismatchError) as refused:
                compare_runs([first, second], allow_mixed_judges=mixed)
            assert said in str(refused.value) and "runs of different tasks are never compared" in str(refused.value)
            assert "allow_mixed_judges" not in str(refused.value)
    assert mgm(["compare", summaries, answers, "--allow-mixed-judges", "--tracking-uri", mlflow_store]) == 2
    assert "run B judged answers from passages: runs of different tasks are never compared" in capsys.readouterr().err


def test_an_answers_candidate_gated_against_a_summaries_champion_is_refused_naming_the_tasks(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    with mlflow.start_run(run_name="summaries") as run:
        uri = SummarizerModel("writer", server.base_url, input_col="text").log(name="rag").model_uri
        result = judge_summaries([f"{TOPICS[i][1]} {TOPICS[i][2]}" for i in TOPICS], [TOPICS[i][1] for i in TOPICS],
                                 judge=judge_for(scripted_server(_script())), ids=list(TOPICS), coverage=False)
        log_result(result, log_metrics=True)
    assert register_if_passing(uri, "rag", run_id=run.info.run_id, rules={"richness": ">= 0"}).passed
    candidate, candidate_uri = _answer_run(server, {i: TOPICS[i][1] for i in TOPICS}, "answers")

    gate = register_if_passing(candidate_uri, "rag", run_id=candidate, rules={"richness": ">= 0"}, beat_champion=True)

    assert not gate.passed and gate.registered_version is None
    assert "run A judged summaries and run B judged answers from passages" in gate.failed[0].detail


def test_judges_of_two_tasks_in_one_evaluation_are_refused_naming_each_task_s_judges(scripted_server):
    """The refusal named the tasks by internal class names (['_AnswerScorer', '_SummaryScorer']); it names the
    judges of each now, before any call."""
    from mlflow_genai_metrics.tracking import AnswerFaithfulness, ClaimAlignment, Grounding, evaluate

    server = scripted_server()
    judge = judge_for(server)
    with pytest.raises(ValueError) as refused:
        evaluate([{"inputs": {"text": "A source.", "id": "r1"}, "outputs": "A summary."}],
                 [ClaimAlignment(judge), Grounding(), AnswerFaithfulness(judge)])
    assert str(refused.value) == ("evaluate judges one task at a time; these judges are of 2 tasks: "
                                  "answer_faithfulness | claim_alignment + grounding")
    assert server.request_count == 0
