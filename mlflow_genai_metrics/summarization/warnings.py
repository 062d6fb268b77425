"""Warnings about a run as a whole: when its numbers cannot mean what they seem to.

A judge that answers ``idk`` to nearly every claim, or supports none, verified almost nothing: every summary,
good or bad, gets the same "not faithful" verdict, so the run's faithfulness figures describe the judge, not the
summaries (a model too small for the task, a prompt it does not follow, a source it never saw). The warning is
computed from the per-row table's ``claim_count``, ``supported_claims`` and ``unverifiable_claims``, so it reads
the same from a result in memory, a logged run's rows (``load_run(run_id).rows``) and Spark's sums.

    warning = low_verification_warning(result.rows)
    if warning is not None:
        print(f"WARNING: {warning}")   # the judge verified almost nothing (idk for 85% of 40 claims): ...

An endpoint that reports more tokens than a request could produce (more completion tokens than its ``max_tokens``)
miscounts: its calls are priced at their worst case instead (``judge.budget.credible_usage``), and the run says how
many (``implausible_usage``, from the run's usage: ``Usage.implausible_usage``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..judge import Usage

IMPLAUSIBLE_USAGE = "implausible_usage"
LOW_VERIFICATION = "low_verification"
UNVERIFIABLE_SHARE = 0.8  # idk for this share of the judged claims or more: the judge verified almost nothing
_COUNTS = ("claim_count", "supported_claims", "unverifiable_claims")


@dataclass(frozen=True)
class RunWarning:
    """One warning about a run: ``kind`` (a short name, e.g. ``low_verification``) and the sentence a user reads."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message


def _percent(share: float) -> str:
    """``85%``; never ``100%`` for a share below 1, nor ``0%`` above 0 (399 of 400 reads ``99%``)."""
    shown = round(share * 100)
    return f"{min(max(shown, 1 if share > 0 else 0), 99 if share < 1 else 100)}%"


def verification_warning(claims: int, supported: int, unverifiable: int) -> RunWarning | None:
    """The low-verification warning from a run's claim counts (over its judged rows), or None.

    It is raised when at least one claim was judged and either ``idk`` is ``UNVERIFIABLE_SHARE`` (80%) of the
    claims or more, or no claim is supported (``yes``).

        verification_warning(40, 2, 34).message
        # 'the judge verified almost nothing (idk for 85% of 40 claims): it cannot tell a good summary from a bad one'
    """
    if claims <= 0:
        return None
    plural = "claim" if claims == 1 else "claims"
    share = unverifiable / claims
    if share >= UNVERIFIABLE_SHARE:
        why = f"idk for {_percent(share)} of {claims} {plural}"
    elif supported == 0:
        contradicted = claims - unverifiable
        why = f"no claim supported: {contradicted} contradicted and {unverifiable} idk of {claims} {plural}"
    else:
        return None
    return RunWarning(LOW_VERIFICATION, f"the judge verified almost nothing ({why}): it cannot tell a good summary from a bad one")


def _total(rows: pd.DataFrame, column: str) -> int:
    total = pd.to_numeric(rows[column], errors="coerce").sum()  # failed rows are empty: they count in no sum
    return int(total) if math.isfinite(total) else 0


def low_verification_warning(rows: pd.DataFrame) -> RunWarning | None:
    """``verification_warning`` over a per-row table (a result's ``rows``, a logged run's); None when the table has
    no claim counts (the grounding check alone) or no judged claim."""
    if any(column not in rows for column in _COUNTS):
        return None
    claims, supported, unverifiable = (_total(rows, column) for column in _COUNTS)
    return verification_warning(claims, supported, unverifiable)


def implausible_usage_warning(calls: int) -> RunWarning | None:
    """The warning for ``calls`` replies whose token counts no request like theirs could produce, or None.

        implausible_usage_warning(2).message
        # '2 calls reported more tokens than the request could produce; priced at their worst case'
    """
    if calls <= 0:
        return None
    counted = "1 call" if calls == 1 else f"{calls} calls"
    return RunWarning(IMPLAUSIBLE_USAGE, f"{counted} reported more tokens than the request could produce; priced at their worst case")


def run_warnings(rows: pd.DataFrame, usage: Usage | None = None) -> list[RunWarning]:
    """Every warning a per-row table (and the run's ``usage``, when known) calls for, in the order they are shown."""
    found = (low_verification_warning(rows), implausible_usage_warning(usage.implausible_usage) if usage is not None else None)
    return [w for w in found if w is not None]
