"""Sets of judges: ``summarization_scorers`` (the three judges with one judge), ``rewrite_scorers`` (a rewrite's
claims, key points and instruction, with one judge) and ``shared_pipeline`` (the
pipeline ``evaluate_summaries``, ``log_results`` and ``score_traces`` make for their call and judge with: each row
judged once, in one pass, for all of them).

Above ``judges`` (the scorers) and ``genai`` (the pipeline), so neither imports the other's users.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..judge import Judge
from ..stats import StatisticsOptions
from ..summarization.options import JudgingOptions
from .genai import Pipeline
from .judges import ClaimAlignment, Grounding, InstructionFollowing, KeyPointCoverage, _JudgedScorer, _SummaryScorer


def one_setting(judges: Sequence[Any], what: str, read: Any) -> Any:
    """What ``read`` gives for every judge of a set, which must be one value (``ValueError`` naming them): a set
    judges each row once for all its judges (summaries' and answers')."""
    values = {repr(read(j)): read(j) for j in judges}
    if len(values) > 1:
        raise ValueError(f"the judges of one set judge each row once, so they must share {what}; got {sorted(values)}")
    return next(iter(values.values()))


def shared_pipeline(
    judges: Sequence[_SummaryScorer], *, ter: bool = False, statistics: StatisticsOptions = StatisticsOptions()
) -> Pipeline:
    """One pipeline for ``judges`` (they must share the judge's settings and where the texts are), judging each
    row once for all of them; coverage only when a ``KeyPointCoverage`` is among them; TER against the references
    with ``ter``; the intervals as ``statistics`` say."""
    judged = [j for j in judges if isinstance(j, _JudgedScorer)]
    keys = one_setting(judges, "where the texts are (source_key, id_key, category_key)", _SummaryScorer.input_keys)
    if not judged:
        return Pipeline(None, options=JudgingOptions(coverage=False, ter=ter), statistics=statistics, keys=keys)
    one_setting(judged, "one judge's settings", lambda j: j.judge)
    options = JudgingOptions(
        coverage=any(isinstance(j, KeyPointCoverage) for j in judges), ter=ter,
        max_source_tokens=one_setting(judged, "max_source_tokens", lambda j: j.max_source_tokens),
        # rewrites are judged without the grounding check (as ``judge_rewrites``), unless a Grounding judge asks for it
        grounding=keys.instruction is None or any(isinstance(j, Grounding) for j in judges),
    )
    return Pipeline(judged[0].live_judge(), options=options, statistics=statistics, keys=keys)


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
) -> list:
    """The judges for ``mlflow.genai.evaluate`` with one judge: ``ClaimAlignment``, ``KeyPointCoverage`` (unless
    ``coverage=False``) and ``Grounding`` (unless ``grounding=False``). Each gives one feedback per row and asks only
    what its card needs, so no request is asked twice; MLflow aggregates the cards, and ``log_results`` logs the run's
    full report afterwards (``evaluate_summaries`` does both at once). ``instruction_key``: the rows are rewrites
    (``rewrite_scorers``)."""
    options = {"source_key": source_key, "id_key": id_key, "category_key": category_key, "instruction_key": instruction_key}
    judges: list = [ClaimAlignment(judge, max_source_tokens=max_source_tokens, **options)]
    if coverage:
        judges.append(KeyPointCoverage(judge, max_source_tokens=max_source_tokens, **options))
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
) -> list:
    """The judges of rewrites for ``mlflow.genai.evaluate`` with one judge: a row is ``{"inputs": {"input": text,
    "instruction": what was asked, "id": ...}, "outputs": rewrite}``. ``ClaimAlignment`` (no new facts: the rewrite's
    claims against its input), ``KeyPointCoverage`` (nothing lost; unless ``coverage=False``) and
    ``InstructionFollowing`` (the instruction followed). ``evaluate_rewrites`` logs the run's full report with them
    (``instruction_following`` among the headline figures), as ``judge_rewrites`` computes it."""
    judges = summarization_scorers(judge, coverage=coverage, grounding=False, source_key=source_key, id_key=id_key,
                                   max_source_tokens=max_source_tokens, instruction_key=instruction_key)
    return [*judges, InstructionFollowing(judge, max_source_tokens=max_source_tokens, source_key=source_key, id_key=id_key,
                                          instruction_key=instruction_key)]
