"""Judgement records -> the same records with the model-free check added (``grounding`` package).

Each row gets its ``grounding`` (the score, the flag at the model's threshold, the reasoning), whatever the judge
did: the check needs no judge, so a row the judge failed on still has it. Each judged claim gets its
``lexical_support`` and whether its verdict is ``suspect``. Both go through the grounding cache, so a rerun
recomputes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..grounding.cache import GroundingCache, cached_groundings, cached_supports
from ..grounding.model import load_model
from ..grounding.scoring import suspect
from ..judge import Judge
from .records import RowInput, RowJudgement


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT_GROUNDING_CACHE"


DEFAULT_GROUNDING_CACHE = _Default()  # the judge's cache folder, or the default folder when there is no judge


def grounding_cache(judge: Judge | None, cache_dir: str | os.PathLike[str] | None | _Default = DEFAULT_GROUNDING_CACHE) -> GroundingCache | None:
    """The grounding cache to use: beside the judge's (none when the judge's cache is off), ``cache_dir`` when
    given, no cache for None."""
    if isinstance(cache_dir, _Default):
        if judge is None:
            return GroundingCache()
        return GroundingCache(judge.cache.directory) if judge.cache is not None else None
    return GroundingCache(cache_dir) if cache_dir is not None else None


def ground_judgements(rows: Sequence[RowInput], judgements: Sequence[RowJudgement], cache: GroundingCache | None) -> list[RowJudgement]:
    """``judgements`` (``rows[i]`` with ``judgements[i]``) with each row's grounding and each claim's support and
    suspect flag."""
    groundings, _, _ = cached_groundings([r.source for r in rows], [r.summary for r in rows], cache)
    claims = [(position, number, claim.claim) for position, j in enumerate(judgements) for number, claim in enumerate(j.claims)]
    supports = cached_supports([text for _, _, text in claims], [rows[position].source for position, _, _ in claims], cache)
    model = load_model()
    checked: dict[int, dict[int, tuple[float | None, bool]]] = {}
    for (position, number, _), support in zip(claims, supports):
        verdict = judgements[position].claims[number].verdict
        value = None if support != support else support  # NaN: a claim with no word to check
        checked.setdefault(position, {})[number] = (value, suspect(verdict, support, model=model))
    grounded = []
    for position, (judgement, grounding) in enumerate(zip(judgements, groundings)):
        flags = checked.get(position, {})
        claims_checked = [
            claim.model_copy(update={"lexical_support": flags[number][0], "suspect": flags[number][1]})
            for number, claim in enumerate(judgement.claims)
        ]
        grounded.append(judgement.model_copy(update={"grounding": grounding, "claims": claims_checked}))
    return grounded
