"""The model-free check on an answer's claims, passage by passage: each judged claim's ``lexical_support`` is its
support in the passage that supports it best (the grounding model's, as for a summary's claim against its source),
and its verdict is ``suspect`` when it disagrees sharply with that support (yes to a claim no passage holds, no or
idk to one a passage plainly states). Through the grounding cache beside the judge's, so a rerun recomputes nothing.
A claim or passage the check cannot read (another language or script) has no support and is never suspect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..grounding.cache import cached_supports
from ..grounding.model import load_model
from ..grounding.scoring import suspect
from ..judge import Judge
from ..summarization.grounded import grounding_cache
from .records import AnswerInput, AnswerJudgement


def check_against_passages(rows: Sequence[AnswerInput], judgements: Sequence[AnswerJudgement], judge: Judge) -> list[AnswerJudgement]:
    """``judgements`` (``rows[i]`` with ``judgements[i]``) with each judged claim's support in its best passage and
    its suspect flag; a row the judge failed on, or one with no passage, is returned as it is (nothing to check)."""
    asked = [(position, number, passage)
             for position, (row, judgement) in enumerate(zip(rows, judgements)) if judgement.error is None
             for number in range(len(judgement.claims)) for passage in row.passages]
    supports = cached_supports([judgements[p].claims[n].claim for p, n, _ in asked], [passage for _, _, passage in asked], grounding_cache(judge))
    best: dict[tuple[int, int], float] = {}
    for (position, number, _), support in zip(asked, supports):
        if not math.isnan(support):
            best[(position, number)] = max(support, best.get((position, number), -math.inf))
    model = load_model()
    checked = []
    for position, (row, judgement) in enumerate(zip(rows, judgements)):
        if judgement.error is not None or not row.passages:
            checked.append(judgement)
            continue
        claims = []
        for number, claim in enumerate(judgement.claims):
            support = best.get((position, number))
            flag = support is not None and suspect(claim.verdict, support, model=model)
            claims.append(claim.model_copy(update={"lexical_support": support, "suspect": flag}))
        checked.append(judgement.model_copy(update={"claims": claims}))
    return checked
