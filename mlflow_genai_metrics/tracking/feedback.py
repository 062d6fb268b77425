"""One judgement -> the one ``Feedback`` card each judge shows per row, native in MLflow's UI.

- ``claim_alignment``: "yes"/"no" (MLflow's ``CategoricalRating``, as its own judges give), source ``LLM_JUDGE``
  with the judge model's id, a Markdown rationale (a head line that says why, then one line per claim: verdict,
  claim, reason; contradicted first, then unverifiable, then supported, suspect verdicts marked), the counts in
  metadata. Yes means *faithful*: the summary makes claims and the source supports every one
  (``strictly_aligned``); a claim the source neither supports nor contradicts (idk) is what an invented detail
  looks like, so it makes the card No, as a contradicted one does;
- ``key_point_coverage``: the share of the source's key points covered, the covered and missed ones listed;
- ``grounding``: the model-free score with its reasoning, source ``CODE`` with the grounding model's tag.

Each judge's card carries what its own judgement cost under MLflow's assessment metadata keys, which MLflow's UI
shows on the card (``judge_cost``): the claim card its claim passes, the coverage card its key-point passes, split
so even when one pass asked both; a judgement from the cache costs 0 and shows 0 tokens; grounding costs nothing
and has no such key. A row the judge failed on is one feedback with an error, never a value (with the cost of the
calls it made).
"""

from __future__ import annotations

import re
from typing import Any

from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
from mlflow.genai.judges import CategoricalRating
from mlflow.tracing.constant import AssessmentMetadataKey

from ..judge import Usage
from ..summarization.metrics import METRICS, row_facts
from ..summarization.records import CheckedClaim, JudgePass, RowJudgement

__all__ = [
    "claim_alignment_feedback", "error_feedback", "faithful", "grounding_feedback", "judge_cost", "judge_source", "key_point_coverage_feedback",
    "markdown_text", "shown",
]

_ORDER = {"no": 0, "idk": 1, "yes": 2}  # contradicted claims first, then unverifiable, as in the per-row reasoning
_VERDICT = {"no": "contradicted", "idk": "unverifiable", "yes": "supported"}
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|~])")


def markdown_text(text: str) -> str:
    """``text`` on one line, its Markdown characters escaped: a claim or a reason shows as written."""
    return _MARKDOWN.sub(r"\\\1", " ".join(text.split()))


def judge_source(model: str) -> AssessmentSource:
    """The judge model as the feedback's source, named as MLflow's own judges name theirs: ``openai:/<model>`` (the
    judge speaks the OpenAI protocol, whatever serves it); a model already named ``<provider>:/...`` as it is."""
    return AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=model if ":/" in model else f"openai:/{model}")


def shown(value: float) -> float:
    """``value`` to 3 significant digits: what a card shows a person (0.0142, not 0.014194148827315435). The
    run's tables keep the exact value."""
    return float(f"{value:.3g}")


def judge_cost(judgement: RowJudgement, judge_pass: JudgePass, *, priced: bool) -> dict[str, Any]:
    """What the calls of ``judge_pass`` for this row cost, under MLflow's assessment metadata keys, as its own judges
    write them: input and output tokens, and the cost in USD when the judge has prices (``priced``). Cache hits
    cost 0 tokens and 0.0 USD, and say so. Nothing when the judgement did not ask that pass."""
    usage: Usage | None = judgement.usage_by_pass.get(judge_pass)
    if usage is None:
        return {}
    metadata: dict[str, Any] = {
        AssessmentMetadataKey.JUDGE_INPUT_TOKENS: usage.prompt_tokens,
        AssessmentMetadataKey.JUDGE_OUTPUT_TOKENS: usage.completion_tokens,
    }
    if priced:
        metadata[AssessmentMetadataKey.JUDGE_COST] = usage.cost_usd or 0.0
    return metadata


def error_feedback(name: str, message: str, source: AssessmentSource, *, code: str = "JUDGE_ERROR", metadata: dict[str, Any] | None = None) -> Feedback:
    """The one feedback of a row the judge failed on: the error, no value (``metadata``: what its calls cost)."""
    return Feedback(name=name, error=AssessmentError(error_code=code, error_message=message), source=source, metadata=metadata or None)


def _claim_line(claim: CheckedClaim) -> str:
    suspect = f" *(suspect: the source supports {claim.lexical_support:.2f} of it)*" if claim.suspect else ""
    return f"- **{_VERDICT[claim.verdict]}**{suspect}: {markdown_text(claim.claim)} — {markdown_text(claim.reason)}"


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'s' if number != 1 else ''}"


def faithful(judgement: RowJudgement) -> bool:
    """The card's verdict, the registry's ``strictly_aligned`` of the row: the summary makes claims and the source
    supports every one. A contradicted claim (no) or an unverifiable one (idk) makes it False, as a failed row."""
    return METRICS.row("strictly_aligned").row_value(row_facts(judgement)) == 1


def _head(counts: dict[str, int], claims: int) -> str:
    """The rationale's first line: the verdict and why, in the order the claims are listed."""
    if counts["yes"] == claims:
        return f"**Yes**: {_count(claims, 'claim')}, {'every one ' if claims > 1 else ''}supported by the source."
    why = []
    if counts["no"]:
        why.append(f"{_count(counts['no'], 'contradicted claim')} (the source says otherwise)")
    if counts["idk"]:
        why.append(f"{_count(counts['idk'], 'unverifiable claim')} (the source does not support {'it' if counts['idk'] == 1 else 'them'})")
    return f"**No**: {' and '.join(why)}; {counts['yes']} of {_count(claims, 'claim')} supported."


def claim_alignment_feedback(name: str, judgement: RowJudgement, source: AssessmentSource, *, priced: bool = False) -> Feedback:
    """Yes when the summary is faithful: it makes claims and the source supports every one (``strictly_aligned``);
    No when one is contradicted or unverifiable (idk), or when there is no claim. Every claim is listed,
    contradicted first, then unverifiable, then supported. ``priced``: the judge has prices (the card says the cost)."""
    cost = judge_cost(judgement, "claims", priced=priced)
    if judgement.error is not None:
        return error_feedback(name, str(judgement.error), source, metadata=cost)
    claims = judgement.claims
    counts = {verdict: sum(c.verdict == verdict for c in claims) for verdict in _ORDER}
    is_faithful = faithful(judgement)
    value = CategoricalRating.YES if is_faithful else CategoricalRating.NO
    if not claims:
        rationale = "**No**: the summary makes no claim (defect: empty)."
    else:
        ordered = sorted(enumerate(claims), key=lambda item: (_ORDER[item[1].verdict], not item[1].suspect, item[0]))
        rationale = "\n".join([_head(counts, len(claims)), "", *(_claim_line(claim) for _, claim in ordered)])
    metadata = {
        "row_id": str(judgement.id),
        "claims": str(len(claims)),
        "supported": str(counts["yes"]),
        "contradicted": str(counts["no"]),
        "unverifiable": str(counts["idk"]),
        "strictly_aligned": str(is_faithful).lower(),  # the card's value
        "aligned": str(bool(claims) and counts["no"] == 0).lower(),  # the study's: no claim contradicted
    }
    if claims:
        metadata["support_rate"] = f"{counts['yes'] / len(claims):.3g}"
    if any(c.suspect is not None for c in claims):
        metadata["suspect_verdicts"] = str(sum(bool(c.suspect) for c in claims))
    return Feedback(name=name, value=value, rationale=rationale, source=source, metadata={**metadata, **cost})


def key_point_coverage_feedback(name: str, judgement: RowJudgement, source: AssessmentSource, *, priced: bool = False) -> Feedback:
    """The share of the source's key points the summary covers, the missed ones listed first."""
    cost = judge_cost(judgement, "key_points", priced=priced)
    if judgement.error is not None:
        return error_feedback(name, str(judgement.error), source, metadata=cost)
    points = judgement.key_points or []
    if not points:
        return error_feedback(name, "the judge listed no key point for this source: there is nothing to cover", source, code="NO_KEY_POINTS", metadata=cost)
    covered = [p for p in points if p.covered]
    missed = [p for p in points if not p.covered]
    lines = [f"**{len(covered)} of {len(points)} key points covered.**"]
    for title, group in (("Missed", missed), ("Covered", covered)):
        if group:
            lines += ["", f"{title}:", *(f"- {markdown_text(p.key_point)} — {markdown_text(p.reason)}" for p in group)]
    metadata = {"row_id": str(judgement.id), "key_points": str(len(points)), "covered": str(len(covered)), "missed": str(len(missed)), **cost}
    return Feedback(name=name, value=shown(len(covered) / len(points)), rationale="\n".join(lines), source=source, metadata=metadata)


def grounding_feedback(name: str, judgement: RowJudgement, source: AssessmentSource) -> Feedback:
    """The model-free check needs no judge: a row the judge failed on still gets its grounding."""
    checked = judgement.grounding
    if checked is None or checked.grounding is None:
        return error_feedback(name, "the summary has no sentence to check", source, code="NO_SENTENCE")
    head, *rest = checked.reasoning.splitlines()
    rationale = "\n".join([markdown_text(head), *([""] if rest else []), *(f"- {markdown_text(line)}" for line in rest)])
    metadata = {"row_id": str(judgement.id), "grounded": str(bool(checked.grounded)).lower()}
    return Feedback(name=name, value=shown(checked.grounding), rationale=rationale, source=source, metadata=metadata)
