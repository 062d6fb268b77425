"""The order check: does the judge favour the first items of a list? On a fixed sample of rows
(``order_check=share``, ``summarization.method.Method``) a row's claims are verified again with the claims in a shuffled order (and, with
coverage, its key points checked again shuffled); each item's answer in the shuffled request is set beside its
answer in the request itself (the first repetition, under ``stability``), and the row counts the items compared
(``order_checked``) and those whose answer changed (``order_changed``). The run reports
``judge/order_sensitivity`` = changed / compared: 0 for a judge that reads each item on its own.

The sample and each row's order are drawn from a hash of the row's texts, so a rerun asks the very same shuffled
requests (cached: no call) and two runs of one dataset check the same rows. A row with one item has no other order
and is not compared. The shuffled requests cost one call per chunk of the source (and one for coverage) per
sampled row, in the estimate and the budget (each sampled row's earmark holds them from its start: ``row_needs``).

The check only measures: when a shuffled request fails (after its retries and repair, or refused by the budget),
the row keeps the verdicts of its own requests in every metric, and only its order check says so (``failed``;
``order_checked`` empty, the reason in the row's ``reasoning``). Such a row is not stored whole, so a rerun asks the
shuffled request again (``summarization.order_pass``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from pydantic import BaseModel


class OrderCheck(BaseModel):
    """A row's order check: the items whose answers were compared, and those that changed when shuffled; or why
    nothing was compared (``failed``: a shuffled request got no answer, or the budget had no room for it)."""

    checked: int = 0
    changed: int = 0
    failed: str | None = None  # e.g. "order check (claims verified again, shuffled) failed: server_error (HTTP 500): ..."


def _draw(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def hashed_fraction(key: str) -> float:
    """A number in [0, 1) drawn from a hash of ``key``: the same key, the same number, in every process."""
    return _draw(key) / 2**64


def in_sample(source_key: str, text: str, share: float) -> bool:
    """Is this row among the ``share`` of rows the order check asks again? (A hash of its texts decides.)"""
    return share > 0 and hashed_fraction(f"order-sample\0{source_key}\0{text}") < share


def shuffled_order(count: int, source_key: str, text: str) -> list[int]:
    """A permutation of ``range(count)`` that is not the identity (count >= 2), drawn from the row's texts:
    ``order[j]`` is the original position of the item asked j-th."""
    order = list(range(count))
    random.Random(_draw(f"order\0{source_key}\0{text}")).shuffle(order)
    if count >= 2 and order == sorted(order):
        order = order[1:] + order[:1]
    return order


def changed_answers(original: Sequence[object], asked_shuffled: Sequence[object], order: Sequence[int]) -> int:
    """How many items' answers differ between the request itself (``original``, by position) and the shuffled
    one (``asked_shuffled``, in ``order``)."""
    return sum(original[position] != answer for position, answer in zip(order, asked_shuffled))
