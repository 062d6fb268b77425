"""Evaluated runs side by side: each run's figures with their intervals and n, and each run after the first tested
against the first over the usable pairs (``compare_results``), Holm-adjusted over the metrics shown. What
``tracking.compare_runs`` returns and logs, apart from MLflow."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..stats import StatisticsOptions
from .comparison import Comparison, SignatureMismatchError, compare_results, direction, with_holm
from .metrics import METRICS, closest_names
from .scoring import interval_names


def default_metrics() -> list[str]:
    """Every registered aggregate, the headline ones first."""
    specs = METRICS.aggregates()
    return [s.name for s in specs if s.headline] + [s.name for s in specs if not s.headline]


def comparison_table(
    runs: Sequence[Any],
    *,
    metrics: list[str] | None = None,
    allow_mixed_judges: bool = False,
    allow_partial: bool = False,
    statistics: StatisticsOptions = StatisticsOptions(),
) -> tuple[pd.DataFrame, str]:
    """The table of ``tracking.compare_runs`` (its docstring says every column) for evaluated runs (each with
    ``run_id``, ``name``, ``metrics``, ``signature`` and ``rows``), each after the first tested against the first;
    and the note a reader of it must know (mixed judges, a partial comparison, rows left out)."""
    base = runs[0]
    comparisons: dict[str, Comparison] = {}
    for run in runs[1:]:
        try:
            comparisons[run.run_id] = compare_results(
                base, run, statistics=statistics,
                allow_signature_mismatch=allow_mixed_judges, allow_partial=allow_partial,
            )
        except SignatureMismatchError as error:
            raise SignatureMismatchError(
                f"runs {base.run_id[:8]} and {run.run_id[:8]} were judged with different judges or prompts and are not "
                f"comparable ({error}). Re-evaluate with one judge, or pass allow_mixed_judges=True to compare anyway."
            ) from None
    notes = {run_id: _note(comparison) for run_id, comparison in comparisons.items()}
    note = "; ".join(n for n in dict.fromkeys(notes.values()) if n)
    names = metrics or default_metrics()
    unknown = [name for name in metrics or () if not any(name in run.metrics for run in runs)]
    if unknown:  # a typo would otherwise leave an empty table
        raise ValueError(f"no run compared has the metric(s) {closest_names(unknown, set(base.metrics))}")
    # Holm's adjustment runs over every test this table shows: each metric of each run compared with the first (one
    # family: three candidates against one baseline adjusted per candidate showed 19% of null comparisons "significant").
    shown = {run_id: c.table[c.table["metric"].isin(names)].assign(run_id=run_id) for run_id, c in comparisons.items()}
    together = with_holm(pd.concat(shown.values(), ignore_index=True), statistics.confidence) if shown else pd.DataFrame()
    tables = {run_id: together[together["run_id"] == run_id].set_index("metric") for run_id in shown}
    records = []
    for run in runs:
        comparison = comparisons.get(run.run_id)
        paired = tables.get(run.run_id, pd.DataFrame())
        for name in names:
            if name not in run.metrics:
                continue
            low_name, high_name, n_name = interval_names(name)
            record = {
                "run_id": run.run_id,
                "run_name": run.name,
                "metric": name,
                "value": run.metrics[name],
                "ci_low": run.metrics.get(low_name, math.nan),
                "ci_high": run.metrics.get(high_name, math.nan),
                "n": run.metrics.get(n_name, math.nan),
                "difference_vs_first": math.nan,
                "difference_ci_low": math.nan,
                "difference_ci_high": math.nan,
                "p_value": math.nan,
                "p_holm": math.nan,
                "test": "",
                "direction": direction(name) if METRICS.aggregate(name) is not None else "",
                "better": "",
                "pairs": math.nan,
                "metric_note": "",
                "pairs_used": comparison.pairs_used if comparison else math.nan,
                "pairs_dropped_for_errors": comparison.pairs_dropped_for_errors if comparison else math.nan,
                "only_in_first": comparison.only_in_a if comparison else math.nan,
                "only_in_this": comparison.only_in_b if comparison else math.nan,
                "note": notes.get(run.run_id, ""),
            }
            if name in paired.index:
                record.update(
                    difference_vs_first=paired.loc[name, "difference"],
                    difference_ci_low=paired.loc[name, "ci_low"],
                    difference_ci_high=paired.loc[name, "ci_high"],
                    p_value=paired.loc[name, "p_value"],
                    p_holm=paired.loc[name, "p_holm"],
                    test=paired.loc[name, "test"],
                    better={"B": "this", "A": "first"}.get(paired.loc[name, "better"], ""),
                    pairs=paired.loc[name, "n"],
                    metric_note=paired.loc[name, "note"],
                )
            records.append(record)
    return pd.DataFrame.from_records(records), note


def _note(comparison: Comparison) -> str:
    """What a reader of the table or plot must know: mixed judges, a partial comparison, rows left out."""
    parts = []
    if not comparison.signatures_match:
        parts.append(f"MIXED JUDGES: signatures differ ({', '.join(comparison.signature_differences)})")
    if comparison.partial:
        parts.append("PARTIAL: fewer usable pairs than half of either run")
    if comparison.pairs_dropped_for_errors or comparison.only_in_a or comparison.only_in_b:
        parts.append(comparison.rows_note)
    return "; ".join(parts)


def test_labels(table: pd.DataFrame) -> dict[str, str]:
    """Per metric, what the comparison against the first run found, for the bars: ``Holm p 0.036 (raw 0.012)``, or why
    it was not tested (one line per compared run)."""
    labels: dict[str, list[str]] = {}
    for _, row in table[table["test"] != ""].iterrows():
        if math.isnan(row["p_value"]):
            text = "too few pairs" if row["metric_note"].startswith("too few") else "not tested"
        else:
            text = f"Holm p {row['p_holm']:.2g} (raw {row['p_value']:.2g})"
        labels.setdefault(row["metric"], []).append(text)
    return {metric: "\n".join(texts) for metric, texts in labels.items()}


DECISION_METRIC = "strict_alignment"  # what the gate decides on unless told otherwise (guide "The row's verdict card")


def disagreements(table: pd.DataFrame, level: float = 0.05) -> list[str]:
    """One line per compared run whose lexical metrics (ROUGE, BLEU, chrF, TER: overlap with a reference) and
    faithfulness metrics (the judge's, the grounding check's) point opposite ways, each significantly (Holm-adjusted
    p below ``level``): a summary can copy a reference's words and still state what the article does not."""
    lines = []
    tested = table[(table["test"] != "") & (table["p_holm"] < level)]
    for (run_id, name), rows in tested.groupby(["run_id", "run_name"], sort=False):
        family = {row["metric"]: (METRICS.aggregate(row["metric"]).family if METRICS.aggregate(row["metric"]) else "") for _, row in rows.iterrows()}
        lexical = {m: b for m, b in zip(rows["metric"], rows["better"]) if family[m] == "reference"}
        faithful = {m: b for m, b in zip(rows["metric"], rows["better"]) if family[m] in ("judge", "grounding")}
        for good, bad in (("this", "first"), ("first", "this")):
            up = [m for m, b in lexical.items() if b == good]
            down = [m for m, b in faithful.items() if b == bad]
            if up and down:
                way = "better" if good == "this" else "worse"
                lines.append(f"{name} ({run_id[:8]}): lexical and faithfulness metrics disagree: {way} on {', '.join(up)}, "
                             f"{'worse' if way == 'better' else 'better'} on {', '.join(down)} (Holm p < {level:g}); the decision "
                             f"metric is {DECISION_METRIC}: overlap with a reference is not faithfulness to the article")
    return lines
