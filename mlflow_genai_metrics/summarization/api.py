"""``judge_summaries``: the public entry point of the summarization judgement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..grounding.model import model_tag
from ..judge import BatchOptions, Judge, Usage
from ..reference import corpus_scores, statistics_column, traditional_metrics
from ..signature import summarization_signature
from ..stats import StatisticsOptions
from ..tables import MissingColumnError
from .judging import judge_rows, prepare_rows, source_key
from .options import JudgingOptions, resolve
from .records import RowInput, RowJudgement
from .result import SummarizationResult
from .scoring import claims_table, key_points_table, rate_statistics, result_metrics, rows_table


def judge_summaries(
    sources: Sequence[str],
    summaries: Sequence[str],
    *,
    judge: Judge | None,
    ids: Sequence[Any] | None = None,
    references: Sequence[str | Sequence[str]] | None = None,
    options: JudgingOptions | None = None,
    statistics: StatisticsOptions | None = None,
    progress: bool | None = None,
    batch: bool | BatchOptions = False,
    **keywords: Any,
) -> SummarizationResult:
    """Judge each summary against its source: claims, yes/no/idk verification, key-point coverage.

    >>> result = judge_summaries(articles, summaries, judge=Judge("gpt-4o-mini"))
    >>> result.metrics["alignment"], result.metrics["alignment_ci_low"], result.metrics["richness"]
    >>> result.rows[["id", "claim_count", "aligned", "reasoning"]]

    What is judged is ``options`` (a ``JudgingOptions``; its docstring says each field), how the intervals are
    computed ``statistics`` (a ``stats.StatisticsOptions``); either one's fields may be given as keywords instead
    (``coverage=False``, ``resamples=200``), not both (``options.resolve``). ``references`` adds ROUGE, BLEU and
    chrF (``traditional_metrics``) to the rows and the metrics. ``judge=None`` asks no judge at all: the result holds the
    grounding check (and the reference and length metrics) only. Confidence intervals are Clopper-Pearson for
    proportions, the logit delta method for ratios (from 10 rows) and BCa bootstrap over rows for means (from 20). Bad input and bad options raise before any
    call is made, naming every bad row; a row the judge fails on keeps its ``error`` and gets no value.

    ``sources``, ``summaries``, ``ids`` and ``references`` are sequences in row order (lists, tuples, pandas
    Series, numpy arrays), paired by position; a mapping, a set or a DataFrame is refused, and so are pandas
    Series whose indexes differ (reset them, or pass lists).

    ``batch=True`` (or ``BatchOptions(...)``) asks the judge through batch files (OpenAI's Batches API at half the
    price, or vLLM's ``run_batch`` with ``BatchOptions(files_dir=..., command=...)``): the same answers into the same
    cache, each pass that needs earlier answers one more batch; see ``Judge.batched``.
    """
    options, statistics = resolve("judge_summaries", keywords, options, statistics)
    if batch and judge is not None and judge.settings.batch is None:
        batched = judge.batched(batch if isinstance(batch, BatchOptions) else None)
        try:
            return judge_summaries(sources, summaries, judge=batched, ids=ids, references=references, options=options,
                                   statistics=statistics, progress=progress)
        finally:
            judge.count_copy(batched)  # the Judge given is the one whose usage grows
            batched.close()
    rows = prepare_rows(sources, summaries, ids, references)
    options = options.for_judge(judge)
    judgements = judge_rows(rows, judge, options, progress=progress)
    return build_result(rows, judgements, judge=judge, options=options, statistics=statistics, references=references)


def build_result(
    rows: Sequence[RowInput],
    judgements: Sequence[RowJudgement],
    *,
    judge: Judge | None,
    options: JudgingOptions,
    statistics: StatisticsOptions = StatisticsOptions(),
    references: Sequence[str | Sequence[str]] | None = None,
    extra_columns: dict[str, Sequence[Any]] | None = None,
) -> SummarizationResult:
    """Tables, aggregates and signature from one judgement per row (``rows[i]`` goes with ``judgements[i]``), judged
    with ``options`` (its ``max_source_tokens`` settled: ``JudgingOptions.for_judge``, as the signature records it).

    ``extra_columns`` (e.g. ``{"category": [...]}``) are carried into ``result.rows`` after ``id``. With
    ``judge=None`` the rows carry no judge column and the metrics no judge usage.
    """
    usage = Usage.total([j.usage for j in judgements])
    table = rows_table(judgements, coverage=options.coverage, judged=judge is not None, grounding=options.grounding,
                       stability=judge is not None and options.method.repeated, order=judge is not None and options.method.order_checked)
    # the summary's fingerprint: a run keeps no texts, so this is how outputs given again are known to be its own
    table.insert(table.columns.get_loc("source_key") + 1, "output_key", [source_key(row.summary) for row in rows])
    for position, (name, values) in enumerate((extra_columns or {}).items(), start=1):
        table.insert(position, name, list(values))
    corpus, reference_signatures = None, None
    if references is not None:
        traditional = traditional_metrics([row.summary for row in rows], references, [row.source for row in rows], ter=options.ter)
        # sacreBLEU's per-row statistics travel with the rows: corpus BLEU, chrF and TER are compared pair by pair
        sufficient = pd.DataFrame({statistics_column(name): values for name, values in traditional.statistics.items()})
        sufficient["reference_key"] = traditional.reference_keys  # rows compare on these metrics only with the same reference
        corpus, reference_signatures = traditional.metrics, traditional.signatures
        # A row the application failed on has no output: no ROUGE, BLEU or length of its own (they were 0, an error
        # read as a score, and the run's rougeL stood on every row while its judge figures left those rows out).
        # Its statistics stay, for a decision that counts the failure against the candidate.
        failed = [j.error is not None and j.error.kind == "application" for j in judgements]
        if any(failed):
            traditional.rows.loc[failed, :] = float("nan")
            kept = [i for i, out in enumerate(failed) if not out]
            summed = {name: [sum(column) for column in zip(*(segments[i] for i in kept))] for name, segments in traditional.statistics.items()}
            corpus = {**corpus, **(corpus_scores(summed) if kept else dict.fromkeys(summed, float("nan")))}
        table = pd.concat([table, traditional.rows, sufficient], axis=1)
    histograms = {name: statistic.histogram() for name, statistic in rate_statistics(table).items()}
    found, metrics = result_metrics(
        histograms, usage if judge is not None else None, prices=judge.prices if judge is not None else None, corpus=corpus,
        statistics=statistics,
    )
    return SummarizationResult(
        rows=table,
        claims=claims_table(judgements),
        key_points=key_points_table(judgements),
        metrics=metrics,
        estimates=found,
        signature=summarization_signature(
            judge, coverage=options.coverage, max_source_tokens=options.max_source_tokens, response_mode=response_mode_of(usage),
            reference=reference_signatures, grounding=model_tag() if options.grounding else None, statistics=statistics,
            method=options.method, task=options.task,
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
    **keywords: Any,
) -> SummarizationResult:
    """``judge_summaries`` over the columns of a DataFrame (``keywords``: the rest of its arguments: ``options``,
    ``statistics`` or their fields, ``progress``, ``batch``)."""
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
        **keywords,
    )
