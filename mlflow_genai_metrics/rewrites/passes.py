"""The pass a rewrite adds to a summary's claims and key points: did it follow its instruction (``instruction``
prompt: one call per row, the instruction, the input and the rewrite, each between markers it cannot forge)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..judge import JudgeRequest, estimate_tokens
from ..prompts import load_prompt, marker, neutralise
from ..summarization.chunking import split_source
from ..summarization.passes import judge_request


class InstructionCheck(BaseModel):
    reason: str = Field(description="one sentence: what the instruction asks and what the rewrite does")
    followed: Literal["yes", "no"]


def _cut(text: str, tokens: int) -> str:
    """``text``'s head that fits in ``tokens`` (cut as sources are chunked), and how much of it is left out."""
    head = split_source(text, tokens)[0]  # characters, not words: a text written without spaces is one "word"
    return f"{head}\n[... cut here to fit the judge's context: {len(text) - len(head):,} more characters of {len(text):,} not shown]"


def fitted(text: str, rewrite: str, max_source_tokens: int | None) -> tuple[str, str]:
    """The input and the rewrite as one instruction call sends them: whole when together they fit in
    ``max_source_tokens`` (the source budget the claim passes chunk to), else each cut to its share (the rewrite
    up to half of it, the input the rest) with a line saying how much is left out. A long input once
    went whole into the call: over the judge's context, the row lost every figure to "instruction check failed"."""
    if max_source_tokens is None or estimate_tokens(text) + estimate_tokens(rewrite) <= max_source_tokens:
        return text, rewrite
    rewrite_share = min(estimate_tokens(rewrite), max_source_tokens // 2)
    text_share = max_source_tokens - rewrite_share
    return (_cut(text, text_share) if estimate_tokens(text) > text_share else text,
            _cut(rewrite, rewrite_share) if estimate_tokens(rewrite) > rewrite_share else rewrite)


def instruction_request(instruction: str, text: str, rewrite: str, max_source_tokens: int | None = None) -> JudgeRequest:
    """The question whether ``rewrite`` of ``text`` follows ``instruction`` (the two cut to fit ``max_source_tokens``)."""
    prompt = load_prompt("instruction")
    text, rewrite = fitted(text, rewrite, max_source_tokens)
    instruction, text, rewrite = neutralise(instruction), neutralise(text), neutralise(rewrite)
    rendered = prompt.render(
        instruction=instruction, instruction_marker=marker("INSTRUCTION", instruction),
        input=text, input_marker=marker("INPUT", instruction, text),
        rewrite=rewrite, rewrite_marker=marker("REWRITE", instruction, text, rewrite),
    )
    return judge_request(prompt, rendered, InstructionCheck, 160)
