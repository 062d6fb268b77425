"""Sets of judges made with one judge: ``summarization_scorers`` (the three summary judges) and ``rewrite_scorers``
(a rewrite's claims, key points and instruction). A set given to ``evaluate`` judges each row once for all of them
(``_SummaryScorer.set_pipeline``)."""

from __future__ import annotations

from typing import Any

from ..judge import Judge
from ..summarization.method import method_of
from .judges import ClaimAlignment, Grounding, InstructionFollowing, KeyPointCoverage


def summarization_scorers(
    judge: Judge,
    *,
    coverage: bool = True,
    grounding: bool = True,
    source_key: str = "text",
    id_key: str = "id",
    category_key: str = "category",
    max_source_tokens: int | None = None,
    instruction_key: str | None = None,
    **method: Any,
) -> list:
    """The judges for ``mlflow.genai.evaluate`` with one judge: ``ClaimAlignment``, ``KeyPointCoverage`` (unless
    ``coverage=False``) and ``Grounding`` (unless ``grounding=False``). Each gives one feedback per row and asks only
    what its card needs, so no request is asked twice; MLflow aggregates the cards, and ``log_results`` logs the run's
    full report afterwards (``evaluate_summaries`` does both at once). ``instruction_key``: the rows are rewrites
    (``rewrite_scorers``). ``method``: how claims are verified (``stability``, ``order_check``, ``examples``), the
    same for every judge of the set."""
    options = {"source_key": source_key, "id_key": id_key, "category_key": category_key, "instruction_key": instruction_key}
    asking = {"max_source_tokens": max_source_tokens, **dict(method_of("summarization_scorers", method))}
    judges: list = [ClaimAlignment(judge, **asking, **options)]
    if coverage:
        judges.append(KeyPointCoverage(judge, **asking, **options))
    if grounding:
        judges.append(Grounding(**options))
    return judges


def rewrite_scorers(
    judge: Judge,
    *,
    coverage: bool = True,
    source_key: str = "input",
    instruction_key: str = "instruction",
    id_key: str = "id",
    max_source_tokens: int | None = None,
    **method: Any,
) -> list:
    """The judges of rewrites for ``mlflow.genai.evaluate`` with one judge: a row is ``{"inputs": {"input": text,
    "instruction": what was asked, "id": ...}, "outputs": rewrite}``. ``ClaimAlignment`` (no new facts: the rewrite's
    claims against its input), ``KeyPointCoverage`` (nothing lost; unless ``coverage=False``) and
    ``InstructionFollowing`` (the instruction followed). ``evaluate_rewrites`` logs the run's full report with them
    (``instruction_following`` among the headline figures), as ``judge_rewrites`` computes it."""
    judges = summarization_scorers(judge, coverage=coverage, grounding=False, source_key=source_key, id_key=id_key,
                                   max_source_tokens=max_source_tokens, instruction_key=instruction_key, **method)
    return [*judges, InstructionFollowing(judge, max_source_tokens=max_source_tokens, source_key=source_key, id_key=id_key,
                                          instruction_key=instruction_key, **method)]
