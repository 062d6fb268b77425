"""Answers from passages judged by the real SmolLM2 on llama.cpp: every row ends judged or failed with a named error
kind (never a score from a failure), and the model's citations pass through the quote check as they should: a yes or
no whose quote is not in the passage it names is idk, counted."""

from __future__ import annotations

import pytest

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import ErrorKind
from mlflow_genai_metrics.local import LocalModelServer
from mlflow_genai_metrics.rag import PassageChunk, judge_answers, quote_found
from mlflow_genai_metrics.rag.passes import verify_passages_request
from mlflow_genai_metrics.rag.pipeline import cite

pytestmark = pytest.mark.local_model

PASSAGES = ["The Coastal Book Prize went to Tomas Reyes for his first novel.", "Shares in Harbour Foods rose 6% in morning trading."]
CLAIM = "Tomas Reyes won the Coastal Book Prize."


@pytest.mark.timeout(600)
def test_the_real_local_model_judges_an_answer_from_passages_and_its_citations_are_checked():
    with LocalModelServer("smollm2-135m", n_ctx=4096) as llama:
        judge = Judge(llama.model_id, llama.base_url, "local", cache_dir=None, context_window=4096)
        result = judge_answers(["Who won the Coastal Book Prize?"], [PASSAGES], [CLAIM], judge=judge, progress=False)
        row = result.rows.iloc[0]
        if row["error"]:
            kind = result.judgements[0].error.kind
            assert kind in ErrorKind.__args__
            assert result.metrics["judge_error_rate"] == 1.0 and result.metrics.get("strict_alignment_n", 0) == 0
        else:
            assert row["claim_count"] >= 1 and row["answer_relevance"] in (0.0, 0.5, 1.0)
        assert result.metrics["judge/calls"] >= 2 and result.signature.startswith(f"judge:{llama.model_id}|")

        # The verification pass itself, on a claim given: the model's answer validates, and each citation is decided
        # by the quote check.
        chunk = PassageChunk((1, 2), tuple(PASSAGES))
        reply = judge.ask(verify_passages_request(chunk, [CLAIM]))
        assert reply.ok or reply.error.kind in ErrorKind.__args__
        for check in reply.answer.verdicts if reply.ok else []:
            cited = cite(check, chunk)
            named = PASSAGES[check.passage - 1] if 1 <= check.passage <= 2 else None
            if check.verdict != "idk":
                assert cited.quote_found == (named is not None and quote_found(check.quote, named))
                assert cited.verdict == (check.verdict if cited.quote_found else "idk")
