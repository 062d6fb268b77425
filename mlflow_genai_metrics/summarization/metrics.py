"""The metric registry: every metric, once, with what it is and how it is computed.

Each ``MetricSpec`` says whether a metric is per row or an aggregate, whether greater is better, which column
explains a row's value, what kind of number it is (a proportion gets the Clopper-Pearson interval, a ratio the
logit delta method, a mean the bootstrap, a corpus statistic its own computation) and where it comes from (the judge, a reference, the texts).
Every adapter iterates the registry: the per-row table, the aggregates and their intervals, the MLflow metrics and
scorers, Spark, the comparison, the plots, the CLI and the gate's validation. Adding a metric is one entry plus its
computation::

    from mlflow_genai_metrics.summarization.metrics import MetricSpec, METRICS

    METRICS.register(MetricSpec("long_summary", level="row", description="more than 5 claims",
                                greater_is_better=False, row_value=lambda facts: int((facts.claim_count or 0) > 5)))
    METRICS.register(MetricSpec("long_summary_rate", level="aggregate", description="share of long summaries",
                                greater_is_better=False, kind="proportion", of="long_summary"))
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from ..stats import RatioStatistic
from .records import RowJudgement

Level = Literal["row", "aggregate"]
Kind = Literal["proportion", "mean", "ratio", "corpus"]
# "suspect": the judge's verdicts checked by the grounding model (needs both); "rag": what only answers from
# retrieved passages have (``rag.scoring`` computes their row values); "rewrite": what only rewrites have
# (``rewrites.api`` computes their row values)
# "stability": how far the judge's repeated verifications agree (``stability=k``, k > 1); "order": whether its
# answers change when a list is asked in another order (``order_check=share``)
Family = Literal["judge", "coverage", "reference", "length", "usage", "grounding", "suspect", "rag", "rewrite", "stability", "order"]


@dataclass(frozen=True)
class RowFacts:
    """What a judged row's values are computed from, counted once per row. ``None`` counts mean the row failed
    (every judge value is then empty, never 0); ``key_points`` is None when coverage was not asked for."""

    judgement: RowJudgement
    claim_count: int | None
    supported: int | None
    contradicted: int | None
    unverifiable: int | None
    key_points: int | None
    covered: int | None
    # the model-free check: it needs no judge, so a failed row still has it (None when the check is off)
    grounding: float | None = None
    grounded: int | None = None
    suspects: int | None = None  # judged claims whose verdict the check finds suspect (None: not checked)
    unstable: int | None = None  # judged claims whose repeated verifications disagreed (None: asked once)
    order_checked: int | None = None  # items asked again shuffled (None: not in the order check's sample, or it failed)
    order_changed: int | None = None


def closest_names(unknown: list[str], known: list[str] | set[str], *, most: int = 3) -> str:
    """The names in ``unknown``, each with the (at most ``most``) closest of ``known``: ``'alignmnet' (closest:
    alignment, alignment_n)``, or ``'x' (nothing close)``. What an error about a mistyped metric says, instead of
    listing every name there is."""
    candidates = sorted(known)
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, candidates, n=most, cutoff=0.5)
        parts.append(f"{name!r} (closest: {', '.join(close)})" if close else f"{name!r} (nothing close)")
    return "; ".join(parts)


# The run metrics an MLflow run gets by default (each with its interval and n), and the judge's calls and cost: the
# headline a person reads in the runs table and the Model metrics tab (38 names at most). Every other figure is in
# the run's report (``mgm/report.json``), which gates and comparisons read too; ``all_metrics=True`` logs them all.
RUN_METRICS = ("strict_alignment", "alignment", "defect_rate/contradiction", "richness", "coverage", "judge_error_rate",
               "grounding", "grounded_rate", "rougeL")
# An answers run's own headline beside the claim figures above (a summary run has none of them).
ANSWER_RUN_METRICS = ("answer_relevance", "context_utilisation", "context_sufficiency", "quote_failure_rate")
REWRITE_RUN_METRICS = ("instruction_following",)  # a rewrites run's own, beside the claim and coverage figures
# the flip rate only with stability k > 1, the order sensitivity only with an order check
RUN_USAGE = ("judge/calls", "judge/cost_usd", "judge/flip_rate", "judge/order_sensitivity")


def run_metrics(metrics: dict[str, float], *, all_metrics: bool = False) -> dict[str, float]:
    """The figures of ``metrics`` an MLflow run logs as metrics: the headline ones (``RUN_METRICS`` and ``ANSWER_RUN_METRICS`` with their
    ``_ci_low``, ``_ci_high`` and ``_n``, and ``RUN_USAGE``), or every one with ``all_metrics``; in the order MLflow's
    run lists show their columns in: the headline figures (``strict_alignment`` first), the others, then the intervals and counts."""
    heads = (*RUN_METRICS, *ANSWER_RUN_METRICS, *REWRITE_RUN_METRICS)
    chosen = {name for base in heads for name in (base, f"{base}_ci_low", f"{base}_ci_high", f"{base}_n")}
    kept = metrics if all_metrics else {name: value for name, value in metrics.items() if name in chosen or name in RUN_USAGE}

    def place(name: str) -> tuple[bool, int]:  # the figure's own column before its interval's and count's
        base = name.rsplit("_ci_", 1)[0] if "_ci_" in name else name.removesuffix("_n")
        return base != name, heads.index(base) if base in heads else len(heads)

    return {name: kept[name] for name in sorted(kept, key=place)}


def row_facts(judgement: RowJudgement) -> RowFacts:
    checked = judgement.grounding
    grounding = dict(grounding=checked.grounding, grounded=checked.grounded) if checked is not None else {}
    if judgement.error is not None or not judgement.judged:
        return RowFacts(judgement, None, None, None, None, None, None, **grounding)
    verdicts = [claim.verdict for claim in judgement.claims]
    points = judgement.key_points
    flags = [claim.suspect for claim in judgement.claims]
    unstable = [claim.unstable for claim in judgement.claims]
    compared = judgement.order_check is not None and judgement.order_check.failed is None  # failed: compared nothing
    return RowFacts(
        judgement,
        claim_count=len(verdicts),
        supported=verdicts.count("yes"),
        contradicted=verdicts.count("no"),
        unverifiable=verdicts.count("idk"),
        key_points=len(points) if points else None,
        covered=sum(p.covered for p in points) if points else None,
        # checked claims: a summary's with its row's grounding, an answer's against its passages (no row grounding)
        suspects=None if None in flags or (checked is None and not flags) else sum(flags),
        unstable=None if None in unstable else sum(unstable),
        order_checked=judgement.order_check.checked if compared else None,
        order_changed=judgement.order_check.changed if compared else None,
        **grounding,
    )


@dataclass(frozen=True)
class MetricSpec:
    """One metric. Row metrics of the judge give ``row_value``; aggregates give ``kind`` and either ``of`` (the row
    column whose mean over the rows that count they are) or ``statistic`` (a ratio of row sums)."""

    name: str
    level: Level
    description: str
    greater_is_better: bool
    family: Family = "judge"
    # row metrics
    row_value: Callable[[RowFacts], float | int | None] | None = None
    integer: bool = False
    reasoning: str | None = "reasoning"  # the column that explains a row's value
    # aggregates
    kind: Kind | None = None
    of: str | None = None
    over: Literal["judged", "all"] = "judged"  # judge aggregates leave failed rows out of the denominator
    statistic: Callable[[pd.DataFrame], RatioStatistic] | None = None
    reads: tuple[str, ...] = ()  # the row columns a ``statistic`` reads (computed only when the rows have them)
    share: bool = False  # a value in [0, 1], plotted on a share axis
    headline: bool = False  # shown first by the CLI and the comparison

    def __post_init__(self) -> None:
        if self.level == "aggregate" and self.kind is None:
            raise ValueError(f"aggregate {self.name!r} needs a kind (proportion, mean, ratio or corpus)")
        if self.level == "aggregate" and self.kind != "corpus" and (self.of is None) == (self.statistic is None):
            raise ValueError(f"aggregate {self.name!r} needs exactly one of `of` (a row column) and `statistic`")

    @property
    def has_interval(self) -> bool:
        """Every aggregate computed from row sums has an interval and n; a corpus statistic has its own."""
        return self.level == "aggregate" and self.kind != "corpus"

    @property
    def columns(self) -> tuple[str, ...]:
        """The row columns an aggregate reads: it is computed only when the rows have them."""
        return (self.of,) if self.of else self.reads

    def ratio_statistic(self, rows: pd.DataFrame) -> RatioStatistic:
        if self.statistic is not None:
            return self.statistic(rows)
        values = _column(rows, self.of)
        return RatioStatistic.mean_of(values, judged(rows) if self.over == "judged" else None)


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].to_numpy(dtype=float, na_value=np.nan)


def failed(rows: pd.DataFrame) -> np.ndarray:
    """1.0 for each row the judge failed on (it has an error), else 0.0."""
    return (rows["error"].fillna("").astype(str) != "").to_numpy(dtype=float)


def judged(rows: pd.DataFrame) -> np.ndarray:
    return 1.0 - failed(rows)


@dataclass
class MetricRegistry:
    """An ordered set of ``MetricSpec``s; the package's one instance is ``METRICS``."""

    specs: list[MetricSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"specs": list(self.specs)}  # a registry travels to Spark's workers; its lock does not

    def __setstate__(self, state: dict) -> None:
        self.specs = state["specs"]
        self.__post_init__()

    def snapshot(self) -> MetricRegistry:
        """A copy with the metrics registered now (what a Spark job takes to its workers)."""
        return MetricRegistry(list(self.specs))

    def register(self, spec: MetricSpec) -> MetricSpec:
        with self._lock:
            if any(s.name == spec.name and s.level == spec.level for s in self.specs):
                raise ValueError(f"a {spec.level} metric named {spec.name!r} is already registered")
            self.specs.append(spec)
        return spec

    def unregister(self, name: str, level: Level | None = None) -> None:
        with self._lock:
            self.specs = [s for s in self.specs if not (s.name == name and (level is None or s.level == level))]

    @contextmanager
    def registered(self, *specs: MetricSpec) -> Iterator[MetricRegistry]:
        """Register ``specs`` for the duration of a ``with`` block."""
        for spec in specs:
            self.register(spec)
        try:
            yield self
        finally:
            for spec in specs:
                self.unregister(spec.name, spec.level)

    def rows(self, *families: Family) -> list[MetricSpec]:
        return [s for s in list(self.specs) if s.level == "row" and (not families or s.family in families)]

    def aggregates(self, *families: Family) -> list[MetricSpec]:
        return [s for s in list(self.specs) if s.level == "aggregate" and (not families or s.family in families)]

    def aggregate(self, name: str) -> MetricSpec | None:
        return next((s for s in self.specs if s.level == "aggregate" and s.name == name), None)

    def row(self, name: str) -> MetricSpec | None:
        return next((s for s in self.specs if s.level == "row" and s.name == name), None)


def _ratio(rate: Callable[[RowFacts], float | None]) -> Callable[[RowFacts], float | None]:
    return lambda facts: None if facts.claim_count is None else rate(facts)


def _flag(test: Callable[[RowFacts], bool]) -> Callable[[RowFacts], int | None]:
    return lambda facts: None if facts.claim_count is None else int(test(facts))


def _claim_support(rows: pd.DataFrame) -> RatioStatistic:
    return RatioStatistic(np.nan_to_num(_column(rows, "supported_claims")), np.nan_to_num(_column(rows, "claim_count")))


def _error_rate(rows: pd.DataFrame) -> RatioStatistic:
    return RatioStatistic.mean_of(failed(rows))


def _row(name, description, greater, value, *, integer=True, family="judge", reasoning="reasoning") -> MetricSpec:
    return MetricSpec(name, "row", description, greater, family=family, row_value=value, integer=integer, reasoning=reasoning)


def _aggregate(name, description, greater, kind, *, of=None, statistic=None, reads=(), family="judge", over="judged", share=True, headline=False) -> MetricSpec:
    return MetricSpec(
        name, "aggregate", description, greater, family=family, kind=kind, of=of, statistic=statistic, reads=reads,
        over=over, share=share, headline=headline,
    )


def _quote_failures(rows: pd.DataFrame) -> RatioStatistic:
    """Claims whose quote was not found / claims, over the judged rows."""
    return RatioStatistic(np.nan_to_num(_column(rows, "quote_failures")), np.nan_to_num(_column(rows, "claim_count")))


def _order_sensitivity(rows: pd.DataFrame) -> RatioStatistic:
    """Answers changed when shuffled / answers compared, over the judged rows of the order check's sample."""
    return RatioStatistic(np.nan_to_num(_column(rows, "order_changed")), np.nan_to_num(_column(rows, "order_checked")))


def _flip_rate(rows: pd.DataFrame) -> RatioStatistic:
    """Unstable claims / judged claims, over the judged rows (``summarization.stability``)."""
    unstable = _column(rows, "unstable_claims")
    judged = ~np.isnan(unstable)
    return RatioStatistic(np.where(judged, unstable, 0.0), np.where(judged, np.nan_to_num(_column(rows, "claim_count")), 0.0))


def _suspect_rate(rows: pd.DataFrame) -> RatioStatistic:
    """Suspect verdicts / judged claims, over the rows whose verdicts were checked."""
    suspects = _column(rows, "suspect_verdicts")
    checked = ~np.isnan(suspects)
    return RatioStatistic(np.where(checked, suspects, 0.0), np.where(checked, np.nan_to_num(_column(rows, "claim_count")), 0.0))


_REFERENCE_ROWS = [
    ("rouge1", "ROUGE-1 F1 against the reference (rouge-score, Porter stemmer)"),
    ("rouge2", "ROUGE-2 F1 against the reference"),
    ("rougeL", "ROUGE-L F1 against the reference"),
    ("rougeLsum", "ROUGE-Lsum F1 against the reference (sentences on their own lines)"),
    ("bleu", "sentence BLEU against the reference (sacreBLEU)"),
    ("chrf", "sentence chrF against the reference (sacreBLEU)"),
    ("ter", "sentence TER against the reference (sacreBLEU; lower is better)"),
]

METRICS = MetricRegistry(
    [
        _row("claim_count", "claims in the summary (richness of this summary)", True, lambda f: f.claim_count),
        _row("supported_claims", "claims the source supports (yes)", True, lambda f: f.supported),
        _row("contradicted_claims", "claims the source contradicts (no)", False, lambda f: f.contradicted),
        _row("unverifiable_claims", "claims the source neither supports nor contradicts (idk)", False, lambda f: f.unverifiable),
        _row("support_rate", "supported claims / claims (empty when there is no claim)", True,
             lambda f: f.supported / f.claim_count if f.claim_count else None, integer=False),
        _row("aligned", "1 when the summary makes claims and none is contradicted", True,
             _flag(lambda f: f.claim_count > 0 and f.contradicted == 0)),
        _row("strictly_aligned", "1 when the summary makes claims and every one is supported", True,
             _flag(lambda f: f.claim_count > 0 and f.supported == f.claim_count)),
        _row("coverage", "covered key points / key points of the source", True,
             lambda f: None if f.key_points is None else f.covered / f.key_points, integer=False, family="coverage",
             reasoning="coverage_reasoning"),
        _row("defect_contradiction", "1 when a claim is contradicted", False, _flag(lambda f: f.contradicted > 0)),
        _row("defect_unverifiable", "1 when a claim cannot be verified", False, _flag(lambda f: f.unverifiable > 0)),
        _row("defect_empty", "1 when the summary has no word", False, _flag(lambda f: f.claim_count == 0)),
        _row("suspect_verdicts", "verdicts the model-free check disagrees with sharply (yes to a claim the source barely "
             "supports, no/idk to one it plainly supports)", False, lambda f: f.suspects, family="suspect"),
        _row("unstable_claims", "claims whose repeated verifications (stability k > 1) did not all give the majority verdict",
             False, lambda f: f.unstable, family="stability"),
        _row("order_checked", "claims and key points asked again in a shuffled order (rows of the order check's sample)", False,
             lambda f: f.order_checked, family="order"),
        _row("order_changed", "of those, the ones whose answer changed when shuffled", False, lambda f: f.order_changed, family="order"),
        _row("grounding", "model-free grounding score in [0, 1] (empty when the summary has no sentence)", True,
             lambda f: f.grounding, integer=False, family="grounding", reasoning="grounding_reasoning"),
        _row("grounded", "1 when grounding is at or above the model's fixed threshold", True, lambda f: f.grounded,
             family="grounding", reasoning="grounding_reasoning"),
        *(MetricSpec(name, "row", text, name != "ter", family="reference", reasoning=None) for name, text in _REFERENCE_ROWS),
        MetricSpec("summary_words", "row", "words in the summary", False, family="length", reasoning=None),
        # Answers from passages (``rag``): computed by ``rag.scoring``, not from ``RowFacts``.
        MetricSpec("passages_cited", "row", "passages a claim's quoted verdict cites", True, family="rag", integer=True),
        MetricSpec("context_utilisation", "row", "passages cited / passages retrieved", True, family="rag"),
        MetricSpec("quote_failures", "row", "claims judged yes or no whose quote is not in the passage cited (counted idk)", False,
                   family="rag", integer=True),
        MetricSpec("answer_relevance", "row", "1 when the answer addresses the question, 0.5 partly, 0 not", True, family="rag",
                   reasoning="relevance_reasoning"),
        MetricSpec("defect_irrelevant", "row", "1 when the answer does not address the question", False, family="rag", integer=True,
                   reasoning="relevance_reasoning"),
        MetricSpec("context_sufficiency", "row", "facts of the expected answer the passages support / its facts", True, family="rag",
                   reasoning="facts_reasoning"),
        MetricSpec("answer_recall", "row", "facts of the expected answer the answer states / its facts", True, family="rag",
                   reasoning="facts_reasoning"),
        # Rewrites (``rewrites``): computed by ``rewrites.api``, not from ``RowFacts``.
        MetricSpec("instruction_followed", "row", "1 when the rewrite does what its instruction asks, else 0", True, family="rewrite",
                   integer=True, reasoning="instruction_reasoning"),
        MetricSpec("compression_ratio", "row", "words in the summary / words in the source", False, family="length", reasoning=None),
        _aggregate("alignment", "share of judged rows with aligned = 1", True, "proportion", of="aligned", headline=True),
        _aggregate("defect_rate/contradiction", "share of judged rows with a contradicted claim", False, "proportion",
                   of="defect_contradiction", headline=True),
        _aggregate("defect_rate/unverifiable", "share of judged rows with an unverifiable claim", False, "proportion",
                   of="defect_unverifiable"),
        _aggregate("defect_rate/empty", "share of judged rows whose summary has no word", False, "proportion", of="defect_empty"),
        _aggregate("strict_alignment", "share of judged rows whose every claim is supported", True, "proportion", of="strictly_aligned"),
        _aggregate("claim_support_rate", "supported claims / claims, over all judged rows", True, "ratio", statistic=_claim_support),
        _aggregate("richness", "mean claims per judged row", True, "mean", of="claim_count", share=False, headline=True),
        _aggregate("coverage", "mean coverage of the judged rows", True, "mean", of="coverage", family="coverage", headline=True),
        _aggregate("judge/suspect_rate", "suspect verdicts / judged claims (the model-free second opinion)", False, "ratio",
                   statistic=_suspect_rate, reads=("suspect_verdicts", "claim_count"), family="suspect"),
        _aggregate("judge/flip_rate", "unstable claims / judged claims: how often asking the same verification again changed "
                   "a verdict (stability k > 1)", False, "ratio", statistic=_flip_rate, reads=("unstable_claims", "claim_count"),
                   family="stability"),
        _aggregate("judge/order_sensitivity", "answers that changed when the claims or key points were asked in a shuffled "
                   "order / answers compared (the order check's sample)", False, "ratio", statistic=_order_sensitivity,
                   reads=("order_changed", "order_checked"), family="order"),
        _aggregate("judge_error_rate", "rows the judge failed on / all rows", False, "proportion", statistic=_error_rate,
                   over="all", headline=True),
        *(_aggregate(name, f"mean {name} over the rows", True, "mean", of=name, family="reference", over="all")
          for name in ("rouge1", "rouge2", "rougeL", "rougeLsum")),
        _aggregate("bleu", "corpus BLEU (sacreBLEU corpus_score, not a mean of rows)", True, "corpus", family="reference", share=False),
        _aggregate("chrf", "corpus chrF (sacreBLEU corpus_score)", True, "corpus", family="reference", share=False),
        _aggregate("ter", "corpus TER (sacreBLEU corpus_score; lower is better)", False, "corpus", family="reference", share=False),
        _aggregate("summary_words", "mean words per summary", False, "mean", of="summary_words", family="length", over="all", share=False),
        _aggregate("compression_ratio", "mean summary words / source words", False, "mean", of="compression_ratio",
                   family="length", over="all", share=False),
        # The model-free grounding check (rows without a grounding, e.g. empty summaries, count in neither part).
        _aggregate("answer_relevance", "mean answer relevance of the judged rows", True, "mean", of="answer_relevance", family="rag",
                   headline=True),
        _aggregate("defect_rate/irrelevant", "share of judged rows whose answer does not address the question", False, "proportion",
                   of="defect_irrelevant", family="rag"),
        _aggregate("context_utilisation", "mean share of the retrieved passages a claim cites", True, "mean", of="context_utilisation",
                   family="rag"),
        _aggregate("context_sufficiency", "mean share of the expected answer's facts the passages support", True, "mean",
                   of="context_sufficiency", family="rag"),
        _aggregate("answer_recall", "mean share of the expected answer's facts the answer states", True, "mean", of="answer_recall",
                   family="rag"),
        _aggregate("instruction_following", "share of judged rewrites that do what their instruction asks", True, "proportion",
                   of="instruction_followed", family="rewrite"),
        _aggregate("quote_failure_rate", "claims whose quote is not in the passage cited / claims", False, "ratio",
                   statistic=_quote_failures, reads=("quote_failures", "claim_count"), family="rag"),
        _aggregate("grounding", "mean grounding score of the rows scored", True, "mean", of="grounding", family="grounding", over="all"),
        _aggregate("grounded_rate", "share of the rows scored that are grounded", True, "proportion", of="grounded",
                   family="grounding", over="all"),
    ]
)
