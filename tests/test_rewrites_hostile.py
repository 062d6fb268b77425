"""Rewrites as a demanding user runs them: long inputs, and each door's figures against its cards and rows."""

from __future__ import annotations

import mlflow
import pytest
from helpers import judge_for

from mlflow_genai_metrics.rewrites import judge_rewrites
from mlflow_genai_metrics.summarization import SourceMismatchError, compare_results
from mlflow_genai_metrics.testing import Fault, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import InstructionFollowing

# 400 sentences, about 1,200 tokens; the judge below takes 4,000 characters of prompt at most (its "context").
LONG = " ".join(f"Fact number {i} says the depot {i} holds {i} crates." for i in range(400))
CONTEXT_CHARS = 4000


def _prompt(logged) -> str:
    return " ".join(message["content"] for message in logged.body["messages"])


def _small_context(request, kind):
    if len(request.prompt_text) > CONTEXT_CHARS:
        return Fault("status", status=400, message="This model's maximum context length is 1143 tokens")
    return None


def test_a_long_input_is_cut_to_fit_its_instruction_check_as_its_chunks_are(scripted_server, mlflow_store):
    """max_source_tokens chunked the claim passes, but the instruction check sent the whole input: over the judge's
    context, every long row lost its claims and coverage to "instruction check failed"."""
    server = scripted_server(SummarizationJudgeScript(fault=_small_context))
    rewrite = "Fact number 0 says the depot 0 holds 0 crates."
    result = judge_rewrites([LONG], [rewrite], instruction="Make it brief.", judge=judge_for(server), max_source_tokens=500)
    row = result.rows.iloc[0]
    assert row["error"] == "" and row["instruction_followed"] == 1 and row["claim_count"] == 1
    assert result.metrics["instruction_following_n"] == 1 and result.metrics["judge_error_rate"] == 0
    asked = [_prompt(r) for r in server.requests if "=====INSTRUCTION " in _prompt(r)]
    assert len(asked) == 1 and f"more characters of {len(LONG):,} not shown]" in asked[0]
    assert max(len(_prompt(r)) for r in server.requests) <= CONTEXT_CHARS
    # the instruction judge alone, in plain mlflow.genai.evaluate, cuts it the same way
    row = {"inputs": {"input": LONG, "instruction": "Make it brief.", "id": "depots"}, "outputs": rewrite}
    evaluation = mlflow.genai.evaluate(data=[row], scorers=[InstructionFollowing(judge_for(server), max_source_tokens=500)])
    assert evaluation.metrics["instruction_following/mean"] == 1.0
    # a short input goes whole, as before (its cached answers still serve)
    short = judge_rewrites(["The pool opens at six. Lessons start in March."], ["The pool opens at six."],
                           instruction="Make it brief.", judge=judge_for(server), max_source_tokens=500)
    assert "not shown]" not in [_prompt(r) for r in server.requests if "=====INSTRUCTION " in _prompt(r)][-1] and short.rows.loc[0, "instruction_followed"] == 1


def test_rewrites_judged_under_another_instruction_are_refused_saying_so_not_to_fix_their_ids(scripted_server):
    """The same ids and inputs judged under two instructions: the refusal told the user to "give each article the same
    id in every run", which it already had."""
    server = scripted_server(SummarizationJudgeScript())
    inputs = [f"The depot {i} opens at nine. It holds {i} crates." for i in range(4)]
    rewrites = [f"The depot {i} opens at nine." for i in range(4)]
    brief = judge_rewrites(inputs, rewrites, instruction="Make it brief.", judge=judge_for(server), ids=range(4))
    formal = judge_rewrites(inputs, rewrites, instruction="Make it formal.", judge=judge_for(server), ids=range(4))
    with pytest.raises(SourceMismatchError) as refused:
        compare_results(brief, formal)
    assert "judge both runs' rewrites under the same instruction for each input" in str(refused.value)
    assert "give each article the same id" not in str(refused.value)
