"""Rewrites judged against their inputs: no new facts, nothing lost, and the instruction followed.

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.rewrites import judge_rewrites

    result = judge_rewrites(emails, rewrites, instruction="Rewrite this email to be polite and brief.", judge=Judge("gpt-4o-mini"))
    result.metrics["strict_alignment"], result.metrics["coverage"], result.metrics["instruction_following"]

A rewrite is a summary of its input that must also do what it was asked: its claims are verified against the input
(a claim the input does not support is a new fact), the input's key points are checked against it (what was lost),
and the judge decides whether it follows the instruction. ``docs/rewrites.md`` defines every figure; core only:
nothing here imports MLflow.
"""

from .api import REWRITE_SIGNATURE_PROMPTS, judge_rewrites, judge_rewrites_frame
from .demo import demo_rewrites
from .passes import InstructionCheck, instruction_request

__all__ = ["REWRITE_SIGNATURE_PROMPTS", "InstructionCheck", "demo_rewrites", "instruction_request", "judge_rewrites", "judge_rewrites_frame"]
