"""The order check's part of a row's passes (``summarization.order``): which of the row's lists are asked again
shuffled, those requests, and what their answers show beside the row's own. A shuffled request that fails (after
its retries and repair, a timeout, or refused by the budget) fails the order check alone, never the row: the check
only measures, so the row's verdicts stand and only its ``OrderCheck`` says why nothing was compared."""

from __future__ import annotations

from collections.abc import Sequence

from ..judge import ExampleSet, JudgeError, JudgeReply, JudgeRequest, Usage
from .chunking import combine_verdicts
from .order import OrderCheck, changed_answers, in_sample, shuffled_order
from .passes import check_coverage_request, verify_claims_request
from .records import CoveredKeyPoint, JudgePass, RowError, RowInput

# The shuffled order of a row's claims and of its key points: ``order[j]`` is the position of the item asked j-th
# (None: that list is not asked again, the row being out of the sample or the list having fewer than two items).
Orders = tuple[list[int] | None, list[int] | None]
CLAIMS_STAGE = "order check (claims verified again, shuffled)"
POINTS_STAGE = "order check (key points checked again, shuffled)"


def row_orders(row: RowInput, claims: Sequence[str], points: Sequence[str], share: float) -> Orders:
    """The shuffled orders of the row's claims and key points when it is in the order check's sample."""
    if not in_sample(row.source_key, row.summary, share):
        return None, None
    claim_order, point_order = (shuffled_order(len(items), row.source_key, row.summary) if len(items) >= 2 else None
                                for items in (claims, points))
    return claim_order, point_order


def order_requests(row: RowInput, chunks: Sequence[str], claims: Sequence[str], points: Sequence[str], orders: Orders,
                   examples: ExampleSet | None) -> list[JudgeRequest]:
    """The shuffled requests: the claims verified again against each chunk, then the key points checked again."""
    claim_order, point_order = orders
    requests = [verify_claims_request(chunk, [claims[i] for i in claim_order], examples) for chunk in chunks] if claim_order else []
    if point_order:
        requests.append(check_coverage_request([points[i] for i in point_order], row.summary))
    return requests


def not_asked(reason: str) -> OrderCheck:
    """The order check of a row whose shuffled requests were not sent (``reason``: why)."""
    return OrderCheck(failed=str(RowError(stage="order check", error=JudgeError(kind="budget", message=f"not sent: {reason}", attempts=0))))


def compare_orders(
    replies: Sequence[JudgeReply], orders: Orders, chunks: int, usage: dict[JudgePass, Usage],
    verdicts: list[list[list[tuple[str, str]]]] | None, key_points: list[CoveredKeyPoint] | None,
) -> OrderCheck | None:
    """Count the shuffled requests' ``replies`` in the row's ``usage`` (paid for, whatever comes of them), then set
    each item's answer beside its answer in the row's own request (``verdicts``: per claim, per repetition, per
    chunk, of which the first repetition is compared; ``key_points``: as covered). None when the row itself failed
    (``verdicts`` None): there is nothing to compare with. A failed reply fails the whole check: a row's check is
    compared whole or not at all."""
    claim_order, point_order = orders
    claim_replies = list(replies[:chunks]) if claim_order else []
    point_replies = list(replies[-1:]) if point_order else []
    for name, asked in (("claims", claim_replies), ("key_points", point_replies)):
        for reply in asked:
            usage[name].add(reply.usage)
    if verdicts is None:
        return None
    for stage, asked in ((CLAIMS_STAGE, claim_replies), (POINTS_STAGE, point_replies)):
        failed = next((reply for reply in asked if not reply.ok), None)
        if failed is not None:
            return OrderCheck(failed=str(RowError(stage=stage, error=failed.error)))
    check = OrderCheck()
    if claim_order:
        shuffled: list[list[tuple[str, str]]] = [[] for _ in claim_order]
        for reply in claim_replies:
            for asked_item, answer in zip(shuffled, reply.answer.verdicts):
                asked_item.append((answer.verdict, answer.reason))
        original = [combine_verdicts(per_repetition[0])[0] for per_repetition in verdicts]
        check.checked += len(claim_order)
        check.changed += changed_answers(original, [combine_verdicts(v)[0] for v in shuffled], claim_order)
    if point_order:
        original_points = [point.covered for point in key_points or []]
        check.checked += len(point_order)
        check.changed += changed_answers(original_points, [a.covered == "yes" for a in point_replies[0].answer.covered], point_order)
    return check
