"""The passes an answer from passages adds to the summaries' claim extraction: each a prompt, an answer schema and a
builder of the ``JudgeRequest``.

- verification against passages (``verify_passages``): one call per chunk of the passages for all the answer's
  claims; per claim the verdict, the number of the passage that decides it and a quote from that passage (with the
  judge's ``examples``, ``verify_passages_examples``: the same, showing people's corrected verdicts);
- relevance (``relevance``): one call per answer, the question and the answer;
- the expected answer's facts (``facts``): one call per row with an expected answer; its facts are then verified
  against the passages (is the answer findable there: context sufficiency) and against the answer itself, as one
  passage (does the answer state them), with the same ``verify_passages`` prompt.

Every passage goes in verbatim between two marker lines that carry its number and a hash over all the passages
(``=====PASSAGE 2 5d41402abc4b=====``), so no passage can contain another's marker or the claims'. The question,
the answer and the expected answer are neutralised (``prompts.neutralise``) like a summary.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, Field

from ..judge import ExampleSet, JudgeRequest
from ..prompts import load_prompt, marker, neutralise, numbered_lines
from ..summarization.passes import MAX_KEY_POINTS, Statement, Verdict, examples_text, judge_request, numbered_list_answer
from .passages import PassageChunk

MAX_QUOTE_CHARACTERS = 600
MAX_FACTS = MAX_KEY_POINTS


class ClaimCitation(BaseModel):
    claim: int = Field(description="the claim's number")
    reason: str = Field(description="one sentence: what the passages say about the claim")
    passage: int = Field(ge=0, description="the number of the passage that decides the verdict; 0 for idk")
    quote: str = Field(max_length=MAX_QUOTE_CHARACTERS, description="the deciding words, copied from that passage; empty for idk")
    verdict: Verdict


class Relevance(BaseModel):
    reason: str = Field(description="one sentence: what the question asks and what the answer does with it")
    relevance: Literal["yes", "partly", "no"]


class ExpectedFacts(BaseModel):
    facts: list[Statement] = Field(min_length=1, max_length=MAX_FACTS, description="the expected answer's key facts, most important first")


@cache
def citation_answer(claim_count: int):
    """The answer type for verifying exactly ``claim_count`` claims against passages."""
    return numbered_list_answer("ClaimCitations", "verdicts", ClaimCitation, "claim", claim_count)


def passages_block(chunk: PassageChunk) -> str:
    """Each passage between two marker lines carrying its number; the hash is over every passage of the chunk."""
    return "\n\n".join(
        f"{marker(f'PASSAGE {number}', *chunk.texts)}\n{text}\n{marker(f'PASSAGE {number}', *chunk.texts)}"
        for number, text in zip(chunk.numbers, chunk.texts)
    )


def verify_passages_request(chunk: PassageChunk, claims: list[str], examples: ExampleSet | None = None) -> JudgeRequest:
    """The claims checked against the chunk's passages; with ``examples`` (people's corrected verdicts, less those
    from the rows being judged), under the examples prompt, which shows those most like these claims."""
    chosen = examples.choose(claims) if examples is not None else []
    prompt = load_prompt("verify_passages_examples" if chosen else "verify_passages")
    listed = numbered_lines(claims)
    shown = {}
    if chosen:
        shown["examples"] = examples_text(chosen)
        shown["examples_marker"] = marker("EXAMPLES", *chunk.texts, shown["examples"])
    text = prompt.render(
        passages=passages_block(chunk),
        claims=listed,
        claims_marker=marker("CLAIMS", *chunk.texts, listed),  # over the passages too: no passage can hold it
        claim_count=len(claims),
        **shown,
    )
    return judge_request(prompt, text, citation_answer(len(claims)), 64 + 140 * len(claims))


def relevance_request(question: str, answer: str) -> JudgeRequest:
    prompt = load_prompt("relevance")
    question, answer = neutralise(question), neutralise(answer)
    text = prompt.render(
        question=question, question_marker=marker("QUESTION", question), answer=answer, answer_marker=marker("ANSWER", question, answer),
    )
    return judge_request(prompt, text, Relevance, 160)


def expected_facts_request(question: str, expected: str) -> JudgeRequest:
    prompt = load_prompt("facts")
    question, expected = neutralise(question), neutralise(expected)
    text = prompt.render(
        question=question, question_marker=marker("QUESTION", question),
        expected=expected, expected_marker=marker("EXPECTED ANSWER", question, expected),
    )
    return judge_request(prompt, text, ExpectedFacts, 64 + 64 * MAX_FACTS)
