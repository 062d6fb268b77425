"""``judge_summaries``: the public entry point of the summarization judgement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..grounding.model import model_tag
from ..judge import BatchOptions, Judge, Usage
from ..signature import summarization_signature
from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from ..tables import MissingColumnError
from ..reference import statistics_column, traditional_metrics
from .judging import check_settings, judge_rows, prepare_rows
from .records import RowInput, RowJudgement
from .result import SummarizationResult
from .scoring import claims_table, key_points_table, rate_statistics, result_metrics, rows_table

__all__ = ["build_result", "response_mode_of", "judge_summaries", "judge_summaries_frame", "source_token_budget"]

# Room the verification prompt needs besides the source: instructions, up to 60 numbered claims, and the answer.
PROMPT_RESERVE_TOKENS = 3072


def source_token_budget(judge: Judge | None) -> int | None:
    """How many tokens of source fit in one verification call of this judge (None: no limit known, or no judge)."""
    if judge is None or judge.context_window is None:
        return None
    return max(judge.context_window - PROMPT_RESERVE_TOKENS, 256)


def judge_summaries(
    sources: Sequence[str],
    summaries: Sequence[str],
    *,
    judge: Judge | None,
    ids: Sequence[Any] | None = None,
    references: Sequence[str | Sequence[str]] | None = None,
    coverage: bool = True,
    grounding: bool = True,
    ter: bool = False,
    max_source_tokens: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    progress: bool | None = None,
    batch: bool | BatchOptions = False,
) -> SummarizationResult:
    """Judge each summary against its source: claims, yes/no/idk verification, key-point coverage.

    >>> result = judge_summaries(articles, summaries, judge=Judge("gpt-4o-mini"))
    >>> result.metrics["alignment"], result.metrics["alignment_ci_low"], result.metrics["richness"]
    >>> result.rows[["id", "claim_count", "aligned", "reasoning"]]

    ``references`` adds ROUGE, BLEU and chrF (``traditional_metrics``; TER too with ``ter=True``) to the rows and the
    metrics. ``grounding=True`` (the default) adds the model-free check: ``grounding`` and ``grounded`` per row
    with their aggregates, and on each judged claim its ``lexical_support`` and whether the verdict is ``suspect``
    (``suspect_verdicts`` per row, ``judge/suspect_rate`` per run). ``judge=None`` asks no judge at all: the
    result holds the grounding check (and the reference and length metrics) only. Sources longer
    than ``max_source_tokens`` (default: what ``judge.context_window`` leaves room for; no limit when unknown) are
    verified chunk by chunk, and the verdicts combined (see ``chunking``). Confidence intervals are Wilson for
    proportions and BCa bootstrap over rows for means and ratios (``resamples``, fixed ``seed``; from 20 rows). Bad input raises before any call is made,
    naming every bad row; a row the judge fails on keeps its ``error`` and gets no value.

    ``sources``, ``summaries``, ``ids`` and ``references`` are sequences in row order (lists, tuples, pandas
    Series, numpy arrays), paired by position; a mapping, a set or a DataFrame is refused, and so are pandas
    Series whose indexes differ (reset them, or pass lists).

    ``batch=True`` (or ``BatchOptions(...)``) asks the judge through batch files (OpenAI's Batches API at half the
    price, or vLLM's ``run_batch`` with ``BatchOptions(files_dir=..., command=...)``): the same answers into the same
    cache, each pass that needs earlier answers one more batch; see ``Judge.batched``.
    """
    if batch and judge is not None and judge.settings.batch is None:
        batched = judge.batched(batch if isinstance(batch, BatchOptions) else None)
        try:
            return judge_summaries(sources, summaries, judge=batched, ids=ids, references=references, coverage=coverage,
                                   grounding=grounding, ter=ter, max_source_tokens=max_source_tokens, resamples=resamples,
                                   seed=seed, confidence=confidence, progress=progress)
        finally:
            batched.close()
    check_settings(resamples=resamples, confidence=confidence, seed=seed, max_source_tokens=max_source_tokens)
    rows = prepare_rows(sources, summaries, ids, references)
    if max_source_tokens is None:
        max_source_tokens = source_token_budget(judge)
    judgements = judge_rows(rows, judge, coverage=coverage, max_source_tokens=max_source_tokens, progress=progress, grounding=grounding)
    return build_result(
        rows,
        judgements,
        judge=judge,
        coverage=coverage,
        grounding=grounding,
        max_source_tokens=max_source_tokens,
        references=references,
        ter=ter,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )


def build_result(
    rows: Sequence[RowInput],
    judgements: Sequence[RowJudgement],
    *,
    judge: Judge | None,
    coverage: bool,
    max_source_tokens: int | None,
    grounding: bool = True,
    references: Sequence[str | Sequence[str]] | None = None,
    extra_columns: dict[str, Sequence[Any]] | None = None,
    ter: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> SummarizationResult:
    """Tables, aggregates and signature from one judgement per row (``rows[i]`` goes with ``judgements[i]``).

    ``extra_columns`` (e.g. ``{"category": [...]}``) are carried into ``result.rows`` after ``id``. With
    ``judge=None`` the rows carry no judge column and the metrics no judge usage.
    """
    usage = Usage.total([j.usage for j in judgements])
    table = rows_table(judgements, coverage=coverage, judged=judge is not None, grounding=grounding)
    for position, (name, values) in enumerate((extra_columns or {}).items(), start=1):
        table.insert(position, name, list(values))
    corpus, reference_signatures = None, None
    if references is not None:
        traditional = traditional_metrics([row.summary for row in rows], references, [row.source for row in rows], ter=ter)
        # sacreBLEU's per-row statistics travel with the rows: corpus BLEU, chrF and TER are compared pair by pair
        statistics = pd.DataFrame({statistics_column(name): values for name, values in traditional.statistics.items()})
        statistics["reference_key"] = traditional.reference_keys  # rows compare on these metrics only with the same reference
        table = pd.concat([table, traditional.rows, statistics], axis=1)
        corpus, reference_signatures = traditional.metrics, traditional.signatures
    histograms = {name: statistic.histogram() for name, statistic in rate_statistics(table).items()}
    found, metrics = result_metrics(
        histograms, usage if judge is not None else None, prices=judge.prices if judge is not None else None, corpus=corpus,
        resamples=resamples, seed=seed, confidence=confidence,
    )
    return SummarizationResult(
        rows=table,
        claims=claims_table(judgements),
        key_points=key_points_table(judgements),
        metrics=metrics,
        estimates=found,
        signature=summarization_signature(
            judge, coverage=coverage, max_source_tokens=max_source_tokens, response_mode=response_mode_of(usage),
            reference=reference_signatures, grounding=model_tag() if grounding else None,
            resamples=resamples, confidence=confidence, bootstrap_seed=seed,
        ),
        judgements=list(judgements),
        usage=usage,
        reported_models=dict(usage.reported_models),
    )


def response_mode_of(usage: Usage) -> str | None:
    """The response mode the judge's replies came in ("mixed" if they differ; None if no structured reply came)."""
    modes = sorted(usage.response_modes)
    return None if not modes else modes[0] if len(modes) == 1 else "mixed:" + "+".join(modes)


def judge_summaries_frame(
    frame: pd.DataFrame,
    *,
    judge: Judge,
    source_col: str = "source",
    summary_col: str = "summary",
    id_col: str | None = None,
    reference_col: str | None = None,
    **options: Any,
) -> SummarizationResult:
    """``judge_summaries`` over the columns of a DataFrame."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"judge_summaries_frame needs a pandas DataFrame, not {type(frame).__name__}; use judge_summaries for lists")
    missing = [c for c in (source_col, summary_col, id_col, reference_col) if c is not None and c not in frame.columns]
    if missing:
        raise MissingColumnError(f"the DataFrame has no column {missing}; it has {list(frame.columns)}")
    return judge_summaries(
        frame[source_col],
        frame[summary_col],
        judge=judge,
        ids=frame[id_col] if id_col else None,
        references=frame[reference_col] if reference_col else None,
        **options,
    )
