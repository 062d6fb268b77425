"""Evaluated runs side by side: each run's figures with their intervals and n, and each run after the first tested
against the first over the usable pairs (``compare_results``), Holm-adjusted over the metrics shown. What
``tracking.compare_runs`` returns and logs, apart from MLflow."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..people import DIFFERENCE_ASSUMES, PeopleEstimate, estimate_difference
from ..signature import TaskMismatchError
from ..stats import StatisticsOptions
from .comparison import Comparison, SignatureMismatchError, compare_results, direction, with_holm
from .gating import PEOPLE_METRICS
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
    cards: dict[str, str | None] | None = None,
) -> tuple[pd.DataFrame, str]:
    """The table of ``tracking.compare_runs`` (its docstring says every column) for evaluated runs (each with
    ``run_id``, ``name``, ``metrics``, ``signature`` and ``rows``), each after the first tested against the first;
    and the note a reader of it must know (mixed judges, a partial comparison, rows left out). People's estimates
    (``people/<metric>``) get ``people_records``' rows: ``cards``, by run id, the card people answered there."""
    base = runs[0]
    comparisons: dict[str, Comparison] = {}
    for run in runs[1:]:
        try:
            comparisons[run.run_id] = compare_results(
                base, run, statistics=statistics,
                allow_signature_mismatch=allow_mixed_judges, allow_partial=allow_partial,
            )
        except TaskMismatchError as error:  # no judge makes them alike: no advice to compare them anyway
            raise TaskMismatchError(f"runs {base.run_id[:8]} and {run.run_id[:8]}: {error}") from None
        except SignatureMismatchError as error:
            raise SignatureMismatchError(
                f"runs {base.run_id[:8]} and {run.run_id[:8]} were judged with different judges or prompts and are not "
                f"comparable ({error}). Re-evaluate with one judge, or pass allow_mixed_judges=True to compare anyway."
            ) from None
    notes = {run_id: _note(comparison) for run_id, comparison in comparisons.items()}
    note = "; ".join(n for n in dict.fromkeys(notes.values()) if n)
    unregistered = unregistered_aggregates(runs)
    names = [name for name in metrics or [*default_metrics(), *unregistered] if name not in PEOPLE_NAMES]
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
                "metric_note": UNREGISTERED.format(name=name) if name in unregistered else "",
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
    shown_people = [m for m in PEOPLE_NAMES if metrics is None or m in metrics]
    records += people_records(runs, shown_people, cards or {}, notes)
    return pd.DataFrame.from_records(records, columns=COLUMNS), note


UNREGISTERED = ("not compared pair by pair: no metric {name!r} is registered in this process (register its MetricSpec "
                "in summarization.metrics.METRICS, as the process that judged the runs did)")


def unregistered_aggregates(runs: Sequence[Any]) -> list[str]:
    """The figures the runs carry with an n, as every aggregate does, that no metric registered in this process
    names (a task's own metric, registered where the runs were judged): shown with a note, never left out silently."""
    found = {name for run in runs for name in run.metrics
             if interval_names(name)[2] in run.metrics and METRICS.aggregate(name) is None and name not in PEOPLE_NAMES}
    return sorted(found)


COLUMNS = ("run_id", "run_name", "metric", "value", "ci_low", "ci_high", "n", "difference_vs_first", "difference_ci_low", "difference_ci_high",
           "p_value", "p_holm", "test", "direction", "better", "pairs", "metric_note", "pairs_used", "pairs_dropped_for_errors",
           "only_in_first", "only_in_this", "note")


PEOPLE_NAMES = tuple(f"people/{metric}" for metric in PEOPLE_METRICS)


def people_records(runs: Sequence[Any], names: Sequence[str], cards: dict[str, str | None], notes: dict[str, str]) -> list[dict]:
    """One row per run with a people's estimate of each of ``names``: its value, interval and labels (``n``), and, for
    each run after the first where both have one, the difference from the first's with its interval (MOVER of the
    two; ``test`` "independent samples (MOVER)", no p-value) and what it assumes (``metric_note``), "too few labels"
    below the labels it holds its coverage from, or why it is not compared (different questions)."""
    empty = {key: "" if key in ("test", "better", "metric_note", "note") else math.nan for key in COLUMNS}
    base, records = runs[0], []
    for name in names:
        metric = name.removeprefix("people/")
        first = PeopleEstimate.from_metrics(base.metrics, metric)
        for run in runs:
            found = PeopleEstimate.from_metrics(run.metrics, metric)
            if found is None:
                continue
            record = {**empty, "run_id": run.run_id, "run_name": run.name, "metric": name, "value": found.estimate, "ci_low": found.ci_low,
                      "ci_high": found.ci_high, "n": float(found.labelled), "direction": "higher",
                      "metric_note": found.too_few or f"n: labelled rows of {found.n} judged", "note": notes.get(run.run_id, "")}
            if run is not base and first is not None:
                if cards.get(run.run_id) != cards.get(base.run_id):
                    record["metric_note"] = (f"not compared: people answered {cards.get(base.run_id)} on the first run and "
                                             f"{cards.get(run.run_id)} on this one")
                else:
                    difference = estimate_difference(first, found)
                    excludes = difference.ci_low > 0 or difference.ci_high < 0
                    record.update(difference_vs_first=difference.difference, difference_ci_low=difference.ci_low,
                                  difference_ci_high=difference.ci_high, test="independent samples (MOVER)",
                                  better=("this" if difference.difference > 0 else "first") if excludes else "",
                                  metric_note=difference.too_few or f"the difference assumes {DIFFERENCE_ASSUMES}")
            records.append(record)
    return records


def _note(comparison: Comparison) -> str:
    """What a reader of the table or plot must know: mixed judges, a partial comparison, rows left out."""
    parts = []
    if not comparison.signatures_match:
        parts.append(f"MIXED JUDGES: signatures differ ({', '.join(comparison.signature_differences)})" if comparison.on_request
                     else f"signatures differ ({', '.join(comparison.signature_differences)}): {comparison.left_out_note}")
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


def people_differences(table: pd.DataFrame) -> list[str]:
    """One line per run compared with the first on a people's estimate: ``cand (1a2b3c4d) minus the first,
    people/strict_alignment: +0.05 [-0.12, 0.22] (the difference assumes ...)``, or why there is no interval."""
    rows = table[table["metric"].str.startswith("people/") & (table["test"] != "")]
    lines = []
    for _, row in rows.iterrows():
        interval = "" if math.isnan(row["difference_ci_low"]) else f" [{row['difference_ci_low']:+.3g}, {row['difference_ci_high']:+.3g}]"
        lines.append(f"{row['run_name']} ({row['run_id'][:8]}) minus the first, {row['metric']}: {row['difference_vs_first']:+.3g}{interval} "
                     f"({row['metric_note']})")
    return lines
