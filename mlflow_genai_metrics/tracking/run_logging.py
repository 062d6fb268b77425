"""A result (one process's or Spark's) into an MLflow run: tables, report, signature, plots (and, on request, metrics).

Every run gets the same artifact names, so two runs' artifacts line up in the UI:

    mgm/rows.json  mgm/rows.parquet            one row per summary: values, reasoning, error, usage
                                               (a Spark run: Parquet folders, no JSON)
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
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import mlflow
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from ..signature import parse_signature
from ..summarization.result import RunResult
from . import plots

__all__ = ["ARTIFACT_DIR", "SIGNATURE_TAG", "LoggingFailedError", "log_result", "log_spark_result", "loggable_metrics"]

ARTIFACT_DIR = "mgm"
SIGNATURE_TAG = "mgm.signature"


def loggable_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """MLflow stores numbers; an undefined aggregate (e.g. alignment when no row was judged) is left out."""
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def log_result(result: RunResult, *, run_id: str | None = None, log_metrics: bool = False) -> str:
    """Log the tables, report, signature and plots of ``result`` (one process's ``SummarizationResult`` or Spark's)
    to ``run_id`` (default: the active run).

    ``log_metrics=True`` also logs every aggregate as a run metric (the classic ``mlflow.evaluate`` path logs them
    itself, from the metrics' aggregate results).
    """
    figures = {
        "metrics": lambda: plots.metric_bars({"this run": result.metrics}),
        "verdicts": lambda: plots.verdict_bars(result.verdict_counts()),
    }
    categories = result.category_rows()
    if categories is not None:
        figures["categories"] = lambda: plots.category_bars({"this run": categories})
    report = result.report()
    tags = {"mgm.judge_model_mismatch": "true"} if report.get("judge_model_mismatch") else {}
    return _log(run_id, result.write_tables, figures, report, result.signature, result.metrics if log_metrics else None, tags)


def log_spark_result(result: RunResult, *, run_id: str | None = None, log_metrics: bool = True) -> str:
    """``log_result`` for a ``judge_summaries_spark`` result, logging its metrics by default (no MLflow evaluation
    logs them for it)."""
    return log_result(result, run_id=run_id, log_metrics=log_metrics)


def _log(
    run_id: str | None,
    write_tables: Callable[[Path], None],
    figures: dict[str, Callable[[], Any]],
    report: dict[str, Any],
    signature: str,
    metrics: dict[str, float] | None,
    tags: dict[str, str] | None = None,
) -> str:
    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        raise RuntimeError("no MLflow run to log to: pass run_id= or call inside mlflow.start_run()")
    client = MlflowClient()
    # The tables are written to a local folder first and kept there if anything after fails, so nothing judged is
    # lost to a logging failure; the error says where they are.
    tmp = Path(tempfile.mkdtemp(prefix="mgm-artifacts-"))
    folder = tmp / ARTIFACT_DIR
    try:
        (folder / "plots").mkdir(parents=True)
        write_tables(folder)
        (tmp / "report.json").write_text(json.dumps(report, indent=1))
        for name, draw in figures.items():
            figure = draw()
            figure.savefig(folder / "plots" / f"{name}.png", dpi=110)
            plt.close(figure)
        client.log_artifacts(run_id, str(folder), artifact_path=ARTIFACT_DIR)
        # The report goes last: a run whose mgm/report.json exists has every other artifact whole.
        client.log_artifact(run_id, str(tmp / "report.json"), artifact_path=ARTIFACT_DIR)
        client.set_tag(run_id, SIGNATURE_TAG, signature)
        for key, value in (tags or {}).items():
            client.set_tag(run_id, key, value)
        params = {"mgm.signature": signature, **{f"mgm.{k}": v for k, v in parse_signature(signature).items()}}
        existing = client.get_run(run_id).data.params
        for key, value in params.items():
            if existing.get(key) != value:  # params are write-once in MLflow; a rerun of the same run logs nothing new
                client.log_param(run_id, key, value)
        if metrics is not None:
            client.log_batch(run_id, metrics=[Metric(k, v, int(time.time() * 1000), 0) for k, v in loggable_metrics(metrics).items()])
    except Exception as error:
        raise LoggingFailedError(
            f"logging to MLflow run {run_id} failed ({type(error).__name__}: {error}). Nothing judged is lost: the "
            f"per-row tables, report and plots are in {folder} (and the judge's answers in its cache, so a rerun "
            "makes no call)."
        ) from error
    shutil.rmtree(tmp, ignore_errors=True)
    return run_id


class LoggingFailedError(RuntimeError):
    """Logging a result to MLflow failed after everything was judged; the message says where the tables are kept."""
