"""A ``SummarizationResult`` into an MLflow run: tables, report, signature, plots (and, on request, metrics).

Every run gets the same artifact names, so two runs' artifacts line up in the UI:

    mgm/rows.json  mgm/rows.parquet            one row per summary: values, reasoning, error, usage
    mgm/claims.json  mgm/claims.parquet        one row per claim: verdict and reason
    mgm/key_points.json  mgm/key_points.parquet one row per (summary, key point): covered and reason
    mgm/report.json                            signature, row counts, every aggregate (written last)
    mgm/plots/metrics.png  mgm/plots/verdicts.png  [mgm/plots/categories.png]

and the tag ``mgm.signature``, the param ``mgm.signature`` and one param per signature field
(``mgm.judge``, ``mgm.base``, ``mgm.claims``, ...).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from ..signature import parse_signature
from ..summarization.result import SummarizationResult
from . import plots

__all__ = ["ARTIFACT_DIR", "SIGNATURE_TAG", "log_result", "loggable_metrics"]

ARTIFACT_DIR = "mgm"
SIGNATURE_TAG = "mgm.signature"


def loggable_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """MLflow stores numbers; an undefined aggregate (e.g. alignment when no row was judged) is left out."""
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def _write_table(table: pd.DataFrame, folder: Path, name: str) -> None:
    table.to_json(folder / f"{name}.json", orient="records", indent=1, force_ascii=False)
    # Parquet keeps types (nullable integers stay integers); object ids become strings for a stable schema.
    columnar = table.copy()
    if "id" in columnar:
        columnar["id"] = columnar["id"].astype(str)
    columnar.to_parquet(folder / f"{name}.parquet", index=False)


def log_result(result: SummarizationResult, *, run_id: str | None = None, log_metrics: bool = False) -> str:
    """Log the tables, report, signature and plots of ``result`` to ``run_id`` (default: the active run).

    ``log_metrics=True`` also logs every aggregate as a run metric (the classic ``mlflow.evaluate`` path logs them
    itself, from the metrics' aggregate results).
    """
    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        raise RuntimeError("no MLflow run to log to: pass run_id= or call inside mlflow.start_run()")
    client = MlflowClient()
    with tempfile.TemporaryDirectory(prefix="mgm-artifacts-") as tmp:
        folder = Path(tmp) / ARTIFACT_DIR
        (folder / "plots").mkdir(parents=True)
        _write_table(result.rows, folder, "rows")
        _write_table(result.claims, folder, "claims")
        _write_table(result.key_points, folder, "key_points")
        figures = {
            "metrics": plots.metric_bars({"this run": result.metrics}),
            "verdicts": plots.verdict_bars(result.claims),
        }
        if "category" in result.rows and result.rows["category"].notna().any():
            figures["categories"] = plots.category_bars({"this run": result.rows})
        for name, figure in figures.items():
            figure.savefig(folder / "plots" / f"{name}.png", dpi=110)
            plt.close(figure)
        client.log_artifacts(run_id, str(folder), artifact_path=ARTIFACT_DIR)
        # The report goes last: a run whose mgm/report.json exists has every other artifact whole.
        report = Path(tmp) / "report.json"
        report.write_text(json.dumps(result.report(), indent=1))
        client.log_artifact(run_id, str(report), artifact_path=ARTIFACT_DIR)
    client.set_tag(run_id, SIGNATURE_TAG, result.signature)
    params = {"mgm.signature": result.signature, **{f"mgm.{k}": v for k, v in parse_signature(result.signature).items()}}
    existing = client.get_run(run_id).data.params
    for key, value in params.items():
        if existing.get(key) != value:  # params are write-once in MLflow; a rerun of the same run logs nothing new
            client.log_param(run_id, key, value)
    if log_metrics:
        for key, value in loggable_metrics(result.metrics).items():
            client.log_metric(run_id, key, value)
    return run_id
