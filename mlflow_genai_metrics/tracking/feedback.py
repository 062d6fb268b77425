"""A card -> the one ``Feedback`` each judge shows per row, native in MLflow's UI: what the card says is the
task's (``summarization.cards``, ``rewrites.cards``, ``rag.cards``); here it becomes MLflow's.

- ``claim_alignment``: "yes"/"no" (MLflow's ``CategoricalRating``, as its own judges give), source ``LLM_JUDGE``
  named as MLflow names its judges' models (``openai:/<model>``), the Markdown rationale, the counts in metadata;
- ``key_point_coverage``: the share of the source's key points covered, the covered and missed ones listed;
- ``grounding``: the model-free score with its reasoning, source ``CODE`` with the grounding model's tag;
- ``instruction_following`` (rewrites): "yes"/"no", did the rewrite follow its instruction, with the judge's reason.

Each judge's card carries what its own judgement cost under MLflow's assessment metadata keys, which MLflow's UI
shows on the card (``judge_cost``): the claim card its claim passes, the coverage card its key-point passes, split
so even when one pass asked both; a judgement from the cache costs 0 and shows 0 tokens; grounding costs nothing
and has no such key. A row the judge failed on is one feedback with an error, never a value (with the cost of the
calls it made).
"""

from __future__ import annotations

from typing import Any

from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
from mlflow.genai.judges import CategoricalRating
from mlflow.tracing.constant import AssessmentMetadataKey

from ..judge import Usage
from ..summarization.cards import Card
from ..summarization.records import JudgePass


def judge_source(model: str) -> AssessmentSource:
    """The judge model as the feedback's source, named as MLflow's own judges name theirs: ``openai:/<model>`` (the
    judge speaks the OpenAI protocol, whatever serves it); a model already named ``<provider>:/...`` as it is."""
    return AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=model if ":/" in model else f"openai:/{model}")


CALLS_KEY = "mgm.judge_calls"
CACHED_TOKENS_KEY = "mgm.judge_cached_input_tokens"  # of the input tokens, those the endpoint served from its prompt cache


def judge_cost(judgement: Any, judge_pass: JudgePass, *, priced: bool) -> dict[str, Any]:
    """What the calls of ``judge_pass`` for this row cost, under MLflow's assessment metadata keys, as its own judges
    write them: input and output tokens, and the cost in USD when the judge has prices (``priced``). Cache hits
    cost 0 tokens and 0.0 USD, and say so. Nothing when the judgement did not ask that pass."""
    usage: Usage | None = judgement.usage_by_pass.get(judge_pass)
    if usage is None:
        return {}
    metadata: dict[str, Any] = {
        AssessmentMetadataKey.JUDGE_INPUT_TOKENS: usage.prompt_tokens,
        AssessmentMetadataKey.JUDGE_OUTPUT_TOKENS: usage.completion_tokens,
        CALLS_KEY: usage.calls,  # HTTP calls sent (0 from the cache): ``log_results`` adds them to the run's judge/calls
        CACHED_TOKENS_KEY: usage.cached_prompt_tokens,  # and these to its judge/cached_prompt_tokens
    }
    if priced:
        metadata[AssessmentMetadataKey.JUDGE_COST] = usage.cost_usd or 0.0
    return metadata


APPLICATION_ERROR = "APPLICATION_ERROR"  # a card's error code where the row's application raised: nothing was judged


def application_card(card: Any) -> bool:
    """Whether a card (a feedback, read back or made now) is an ``APPLICATION_ERROR``: final, never asked again."""
    error = getattr(card, "error", None)
    return error is not None and getattr(error, "error_code", None) == APPLICATION_ERROR


def error_feedback(name: str, message: str, source: AssessmentSource, *, code: str = "JUDGE_ERROR", metadata: dict[str, Any] | None = None) -> Feedback:
    """The one feedback of a row the judge failed on: the error, no value (``metadata``: what its calls cost)."""
    return Feedback(name=name, error=AssessmentError(error_code=code, error_message=message), source=source, metadata=metadata or None)


def card_feedback(name: str, card: Card, source: AssessmentSource, cost: dict[str, Any]) -> Feedback:
    if card.error is not None:
        return error_feedback(name, card.error, source, code=card.code, metadata=cost)
    value = (CategoricalRating.YES if card.value else CategoricalRating.NO) if isinstance(card.value, bool) else card.value
    return Feedback(name=name, value=value, rationale=card.rationale, source=source, metadata={**(card.metadata or {}), **cost})


def aggregated(value: Any) -> bool:
    """Whether MLflow aggregates a feedback of this value: a number or a yes/no (as its ``aggregation`` module)."""
    return isinstance(value, (int, float, bool)) or (isinstance(value, str) and value.lower() in ("yes", "no"))
