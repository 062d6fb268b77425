"""The claim engine's method options (``Method``): how each claim is verified, whatever the task and whatever the
judge. They belong to an evaluation, not to the LLM client (a ``Judge`` only sends requests), and every task takes
them alike: ``judge_summaries(..., stability=3)``, ``judge_answers(..., order_check=0.2)``,
``ClaimAlignment(judge, examples="examples.json")``, ``mgm evaluate --stability 3``.

Each option is declared once (``judge.setting``), so its flag, its help and its check are the same on
every door; those that change numbers are in the run's signature."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from ..judge import ExampleSet, setting


class Method(BaseModel):
    """How the claim engine verifies: each verification asked ``stability`` times (majority kept), an
    ``order_check`` sample asked again shuffled, people's corrected verdicts shown as ``examples``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stability: int = setting(1, "ask each verification this many times, as distinct requests (a seed each), and keep each "
                             "claim's majority verdict; claims whose answers differ are unstable (judge/flip_rate); part of "
                             "the signature", flag="--stability", metavar="K", spec=True, ge=1)
    order_check: float = setting(0.0, "the share of rows (a fixed sample) whose claims are verified again in a shuffled "
                                 "order, and key points checked again shuffled: judge/order_sensitivity is the share of "
                                 "answers that changed; 0: no check", flag="--order-check", metavar="SHARE", spec=True,
                                 ge=0, le=1)
    examples: ExampleSet | None = setting(
        None, "people's corrected verdicts (an ExampleSet, or the file mgm align wrote): each verification shows the "
        "few most like its claims, never from the rows being judged; the examples prompt and the set's hash are in the "
        "signature", flag="--examples", metavar="FILE", spec=True)

    @field_validator("examples", mode="before")
    @classmethod
    def _read_examples(cls, value: Any) -> ExampleSet | None:
        return ExampleSet.coerce(value)

    @property
    def repeated(self) -> bool:
        """Is each verification asked more than once (the stability figures are measured)?"""
        return self.stability > 1

    @property
    def order_checked(self) -> bool:
        """Is a sample asked again shuffled (the order sensitivity is measured)?"""
        return self.order_check > 0


def method_of(door: str, keywords: dict[str, Any], method: Method | None = None) -> Method:
    """The ``Method`` a door was given: ``method`` (default: ``Method()``), or its fields as ``keywords``
    (``stability=3``). An unknown keyword is a ``TypeError`` naming ``door``; a field given both ways a ``ValueError``."""
    unknown = [key for key in keywords if key not in Method.model_fields]
    if unknown:
        raise TypeError(f"{door}() got an unexpected keyword argument {unknown[0]!r}; its method keywords are "
                        f"{', '.join(Method.model_fields)}")
    if method is None:
        return Method(**keywords)
    if not isinstance(method, Method):
        raise TypeError(f"{door}(): method= must be a Method, not {type(method).__name__}")
    if keywords:
        raise ValueError(f"{door}(): {', '.join(keywords)} given as a keyword and in method=; give each field once")
    return method
