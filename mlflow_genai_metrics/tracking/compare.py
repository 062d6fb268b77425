"""``compare_runs``: several evaluation runs side by side, each tested against the first; logged as a run on request.

A run's figures (``run_figures``, ``EvaluatedRun.metrics``, what the gate's rules read) are its report's aggregates
(``mgm/report.json``, every figure, written last by the logging that also logs the run's headline metrics) over
its logged run metrics: the report is authoritative for every name it holds (a run logged again with fewer run
metrics keeps no stale one), the run metrics add the names it lacks (MLflow's own, the user's). A run without a
report (not ours) has its run metrics only.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from ..summarization.comparison import Comparison, SignatureMismatchError, compare_results, direction, with_holm
from ..summarization.metrics import METRICS, closest_names
from ..summarization.scoring import interval_names
from .. import plots
from .run_logging import ARTIFACT_DIR, SIGNATURE_TAG

__all__ = ["EvaluatedRun", "compare_runs", "load_run", "run_figures"]


def default_metrics() -> list[str]:
    """Every registered aggregate, the headline ones first."""
    specs = METRICS.aggregates()
    return [s.name for s in specs if s.headline] + [s.name for s in specs if not s.headline]


@dataclass(frozen=True)
class EvaluatedRun:
    """What an evaluation run holds: its metrics, signature and per-row table (``mgm/rows.parquet``)."""

    run_id: str
    name: str
    metrics: dict[str, float]
    signature: str
    rows: pd.DataFrame


def run_figures(run: Run, client: MlflowClient | None = None) -> dict[str, float]:
    """Every figure of ``run``: its report's aggregates (an undefined one, null in the report, left out) over its
    run metrics, as this module's docstring says; one listing and one small download.

        figures = run_figures(MlflowClient().get_run(run_id))
        figures["claim_support_rate"], figures["defect_rate/unverifiable"]  # in the report, not run metrics
    """
    client = client or MlflowClient()
    figures = dict(run.data.metrics)
    report_path = f"{ARTIFACT_DIR}/report.json"
    if report_path not in {item.path for item in client.list_artifacts(run.info.run_id, ARTIFACT_DIR)}:
        return figures
    with tempfile.TemporaryDirectory(prefix="mgm-report-") as tmp:
        report = json.loads(Path(client.download_artifacts(run.info.run_id, report_path, tmp)).read_text())
    for name, value in report.get("metrics", {}).items():
        if value is None or not math.isfinite(float(value)):
            figures.pop(name, None)
        else:
            figures[name] = float(value)
    return figures


def load_run(run_id: str, client: MlflowClient | None = None) -> EvaluatedRun:
    """Read an evaluation run logged by this package (its figures as ``run_figures`` reads them); a clear error if
    it is not one."""
    client = client or MlflowClient()
    return evaluated_run(client.get_run(run_id), client)


def evaluated_run(run: Run, client: MlflowClient, figures: dict[str, float] | None = None) -> EvaluatedRun:
    """``load_run`` of a run already read, with its ``figures`` when already read too (the gate reads them first)."""
    run_id = run.info.run_id
    signature = run.data.tags.get(SIGNATURE_TAG)
    if signature is None:
        raise ValueError(f"run {run_id} has no {SIGNATURE_TAG} tag: it was not evaluated with mlflow_genai_metrics")
    with tempfile.TemporaryDirectory(prefix="mgm-run-") as tmp:
        path = client.download_artifacts(run_id, f"{ARTIFACT_DIR}/rows.parquet", tmp)
        rows = pd.read_parquet(path)
    if "id" in rows:  # ids are stored as text; keep them so, whatever pandas infers
        rows["id"] = rows["id"].astype(str)
    metrics = figures if figures is not None else run_figures(run, client)
    return EvaluatedRun(run_id, run.info.run_name or run_id[:8], metrics, signature, rows)


def compare_runs(
    run_ids: list[str],
    *,
    metrics: list[str] | None = None,
    allow_mixed_judges: bool = False,
    allow_partial: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    log: bool = False,
    run_name: str = "comparison",
) -> pd.DataFrame:
    """Compare evaluation runs: one row per (run, metric) with its value, 95% interval and n, and, for every run
    after the first, the paired difference against the first over the usable pairs: the test of the metric's kind
    (``test``), the interval of the difference, the p-value and, beside it, the p-value Holm-adjusted over the
    metrics shown (``p_holm``), ``better`` ("this", "first" or "") in the metric's ``direction``, the pairs it
    stands on (``pairs``) and a ``metric_note`` ("too few pairs to test", pairs left out because references or key
    points differ).

    Pairing follows ``compare_results`` exactly (each run is loaded into it): rows pair by id and source, a row
    with a judge error on either side leaves the pair, and the columns ``pairs_used``, ``pairs_dropped_for_errors``,
    ``only_in_first`` and ``only_in_this`` say what each comparison stands on. Runs whose judge signatures differ
    are refused (``SignatureMismatchError``) unless ``allow_mixed_judges=True``; too few usable pairs
    (``InsufficientPairsError``) unless ``allow_partial=True``; then the table's ``note`` column and the plots say
    so. Nothing is written to MLflow unless ``log=True``: then a comparison run is logged in the first run's
    experiment (its id in ``table.attrs["comparison_run_id"]``) with the table (JSON and Parquet) and the plots
    (alignment against richness, bars with intervals, per-category bars when the rows have a category).
    """
    if len(run_ids) < 2:
        raise ValueError("compare_runs needs at least two run ids")
    client = MlflowClient()
    runs = [load_run(run_id, client) for run_id in run_ids]
    base = runs[0]
    comparisons: dict[str, Comparison] = {}
    for run in runs[1:]:
        try:
            comparisons[run.run_id] = compare_results(
                base, run, resamples=resamples, seed=seed, confidence=confidence,
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
    # Holm's adjustment runs over the metrics this table shows, for each compared run.
    tables = {run_id: with_holm(c.table[c.table["metric"].isin(names)], confidence).set_index("metric") for run_id, c in comparisons.items()}
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
    table = pd.DataFrame.from_records(records)
    if log:
        table.attrs["comparison_run_id"] = _log_comparison(runs, table, note, client, run_name)
    return table


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


def _test_labels(table: pd.DataFrame) -> dict[str, str]:
    """Per metric, what the comparison against the first run found, for the bars: ``p 0.012 (Holm 0.036)``, or why
    it was not tested (one line per compared run)."""
    labels: dict[str, list[str]] = {}
    for _, row in table[table["test"] != ""].iterrows():
        if math.isnan(row["p_value"]):
            text = "too few pairs" if row["metric_note"].startswith("too few") else "not tested"
        else:
            text = f"p {row['p_value']:.2g} (Holm {row['p_holm']:.2g})"
        labels.setdefault(row["metric"], []).append(text)
    return {metric: "\n".join(texts) for metric, texts in labels.items()}


def _log_comparison(runs: list[EvaluatedRun], table: pd.DataFrame, note: str, client: MlflowClient, run_name: str) -> str:
    experiment_id = client.get_run(runs[0].run_id).info.experiment_id
    labels = {run.run_id: f"{run.name} ({run.run_id[:6]})" for run in runs}
    comparison = client.create_run(experiment_id, run_name=run_name, tags={"mgm.compared_runs": ",".join(r.run_id for r in runs)})
    run_id = comparison.info.run_id
    if note:
        client.set_tag(run_id, "mgm.note", note)
    with tempfile.TemporaryDirectory(prefix="mgm-compare-") as tmp:
        folder = Path(tmp) / ARTIFACT_DIR
        (folder / "plots").mkdir(parents=True)
        table.to_json(folder / "comparison.json", orient="records", indent=1)
        table.to_parquet(folder / "comparison.parquet", index=False)
        (folder / "runs.json").write_text(json.dumps({labels[r.run_id]: {"run_id": r.run_id, "signature": r.signature} for r in runs}, indent=1))
        by_run = {labels[r.run_id]: r.metrics for r in runs}
        tests = _test_labels(table)
        figures = {
            "alignment_vs_richness": plots.alignment_vs_richness(by_run, note=note or None),
            "metrics": plots.metric_bars(by_run, note=note or None, tests=tests),
        }
        if all("category" in r.rows and r.rows["category"].notna().any() for r in runs):
            figures["categories"] = plots.category_bars({labels[r.run_id]: r.rows for r in runs}, note=note or None)
        for name, figure in figures.items():
            figure.savefig(folder / "plots" / f"{name}.png", dpi=110)
            plt.close(figure)
        client.log_artifacts(run_id, str(folder), artifact_path=ARTIFACT_DIR)
    client.set_terminated(run_id)
    return run_id
