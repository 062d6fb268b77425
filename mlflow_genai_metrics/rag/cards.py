"""What each answer judge's card says about one row, apart from MLflow (``tracking.answer_judges`` makes them
``Feedback``): the summaries' ``Card``, read from an ``AnswerJudgement``.

- faithfulness: the summaries' claim card against "the passages": Yes when the answer makes claims and a quoted
  passage supports every one; each claim's line gives the passage it cites and the quote (a quote not found there
  is listed first among the unverifiable, with the judge's own verdict);
- relevance: 1 (yes), 0.5 (partly) or 0 (no), with the judge's reason;
- context sufficiency: the share of the expected answer's facts a quoted passage supports, the missing ones first;
  a row without an expected answer has no value (``NO_EXPECTED_ANSWER``), never 0.
"""

from __future__ import annotations

from ..summarization.cards import Card, claim_card, markdown_text, shown
from .records import AnswerJudgement, Cited
from .scoring import RELEVANCE_VALUE


def faithfulness_card(judgement: AnswerJudgement) -> Card:
    """Yes when every claim of the answer is supported by a passage whose quote was found; the claims listed with
    their passages and quotes, contradicted first, then unverifiable (failed quotes first), then supported."""
    card = claim_card(judgement, source="the passages", text="answer")
    if card.error is None and card.metadata is not None:
        card.metadata["passages"] = str(judgement.passage_count)
    return card


def relevance_card(judgement: AnswerJudgement) -> Card:
    """Does the answer address the question: 1 (yes), 0.5 (partly), 0 (no), with the judge's reason."""
    if judgement.error is not None:
        return Card(error=str(judgement.error))
    if judgement.relevance is None:
        return Card(error="the answer's relevance was not judged", code="NOT_JUDGED")
    said = judgement.relevance.relevance
    rationale = f"**{said.capitalize()}**: {markdown_text(judgement.relevance.reason)}"
    return Card(RELEVANCE_VALUE[said], rationale, {"row_id": str(judgement.id), "relevance": said})


def _fact_evidence(cited: Cited) -> str:
    if cited.quote_found is False:
        return f" *(judged {cited.judge_verdict}, counted unverifiable: the quote is not in passage {cited.passage}: “{markdown_text(cited.quote or '')}”)*"
    if cited.passage:
        return f" *(passage {cited.passage}: “{markdown_text(cited.quote or '')}”)*"
    return ""


def sufficiency_card(judgement: AnswerJudgement) -> Card:
    """The share of the expected answer's facts the passages support (could a faithful model have answered?)."""
    if judgement.error is not None:
        return Card(error=str(judgement.error))
    if judgement.facts is None:
        return Card(error="the row has no expected answer (expectations['expected_response']): there is nothing to look "
                          "for in the passages", code="NO_EXPECTED_ANSWER")
    if not judgement.facts:
        return Card(error="the judge listed no fact of the expected answer", code="NO_FACTS")
    found = [f for f in judgement.facts if f.in_passages.verdict == "yes"]
    missing = [f for f in judgement.facts if f.in_passages.verdict != "yes"]
    lines = [f"**{len(found)} of {len(judgement.facts)} facts of the expected answer are in the passages.**"]
    for title, group in (("Missing", missing), ("Found", found)):
        if group:
            lines += ["", f"{title}:", *(f"- {markdown_text(f.fact)} — {markdown_text(f.in_passages.reason)}{_fact_evidence(f.in_passages)}"
                                         for f in group)]
    metadata = {"row_id": str(judgement.id), "facts": str(len(judgement.facts)), "in_passages": str(len(found)),
                "in_answer": str(sum(f.in_answer.verdict == "yes" for f in judgement.facts))}
    return Card(shown(len(found) / len(judgement.facts)), "\n".join(lines), metadata)
