"""The study's table: one row per candidate, the headline metrics with their intervals, and its failures."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ..summarization.scoring import interval_names

__all__ = ["format_table", "judge_failure_summary", "study_row"]


def judge_failure_summary(errors: pd.Series) -> str:
    """``"6 of 8 rows (no_claims 5, timeout 1)"`` from a per-row ``error`` column; ``""`` when every row was judged."""
    failed = errors.fillna("").astype(str)
    failed = failed[failed != ""]
    if failed.empty:
        return ""
    kinds = failed.str.extract(r"failed: ([a-z_]+)", expand=False).fillna("other").value_counts()
    return f"{len(failed)} of {len(errors)} rows ({', '.join(f'{kind} {count}' for kind, count in kinds.items())})"


def _with_interval(metrics: Mapping[str, float], name: str, digits: int = 3) -> str:
    value = metrics.get(name, math.nan)
    if not math.isfinite(value):
        return "n/a"
    low_name, high_name, _ = interval_names(name)
    low, high = metrics.get(low_name, math.nan), metrics.get(high_name, math.nan)
    interval = f" [{low:.{digits}f}, {high:.{digits}f}]" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{value:.{digits}f}{interval}"


def study_row(name: str, model: str, metrics: Mapping[str, float], generation_errors: int) -> dict[str, object]:
    """One candidate's row of the study's table, formatted ("n/a" where the run has no value)."""

    def plain(key: str, digits: int = 3) -> str:
        value = metrics.get(key, math.nan)
        return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"

    return {
        "candidate": name,
        "model": model,
        "alignment [95% CI]": _with_interval(metrics, "alignment"),
        "richness [95% CI]": _with_interval(metrics, "richness", 2),
        "coverage": plain("coverage"),
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
    """The study's table as Markdown."""
    columns = list(table.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    return "\n".join(lines)
