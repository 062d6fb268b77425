"""What one row's passes will take of the judge's budget, reckoned before its first call: so that, once a budget is
short, the rows under way finish before new rows start (``Budget.earmark``).

The calls are those the row makes when every pass answers: its claims (one call), their verification (one per
chunk of the source), its coverage check (one), and its source's key points (one per chunk) when no row has asked
for them yet; a summary with no words makes none of its own. The cost is each call's worst case, as its
reservation will hold it (``Judge.worst_cost``). Where a request's text depends on answers not back yet, a
stand-in of the likely size is priced: a claim per ``WORDS_PER_CLAIM`` words of the summary, and
``MAX_KEY_POINTS`` key points of ``WORDS_PER_KEY_POINT`` words. A repair turn, a retry, a second claim extraction
are not reckoned: they draw from what is free, as any call does.

A row of the order check's sample (``order.in_sample``: a hash of its texts, known before any call) asks its claims
again shuffled, one call per chunk, and its key points again, one call: reckoned apart (``order_calls``), whatever
the summary's length, since how many claims it makes (and whether they have another order) is only known from its
first answer; the shuffled verification is priced as the verification (at least two stand-in claims). Those calls
are the ones a row can do without (``Budget.earmark``'s optional calls): the check only measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..judge import ExampleSet, Judge, JudgeRequest
from .method import Method
from .order import in_sample
from .passes import (
    MAX_CLAIMS,
    MAX_KEY_POINTS,
    check_coverage_request,
    extract_claims_request,
    extract_key_points_request,
    verify_claims_request,
)
from .records import RowInput
from .statements import has_words

WORDS_PER_CLAIM = 5  # a fact of a summary takes about five words
WORDS_PER_KEY_POINT = 20


@dataclass(frozen=True)
class RowNeed:
    """The calls one row will make and the most they can cost; and, apart, its order check's (none out of the sample)."""

    calls: int
    cost_usd: float
    order_calls: int = 0
    order_cost_usd: float = 0.0


def row_need(
    judge: Judge, method: Method, row: RowInput, chunks: list[str], *, coverage: bool, asks_key_points: bool, key_points: list[str] | None,
    claims: bool = True, examples: ExampleSet | None = None,
) -> RowNeed:
    """What judging ``row`` against its source's ``chunks`` will take. ``asks_key_points``: this row asks for its
    source's key points (no row has yet); ``key_points``: the source's, when they are already known; ``claims``:
    whether its claims are asked (False: the key-point passes alone); ``method``: how claims are verified (its
    ``stability`` and ``order_check``); ``examples``: the run's (``run_examples``)."""
    requests: list[JudgeRequest] = []
    shuffled: list[JudgeRequest] = []  # the order check's
    sampled = in_sample(row.source_key, row.summary, method.order_check)
    if coverage and asks_key_points:
        requests += [extract_key_points_request(chunk) for chunk in chunks]
    if has_words(row.summary):
        if claims:
            likely = likely_statements(row.summary, WORDS_PER_CLAIM, MAX_CLAIMS)
            requests.append(extract_claims_request(row.summary))
            requests += [verify_claims_request(chunk, likely, examples) for chunk in chunks] * method.stability
            if sampled:
                two_or_more = stand_ins(row.summary.split(), WORDS_PER_CLAIM, min(max(len(likely), 2), MAX_CLAIMS))
                shuffled += [verify_claims_request(chunk, two_or_more, examples) for chunk in chunks]
        if coverage:
            points = key_points or stand_ins(chunks[0].split(), WORDS_PER_KEY_POINT, MAX_KEY_POINTS)
            requests.append(check_coverage_request(points, row.summary))
            if sampled and len(points) >= 2:  # known key points: one has no other order
                shuffled.append(check_coverage_request(points, row.summary))
    return RowNeed(len(requests), sum(judge.worst_cost(request) for request in requests),
                   len(shuffled), sum(judge.worst_cost(request) for request in shuffled))


def likely_statements(text: str, size: int, most: int) -> list[str]:
    """Stand-ins for the statements a judge will find in ``text``: one per ``size`` words, at least one, at most
    ``most`` (``stand_ins``)."""
    words = text.split()
    return stand_ins(words, size, min(max(math.ceil(len(words) / size), 1), most))


def stand_ins(words: list[str], size: int, count: int) -> list[str]:
    """``count`` statements of ``size`` words each, taken in turn from ``words``: text of the likely length."""
    words = words or ["-"]
    return [" ".join(words[(n * size + k) % len(words)] for k in range(size)) for n in range(count)]
