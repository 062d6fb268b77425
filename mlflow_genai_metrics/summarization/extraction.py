"""A text's claims, asked of the judge: the claims pass of a summary, and of an answer (``rag``).

A text with words for which the judge lists no claim is asked once more, saying so (``claims_retry``); a second
empty list is the ``no_claims`` error, never an empty text. Claims repeated in the text (the same but for case and
spacing) are one fact (``statements.distinct_statements``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..judge import Judge, JudgeError, Usage
from .passes import extract_claims_request, extract_claims_retry_request
from .records import RowError
from .statements import distinct_statements


@dataclass
class Extracted:
    """The distinct claims (with the copies of each removed), what asking cost, or the error that stops the row."""

    claims: list[str] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: RowError | None = None


async def extract_claims(judge: Judge, text: str, *, noun: str = "summary") -> Extracted:
    """The claims of ``text`` (which has words), asked again once when the first answer lists none; ``noun`` is
    what the error calls the text ("summary", "answer")."""
    found = Extracted()
    for request in (extract_claims_request(text), extract_claims_retry_request(text)):
        reply = await judge.aask(request)
        found.usage.add(reply.usage)
        if not reply.ok:
            found.error = RowError(stage="claim extraction", error=reply.error)
            return found
        if reply.answer.claims:
            found.claims, found.duplicates = distinct_statements(reply.answer.claims)
            return found
    no_claims = JudgeError(kind="no_claims", message=f"the judge listed no claim for a{'n' if noun[0] in 'aeiou' else ''} {noun} that has words, even when asked again", attempts=2)
    found.error = RowError(stage="claim extraction", error=no_claims)
    return found
