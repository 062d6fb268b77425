"""The pass a rewrite adds to a summary's claims and key points: did it follow its instruction (``instruction``
prompt: one call per row, the instruction, the input and the rewrite, each between markers it cannot forge)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..judge import JudgeRequest
from ..prompts import load_prompt, marker, neutralise
from ..summarization.passes import judge_request


class InstructionCheck(BaseModel):
    reason: str = Field(description="one sentence: what the instruction asks and what the rewrite does")
    followed: Literal["yes", "no"]


def instruction_request(instruction: str, text: str, rewrite: str) -> JudgeRequest:
    """The question whether ``rewrite`` of ``text`` follows ``instruction``."""
    prompt = load_prompt("instruction")
    instruction, text, rewrite = neutralise(instruction), neutralise(text), neutralise(rewrite)
    rendered = prompt.render(
        instruction=instruction, instruction_marker=marker("INSTRUCTION", instruction),
        input=text, input_marker=marker("INPUT", instruction, text),
        rewrite=rewrite, rewrite_marker=marker("REWRITE", instruction, text, rewrite),
    )
    return judge_request(prompt, rendered, InstructionCheck, 160)
