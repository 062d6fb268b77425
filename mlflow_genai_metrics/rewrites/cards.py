"""What the instruction card says about one rewrite, apart from MLflow (``tracking.feedback`` makes it MLflow's):
yes or no, did the rewrite follow its instruction, with the judge's reason; a row whose judging failed has no value
and says why."""

from __future__ import annotations

from ..summarization.cards import Card, markdown_text
from ..summarization.records import RowJudgement


def instruction_card(judgement: RowJudgement) -> Card:
    """Whether the rewrite follows its instruction (``verdicts["instruction"]``), and the judge's reason."""
    if judgement.error is not None:
        return Card(error=str(judgement.error))
    verdict = judgement.verdicts.get("instruction")
    if verdict is None:
        return Card(error="the instruction check was not asked for this row", code="NOT_ASKED")
    followed = verdict.value == "yes"
    head = "**The rewrite follows its instruction.**" if followed else "**The rewrite does not follow its instruction.**"
    return Card(followed, f"{head}\n\n{markdown_text(verdict.reason)}", {"row_id": str(judgement.id), "followed": verdict.value})
