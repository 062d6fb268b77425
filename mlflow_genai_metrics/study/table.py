"""The study's table: one row per candidate, the headline metrics with their intervals (the judge's and the
model-free grounding check's), and its failures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ..summarization.scoring import interval_names

# The paired differences the study prints: the judge's headline metrics, then the model-free grounding check's.
COMPARED = ("alignment", "strict_alignment", "richness", "coverage", "grounding", "grounded_rate", "judge/suspect_rate")


def judge_failure_summary(errors: pd.Series) -> str:
    """``"6 of 8 rows (no_claims 4, timeout 1, no summary written 1)"`` from a per-row ``error`` column (the error's
    kind; a candidate's generation error is ``no summary written``); ``""`` when every row was judged."""
    failed = errors.fillna("").astype(str)
    failed = failed[failed != ""]
    if failed.empty:
        return ""
    kinds = failed.str.extract(r"failed: ([a-z_]+)", expand=False).fillna("other").replace({"application": "no summary written"})
    counts = kinds.value_counts()
    return f"{len(failed)} of {len(errors)} rows ({', '.join(f'{kind} {count}' for kind, count in counts.items())})"


def warning_lines(warnings: Mapping[str, Sequence[object]]) -> list[str]:
    """``"WARNING: gemma3-270m: the judge verified almost nothing (...)"``, one line per candidate's warning."""
    return [f"WARNING: {name}: {warning}" for name, found in warnings.items() for warning in found]


def _with_interval(metrics: Mapping[str, float], name: str, digits: int = 3) -> str:
    value = metrics.get(name, math.nan)
    if not math.isfinite(value):
        return "n/a"
    low_name, high_name, _ = interval_names(name)
    low, high = metrics.get(low_name, math.nan), metrics.get(high_name, math.nan)
    interval = f" [{low:.{digits}f}, {high:.{digits}f}]" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{value:.{digits}f}{interval}"


def study_row(name: str, model: str, metrics: Mapping[str, float], generation_errors: int) -> dict[str, object]:
    """One candidate's row of the study's table, formatted ("n/a" where the run has no value): the judge's metrics
    (``alignment``, the study's: no claim contradicted; ``strict_alignment``: every claim supported), then
    ``grounding`` and ``grounded_rate`` (no judge involved) and the share of the judge's verdicts the grounding check
    finds suspect (``judge/suspect_rate``), then the reference metric, the failures and the cost."""

    def plain(key: str, digits: int = 3) -> str:
        value = metrics.get(key, math.nan)
        return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"

    return {
        "candidate": name,
        "model": model,
        "alignment [95% CI]": _with_interval(metrics, "alignment"),
        "strict alignment [95% CI]": _with_interval(metrics, "strict_alignment"),  # every claim supported: what the gate reads
        "richness [95% CI]": _with_interval(metrics, "richness", 2),
        "coverage": plain("coverage"),
        "grounding [95% CI]": _with_interval(metrics, "grounding"),  # the model-free check: no judge in it
        "grounded [95% CI]": _with_interval(metrics, "grounded_rate"),
        "suspect verdicts": plain("judge/suspect_rate"),
        "defect: contradiction": plain("defect_rate/contradiction"),
        "defect: unverifiable": plain("defect_rate/unverifiable"),
        "defect: empty": plain("defect_rate/empty"),
        "rougeL": plain("rougeL"),
        "judge errors": plain("judge_error_rate"),
        "generation errors": generation_errors,
        "judge calls": int(metrics.get("judge/calls", 0)),
        "judge tokens": int(metrics.get("judge/prompt_tokens", 0) + metrics.get("judge/completion_tokens", 0)),
    }


def format_table(table: pd.DataFrame) -> str:
    """The study's table as Markdown whose columns line up as printed: every cell padded to its column's width, a
    ``|`` in a cell escaped (so a reader splitting on ``|`` finds as many cells in each row as headers)."""
    columns = [str(c).replace("|", "\\|") for c in table.columns]
    cells = [[str(value).replace("|", "\\|") for value in row] for row in table.itertuples(index=False)]
    widths = [max([len(c), 3, *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(value.ljust(width) for value, width in zip(values, widths)) + " |"

    return "\n".join([line(columns), "|" + "|".join("-" * (width + 2) for width in widths) + "|", *(line(row) for row in cells)])


def comparison_lines(comparison: pd.DataFrame, metrics: Sequence[str] = COMPARED) -> list[str]:
    """``"b vs a: grounding +0.200 [+0.100, +0.300], p = 0.002 (Holm 0.006)"``: every run against the first
    (``compare_runs``' table), for each of ``metrics`` that was compared pair by pair; a metric the pairs could not
    test says so (``"b vs a: grounded_rate +0.167, too few pairs to test (1 of 6 pairs differ)"``)."""
    first = comparison["run_name"].iloc[0] if len(comparison) else ""
    paired = comparison[comparison["metric"].isin(metrics) & comparison["test"].astype(bool)]
    lines = []
    for _, row in paired.iterrows():
        head = f"{row['run_name']} vs {first}: {row['metric']} {row['difference_vs_first']:+.3f}"
        if pd.notna(row["difference_ci_low"]):
            head += f" [{row['difference_ci_low']:+.3f}, {row['difference_ci_high']:+.3f}]"
        if pd.isna(row["p_value"]):
            lines.append(f"{head}, {row['metric_note'] or 'not tested'}")
        else:
            lines.append(f"{head}, p = {row['p_value']:.3f} (Holm {row['p_holm']:.3f})")
    return lines
