"""Answers from retrieved passages (retrieval-augmented generation), judged claim by claim with the evidence cited.

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.rag import judge_answers

    result = judge_answers(questions, passages, answers, judge=Judge("gpt-4o-mini"), expected=expected)

The answer's claims are extracted as a summary's are, then verified against the numbered passages: each verdict
names the passage that decides it and quotes it, and a quote that is not in that passage makes the verdict idk
(counted in ``quote_failures``). The answer's relevance to the question is judged beside it, and an expected
answer's facts are checked against the passages (context sufficiency) and the answer (recall). ``docs/rag.md``
defines every metric; core only: nothing here imports MLflow.
"""

from .api import ANSWER_SIGNATURE_PROMPTS, AnswersResult, judge_answers, judge_answers_frame, prepare_answer_rows
from .demo import demo_answers
from .passages import PassageChunk, chunk_passages, quote_found
from .records import AnswerInput, AnswerJudgement, AnswerRelevance, Cited, FactCheck

__all__ = [
    "ANSWER_SIGNATURE_PROMPTS",
    "AnswerInput",
    "AnswerJudgement",
    "AnswerRelevance",
    "AnswersResult",
    "Cited",
    "FactCheck",
    "PassageChunk",
    "chunk_passages",
    "demo_answers",
    "judge_answers",
    "judge_answers_frame",
    "prepare_answer_rows",
    "quote_found",
]
