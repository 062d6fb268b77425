"""Verdict stability: each verification asked ``k`` times (``stability=k``, ``summarization.method.Method``), as distinct requests with a
seed each (``JudgeRequest.repeated``), so each repetition is cached apart and an identical rerun asks nothing.

Each repetition judges a claim whole (its verdicts over the source's chunks combined as usual); the claim's verdict
is the repetitions' majority, ``agreement`` the share of repetitions that gave it, and a claim is *unstable* when
they did not all agree. With no majority (yes, no and idk once each; or a tie at an even k) the claim is idk: the
judge could not settle it. Every metric is computed from the majority verdicts, as from single ones; beside them
each row counts its ``unstable_claims`` and the run reports ``judge/flip_rate`` (unstable claims / judged claims).
At temperature 0 the repetitions differ only as far as the endpoint is not deterministic: set the temperature the
judge will be used at. A decision can require stability (``counted_against``): the candidate's unstable claims
are then counted as contradicted, so a beat rule that holds only through them fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from .metrics import METRICS, row_facts
from .records import CheckedClaim, RowJudgement


def majority_verdict(per_repetition: Sequence[tuple[str, str]]) -> tuple[str, str, float]:
    """(verdict, reason) of each repetition -> the majority (verdict, reason of its first repetition, agreement);
    idk with the first reason when no verdict has more than half the votes (yes twice, no and idk once each at k=4
    is not settled: a plurality once made it yes)."""
    votes = Counter(verdict for verdict, _ in per_repetition)
    verdict, count = votes.most_common(1)[0]
    if 2 * count <= len(per_repetition):
        return "idk", per_repetition[0][1], count / len(per_repetition)
    reason = next(reason for given, reason in per_repetition if given == verdict)
    return verdict, reason, votes[verdict] / len(per_repetition)


def counted_against(rows: pd.DataFrame, claims: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``rows`` with each row's claim values (the registry's "judge" family) recomputed as if every unstable claim of
    ``claims`` (``agreement`` below 1) were contradicted: the worst its repetitions leave open. Returns the rows and
    how many claims were counted so. A row with no unstable claim keeps its values; key points are untouched."""
    if "agreement" not in claims or "id" not in rows:
        return rows, 0
    unstable = claims["agreement"].fillna(1.0) < 1.0
    if not unstable.any():
        return rows, 0
    out = rows.copy()
    specs = [spec for spec in METRICS.rows("judge") if spec.name in out]
    ids = out["id"].astype(str)
    for row_id, group in claims.assign(_unstable=unstable).groupby(claims["id"].astype(str)):
        if not group["_unstable"].any():
            continue
        checked = [CheckedClaim(claim=str(claim), verdict="no" if shaky else verdict, reason="")
                   for claim, verdict, shaky in zip(group["claim"], group["verdict"], group["_unstable"])]
        facts = row_facts(RowJudgement(id=row_id, source_key="", claims=checked))
        at = ids == row_id
        for spec in specs:
            out.loc[at, spec.name] = spec.row_value(facts)
    return out, int(unstable.sum())
