"""What each judge's card says about one row, apart from MLflow: its value, its Markdown rationale and its counts.
``tracking.feedback`` makes them MLflow ``Feedback``.

- claim alignment: faithful or not (the registry's ``strictly_aligned``: the summary makes claims and the source
  supports every one; a claim the source neither supports nor contradicts (idk) is what an invented detail looks
  like, so it makes the card No, as a contradicted one does); a head line that says why, then one line per claim
  (verdict, claim, reason), contradicted first, then unverifiable, then supported, suspect verdicts marked;
- key-point coverage: the share of the source's key points covered, the missed ones listed first;
- grounding: the model-free score with its reasoning.

Values a person reads are rounded to 3 significant digits (``shown``); the run's tables keep them exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..grounding.model import calibrated_on, calibration_note
from .metrics import METRICS, row_facts
from .records import CheckedClaim, RowJudgement

_ORDER = {"no": 0, "idk": 1, "yes": 2}  # contradicted claims first, then unverifiable, as in the per-row reasoning
_VERDICT = {"no": "contradicted", "idk": "unverifiable", "yes": "supported"}
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|~])")


@dataclass(frozen=True)
class Card:
    """One card: a value (a bool for yes/no), a rationale, metadata; or, with ``error``, no value and why not."""

    value: bool | float | None = None
    rationale: str = ""
    metadata: dict[str, str] | None = None
    error: str | None = None
    code: str = "JUDGE_ERROR"


def markdown_text(text: str) -> str:
    """``text`` on one line, its Markdown characters escaped: a claim or a reason shows as written."""
    return _MARKDOWN.sub(r"\\\1", " ".join(text.split()))


def shown(value: float) -> float:
    """``value`` to 3 significant digits: what a card shows a person (0.0142, not 0.014194148827315435)."""
    return float(f"{value:.3g}")


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'s' if number != 1 else ''}"


def faithful(judgement: RowJudgement) -> bool:
    """The card's verdict, the registry's ``strictly_aligned`` of the row: the summary makes claims and the source
    supports every one. A contradicted claim (no) or an unverifiable one (idk) makes it False, as a failed row."""
    return METRICS.row("strictly_aligned").row_value(row_facts(judgement)) == 1


def _evidence(claim: CheckedClaim) -> str:
    """Where a verdict against numbered passages (``rag``) stands: the passage and its quote, or the quote that was
    not found there (the judge's verdict, counted idk); nothing for a summary's claim."""
    if claim.quote_found is False:
        where = f"passage {claim.passage}" if claim.passage else "any passage retrieved"
        return f" *(judged {claim.judge_verdict}, counted unverifiable: the quote is not in {where}: “{markdown_text(claim.quote or '')}”)*"
    if claim.passage:
        return f" *(passage {claim.passage}: “{markdown_text(claim.quote or '')}”)*"
    return ""


def _claim_line(claim: CheckedClaim, source: str = "the source") -> str:
    where = "the source supports" if source == "the source" else "its best passage supports"  # answers: checked passage by passage
    suspect = f" *(suspect: {where} {claim.lexical_support:.2f} of it)*" if claim.suspect else ""
    if claim.unstable:  # stability=k: the repetitions did not all give this verdict
        suspect += f" *(unstable: {claim.agreement:.0%} of repetitions agree)*"
    return f"- **{_VERDICT[claim.verdict]}**{suspect}: {markdown_text(claim.claim)} — {markdown_text(claim.reason)}{_evidence(claim)}"


def _head(counts: dict[str, int], claims: int, source: str) -> str:
    """The rationale's first line: the verdict and why, in the order the claims are listed."""
    if counts["yes"] == claims:
        return f"**Yes**: {_count(claims, 'claim')}, {'every one ' if claims > 1 else ''}supported by {source}."
    plural = source.endswith("s")  # "the passages say", "the source says"
    why = []
    if counts["no"]:
        why.append(f"{_count(counts['no'], 'contradicted claim')} ({source} {'say' if plural else 'says'} otherwise)")
    if counts["idk"]:
        why.append(f"{_count(counts['idk'], 'unverifiable claim')} ({source} {'do' if plural else 'does'} not support "
                   f"{'it' if counts['idk'] == 1 else 'them'})")
    return f"**No**: {' and '.join(why)}; {counts['yes']} of {_count(claims, 'claim')} supported."


def claim_card(judgement: RowJudgement, *, source: str = "the source", text: str = "summary") -> Card:
    """Yes when the summary is faithful, No when a claim is contradicted or unverifiable, or there is no claim.
    ``source`` and ``text`` name what was checked against what (an answer against "the passages": each claim's line
    then gives the passage it cites and the quote, failed quotes first among the unverifiable)."""
    if judgement.error is not None:
        return Card(error=str(judgement.error))
    claims = judgement.claims
    counts = {verdict: sum(c.verdict == verdict for c in claims) for verdict in _ORDER}
    is_faithful = faithful(judgement)
    if not claims:
        rationale = f"**No**: the {text} makes no claim (defect: empty)."
    else:
        ordered = sorted(enumerate(claims), key=lambda item: (_ORDER[item[1].verdict], item[1].quote_found is not False,
                                                              not item[1].suspect, item[0]))
        rationale = "\n".join([_head(counts, len(claims), source), "", *(_claim_line(claim, source) for _, claim in ordered)])
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
    if any(c.quote_found is False for c in claims):
        metadata["quote_failures"] = str(sum(c.quote_found is False for c in claims))
    if any(c.agreement is not None for c in claims):
        metadata["unstable_claims"] = str(sum(bool(c.unstable) for c in claims))
    if any(c.suspect is not None for c in claims):
        metadata["suspect_verdicts"] = str(sum(bool(c.suspect) for c in claims))
    if judgement.order_check is not None and judgement.order_check.failed:  # the verdicts stand: the check only measures
        metadata["order_check_failed"] = judgement.order_check.failed
    return Card(is_faithful, rationale, metadata)


def coverage_card(judgement: RowJudgement) -> Card:
    """The share of the source's key points the summary covers, the missed ones listed first."""
    if judgement.error is not None:
        return Card(error=str(judgement.error))
    points = judgement.key_points or []
    if not points:
        return Card(error="the judge listed no key point for this source: there is nothing to cover", code="NO_KEY_POINTS")
    covered = [p for p in points if p.covered]
    missed = [p for p in points if not p.covered]
    lines = [f"**{len(covered)} of {len(points)} key points covered.**"]
    for title, group in (("Missed", missed), ("Covered", covered)):
        if group:
            lines += ["", f"{title}:", *(f"- {markdown_text(p.key_point)} — {markdown_text(p.reason)}" for p in group)]
    metadata = {"row_id": str(judgement.id), "key_points": str(len(points)), "covered": str(len(covered)), "missed": str(len(missed))}
    return Card(shown(len(covered) / len(points)), "\n".join(lines), metadata)


def grounding_card(judgement: RowJudgement) -> Card:
    """The model-free check needs no judge: a row the judge failed on still gets its grounding."""
    checked = judgement.grounding
    if checked is not None and checked.grounding is None and checked.reasoning.startswith("Not checked"):
        return Card(error=checked.reasoning, code="UNREADABLE")  # a language or script the check was not built for
    if checked is None or checked.grounding is None:
        return Card(error="the summary has no sentence to check", code="NO_SENTENCE")
    head, *rest = checked.reasoning.splitlines()
    where = calibrated_on()
    rationale = "\n".join([markdown_text(head), *([""] if rest else []), *(f"- {markdown_text(line)}" for line in rest), "",
                           f"*{markdown_text(calibration_note(where))}*"])
    return Card(shown(checked.grounding), rationale,
                {"row_id": str(judgement.id), "grounded": str(bool(checked.grounded)).lower(), "calibrated_on": where})
