"""``compare_runs``: several evaluation runs side by side, each tested against the first; logged as a run on request.

A run's figures (``run_figures``, ``EvaluatedRun.metrics``, what the gate's rules read) are its report's aggregates
(``mgm/report.json``, every figure, written last by the logging that also logs the run's headline metrics) over
its logged run metrics: the report is authoritative for every name it holds (a run logged again with fewer run
metrics keeps no stale one), the run metrics add the names it lacks (MLflow's own, the user's). A run without a
report (not ours) has its run metrics only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from .. import plots
from ..stats import StatisticsOptions
from ..summarization.options import resolve
from ..summarization.run_table import DECISION_METRIC, comparison_table, disagreements, people_differences, test_labels
from .labels import SAMPLE_TAG
from .run_logging import ARTIFACT_DIR, SIGNATURE_TAG, set_note_section, set_tags, tag_value


@dataclass(frozen=True)
class EvaluatedRun:
    """What an evaluation run holds: its metrics, signature and per-row table (``mgm/rows.parquet``)."""

    run_id: str
    name: str
    metrics: dict[str, float]
    signature: str
    rows: pd.DataFrame
    served_models: tuple[str, ...] = ()  # the model names the judge's endpoint reported in its replies (its report)


def run_figures(run: Run, client: MlflowClient | None = None, report: dict[str, Any] | None = None) -> dict[str, float]:
    """Every figure of ``run``: its report's aggregates (an undefined one, null in the report, left out) over its
    run metrics, as this module's docstring says; one listing and one small download.

        figures = run_figures(MlflowClient().get_run(run_id))
        figures["claim_support_rate"], figures["defect_rate/unverifiable"]  # in the report, not run metrics
    """
    client = client or MlflowClient()
    figures = dict(run.data.metrics)
    report = run_report(run.info.run_id, client) if report is None else report  # ``report``: read already
    for name, value in report.get("metrics", {}).items():
        if value is None or not math.isfinite(float(value)):
            figures.pop(name, None)
        else:
            figures[name] = float(value)
    return figures


def run_report(run_id: str, client: MlflowClient) -> dict[str, Any]:
    """The run's ``mgm/report.json`` (empty when the run has none: not ours)."""
    report_path = f"{ARTIFACT_DIR}/report.json"
    if report_path not in {item.path for item in client.list_artifacts(run_id, ARTIFACT_DIR)}:
        return {}
    with tempfile.TemporaryDirectory(prefix="mgm-report-") as tmp, quiet_downloads():
        return json.loads(Path(client.download_artifacts(run_id, report_path, tmp)).read_text())


def load_run(run_id: str, client: MlflowClient | None = None) -> EvaluatedRun:
    """Read an evaluation run logged by this package (its figures as ``run_figures`` reads them); a clear error if
    it is not one."""
    client = client or MlflowClient()
    return evaluated_run(client.get_run(run_id), client)


def evaluated_run(run: Run, client: MlflowClient, figures: dict[str, float] | None = None,
                  report: dict[str, Any] | None = None, rows: pd.DataFrame | None = None) -> EvaluatedRun:
    """``load_run`` of a run already read, with its ``figures``, ``report`` and ``rows`` table when read already too
    (the gate reads them first): each run's report and rows are downloaded once."""
    run_id = run.info.run_id
    signature = run.data.tags.get(SIGNATURE_TAG)
    if signature is None and run.info.status != "FINISHED":  # an mgm evaluate interrupted (Ctrl-C) or failed, or still running
        raise ValueError(f"run {run_id} is {run.info.status} and has no results: it ended (or is) before they were logged; "
                         "evaluate again (the judge's cache keeps what was answered)")
    if signature is None:
        raise ValueError(f"run {run_id} has no {SIGNATURE_TAG} tag: it was not evaluated with mlflow_genai_metrics")
    rows = load_table(run_id, "rows", client) if rows is None else rows
    report = run_report(run_id, client) if report is None else report
    metrics = figures if figures is not None else run_figures(run, client, report)
    served = tuple(sorted(report.get("judge_reported_models", {})))
    return EvaluatedRun(run_id, run.info.run_name or run_id[:8], metrics, signature, rows, served)


@contextlib.contextmanager
def quiet_downloads() -> Iterator[None]:
    """No MLflow progress bar for the small files a comparison reads (each run's report and tables), unless the user
    set ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR`` themselves."""
    if _PROGRESS_BAR in os.environ:
        yield
        return
    os.environ[_PROGRESS_BAR] = "false"
    try:
        yield
    finally:
        os.environ.pop(_PROGRESS_BAR, None)


_PROGRESS_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def load_table(run_id: str, name: str, client: MlflowClient) -> pd.DataFrame:
    """A run's table ``name`` ("rows", "claims", ...) whole, from its Parquet copy (``mgm/<name>.parquet``, a file or
    Spark's folder of parts), ids as the text they are stored in."""
    with tempfile.TemporaryDirectory(prefix="mgm-run-") as tmp, quiet_downloads():
        table = pd.read_parquet(client.download_artifacts(run_id, f"{ARTIFACT_DIR}/{name}.parquet", tmp))
    if "id" in table:  # ids are stored as text; keep them so, whatever pandas infers
        table["id"] = table["id"].astype(str)
    return table


def compare_runs(
    run_ids: list[str],
    *,
    metrics: list[str] | None = None,
    allow_mixed_judges: bool = False,
    allow_partial: bool = False,
    statistics: StatisticsOptions | None = None,
    log: bool = False,
    run_name: str = "comparison",
    **keywords: Any,
) -> pd.DataFrame:
    """Compare evaluation runs: one row per (run, metric) with its value, 95% interval and n, and, for every run
    after the first, the paired difference against the first over the usable pairs: the test of the metric's kind
    (``test``), the interval of the difference, the p-value Holm-adjusted over every metric of every run shown
    (``p_holm``: the one to read; three candidates are one family) and the raw one beside it (``p_value``), ``better`` ("this", "first" or "") in the metric's ``direction``, the pairs it
    stands on (``pairs``) and a ``metric_note`` ("too few pairs to test", pairs left out because references or key
    points differ).

    Runs with people's estimates (``people/strict_alignment``, ``tracking.labels.people_estimate``) get a row each
    (``n``: the labelled rows), and each after the first, where both have one of the same card, the difference of the
    two estimates with its interval (``test`` "independent samples (MOVER)", no p-value; ``metric_note`` says what
    it assumes, or "too few labels"), logged on the comparison run as ``mgm.people_difference.<k>`` tags.

    Pairing follows ``compare_results`` exactly (each run is loaded into it): rows pair by id and source, a row
    with a judge error on either side leaves the pair, and the columns ``pairs_used``, ``pairs_dropped_for_errors``,
    ``only_in_first`` and ``only_in_this`` say what each comparison stands on. Runs whose judge signatures differ
    are refused (``SignatureMismatchError``) unless ``allow_mixed_judges=True``; too few usable pairs
    (``InsufficientPairsError``) unless ``allow_partial=True``; then the table's ``note`` column and the plots say
    so. Nothing is written to MLflow unless ``log=True``: then a comparison run is logged in the first run's
    experiment (its id in ``table.attrs["comparison_run_id"]``) with the table (JSON and Parquet) and the plots
    (alignment against richness, bars with intervals, per-category bars when the rows have a category).
    ``statistics`` (a ``stats.StatisticsOptions``, or its fields as keywords) sets the tests' intervals and level.
    """
    statistics = resolve("compare_runs", keywords, statistics=statistics, judging=False).statistics
    if len(run_ids) < 2:
        raise ValueError("compare_runs needs at least two run ids")
    if repeated := sorted({run_id for run_id in run_ids if run_ids.count(run_id) > 1}):  # [A, B, A] compared A with itself
        raise ValueError(f"compare_runs takes each run once; given more than once: {', '.join(repeated)}")
    client = MlflowClient()
    runs = [load_run(run_id, client) for run_id in run_ids]
    cards = {run_id: client.get_run(run_id).data.tags.get(f"{SAMPLE_TAG}.card") for run_id in run_ids}
    table, note = comparison_table(
        runs, metrics=metrics, allow_mixed_judges=allow_mixed_judges, allow_partial=allow_partial, statistics=statistics, cards=cards,
    )
    if log:
        table.attrs["comparison_run_id"] = _log_comparison(runs, table, note, client, run_name)
    return table


def _log_comparison(runs: list[EvaluatedRun], table: pd.DataFrame, note: str, client: MlflowClient, run_name: str) -> str:
    from .agreement import side_experiment

    experiment_id = side_experiment(client.get_run(runs[0].run_id).info.experiment_id, "comparisons")
    labels = {run.run_id: f"{run.name} ({run.run_id[:6]})" for run in runs}
    comparison = client.create_run(experiment_id, run_name=run_name, tags={"mgm.compared_runs": ",".join(r.run_id for r in runs)})
    run_id = comparison.info.run_id
    lines = {"disagreement": disagreements(table), "people_difference": people_differences(table)}
    set_tags(client, run_id, {**({"mgm.note": note} if note else {}), "mgm.decision_metric": DECISION_METRIC,
                              **{f"mgm.{kind}.{number}": tag_value(line) for kind, found in lines.items()
                                 for number, line in enumerate(found, start=1)}})
    # the run's description, the first thing its page shows: what was compared, and those lines in full
    said = [f"- {line}" for found in lines.values() for line in found]
    head = f"**Comparison of {', '.join(labels.values())}**: every metric's difference and test in `{ARTIFACT_DIR}/comparison.json`."
    set_note_section(client, run_id, "comparison", "\n".join([head, *([""] + said if said else [])]))
    with tempfile.TemporaryDirectory(prefix="mgm-compare-") as tmp:
        folder = Path(tmp) / ARTIFACT_DIR
        (folder / "plots").mkdir(parents=True)
        table.to_json(folder / "comparison.json", orient="records", indent=1)
        table.to_parquet(folder / "comparison.parquet", index=False)
        (folder / "runs.json").write_text(json.dumps({labels[r.run_id]: {"run_id": r.run_id, "signature": r.signature} for r in runs}, indent=1))
        by_run = {labels[r.run_id]: r.metrics for r in runs}
        tests = test_labels(table)
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
