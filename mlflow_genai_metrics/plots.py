"""The plots logged with runs and comparisons (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .summarization.metrics import METRICS  # noqa: E402
from .summarization.scoring import interval_names  # noqa: E402


def share_metrics() -> list[str]:
    """The registered aggregates that are shares in [0, 1], plotted together on one axis."""
    return [spec.name for spec in METRICS.aggregates() if spec.share]


def _interval(metrics: Mapping[str, float], name: str) -> tuple[float, float]:
    value = metrics.get(name, np.nan)
    low_name, high_name, _ = interval_names(name)
    low, high = metrics.get(low_name, np.nan), metrics.get(high_name, np.nan)
    if not (np.isfinite(low) and np.isfinite(high)):  # no interval: no whisker (a 0 drew caps at the value, a zero-width
        return (np.nan, np.nan)                        # interval, beside the words "no interval")
    return (max(value - low, 0.0), max(high - value, 0.0))


def _finish(fig, ax, *, legend: bool, note: str | None):
    if legend:
        ax.legend(fontsize=8)
    if note:  # e.g. "MIXED JUDGES": a comparison that should not be read as like for like says so on the picture
        fig.text(0.01, 0.01, note, fontsize=7, color="firebrick")
    fig.tight_layout()
    return fig


def metric_bars(
    runs: Mapping[str, Mapping[str, float]],
    *,
    title: str = "Judge metrics with 95% intervals",
    note: str | None = None,
    tests: Mapping[str, str] | None = None,
):
    """One group of bars per rate metric, one bar per run, with 95% interval whiskers; ``tests`` (metric -> text,
    e.g. ``p 0.012 (Holm 0.036)``) is written under each group: a comparison's raw and adjusted p-values."""
    names = [n for n in share_metrics() if any(n in m and np.isfinite(m[n]) for m in runs.values())]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names) * max(1, len(runs)) ** 0.5), 4.2))
    width = 0.8 / max(len(runs), 1)
    positions = np.arange(len(names))
    for index, (label, metrics) in enumerate(runs.items()):
        values = [metrics.get(n, np.nan) for n in names]
        errors = np.array([_interval(metrics, n) for n in names]).T if names else None
        bars = ax.bar(positions + index * width - 0.4 + width / 2, values, width, yerr=errors, capsize=3, label=label)
        for bar, name in zip(bars, names):  # no whisker would read as a zero-width interval: say there is none, and n
            low, high, n = (metrics.get(key, np.nan) for key in interval_names(name))
            if np.isfinite(metrics.get(name, np.nan)) and not (np.isfinite(low) and np.isfinite(high)):
                shown = f"\nn={n:.0f}" if np.isfinite(n) else ""
                ax.text(bar.get_x() + bar.get_width() / 2, min(bar.get_height(), 0.92) + 0.01, f"no interval{shown}",
                        ha="center", va="bottom", fontsize=6)
    labels = [n.replace("defect_rate/", "defect:\n") for n in names]
    if tests:
        labels = [f"{label}\n{tests[n]}" if n in tests else label for label, n in zip(labels, names)]
    ax.set_xticks(positions, labels, fontsize=7 if tests else 8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share")
    ax.set_title(title, fontsize=10)
    return _finish(fig, ax, legend=len(runs) > 1, note=note)


def alignment_vs_richness(runs: Mapping[str, Mapping[str, float]], *, note: str | None = None):
    """The study's picture: each run's alignment against its richness, with both intervals."""
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for index, (label, metrics) in enumerate(runs.items()):
        x, y = metrics.get("richness", np.nan), metrics.get("alignment", np.nan)
        xerr = np.array([_interval(metrics, "richness")]).T
        yerr = np.array([_interval(metrics, "alignment")]).T
        ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", capsize=3, label=label)
        # Labels stacked by run, so runs with the same scores stay readable; an axis without an interval says so.
        bare = [f"{name}: no interval, n={n:.0f}" if np.isfinite(n := metrics.get(interval_names(name)[2], np.nan)) else f"{name}: no interval"
                for name, value in (("alignment", y), ("richness", x)) if np.isfinite(value) and np.isnan(_interval(metrics, name)[0])]
        ax.annotate(label + (f" ({'; '.join(bare)})" if bare else ""), (x, y), textcoords="offset points", xytext=(6, 6 + 11 * index), fontsize=8)
    ax.set_xlabel("richness (mean claims per summary)")
    ax.set_ylabel("alignment (share without contradicted claims)")
    ax.set_title("Alignment against richness (95% intervals)", fontsize=10)
    return _finish(fig, ax, legend=False, note=note)


def category_bars(rows: Mapping[str, pd.DataFrame], *, metric: str | None = None, note: str | None = None):
    """Mean of a per-row value by category, one bar per run (rows without a value left out); by default
    ``aligned``, or ``grounding`` when a run has no judge column (the grounding check alone)."""
    metric = metric or ("aligned" if all("aligned" in table for table in rows.values()) else "grounding")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    categories = sorted({c for table in rows.values() for c in table["category"].dropna().astype(str)})
    width = 0.8 / max(len(rows), 1)
    positions = np.arange(len(categories))
    for index, (label, table) in enumerate(rows.items()):
        values = pd.to_numeric(table[metric], errors="coerce").astype("float64")  # empty (failed) rows -> NaN
        means = values.groupby(table["category"].astype(str)).mean()
        ax.bar(positions + index * width - 0.4 + width / 2, [means.get(c, np.nan) for c in categories], width, label=label)
    ax.set_xticks(positions, categories, fontsize=8, rotation=20)
    ax.set_ylabel(f"mean {metric}")
    ax.set_title(f"{metric} by category", fontsize=10)
    return _finish(fig, ax, legend=len(rows) > 1, note=note)


def verdict_bars(counts: pd.Series):
    """How many claims got each verdict (``counts``: verdict -> number of claims)."""
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    labels = ["yes", "no", "idk"]
    ax.bar(labels, [int(counts.get(v, 0)) for v in labels], color=["seagreen", "firebrick", "goldenrod"])
    ax.set_ylabel("claims")
    ax.set_title("Claim verdicts", fontsize=10)
    fig.tight_layout()
    return fig
