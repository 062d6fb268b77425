"""A result (one process's or Spark's) into an MLflow run: tables, report, signature, plots (and, on request, metrics).

Every run gets the same artifact names, so two runs' artifacts line up in the UI:

    mgm_rows.json        one row per summary: values, reasoning, error, usage      (mlflow.log_table)
    mgm_claims.json      one row per claim: verdict and reason                      (mlflow.log_table)
    mgm_key_points.json  one row per (summary, key point): covered and reason       (mlflow.log_table)
    [mgm_facts.json      an answers run's: one row per fact of an expected answer, in place of key points]
    mgm_plot_metrics.png  mgm_plot_verdicts.png  [mgm_plot_categories.png]
    mgm/rows.parquet  mgm/claims.parquet  mgm/key_points.parquet   the same tables, typed (``load_run`` reads them;
                                                                   a Spark run: Parquet folders)
    mgm/report.json      signature, row counts, every aggregate (written last)

and the tag ``mgm.signature``, the param ``mgm.signature`` and one param per signature field
(``mgm.judge``, ``mgm.base``, ``mgm.claims``, ...). Each warning of the result is a tag ``mgm.warning.<kind>``
holding its sentence (``mgm.warning.low_verification``: the judge verified almost nothing), so a run's page says
it beside the numbers; a run logged again without it loses the tag.

Why these names: the UI's compare view ("Artifacts" of two or more runs) lists only the *files at the top level*
that every compared run has (it never opens a folder), so the tables and plots sit at the top level, under names
that are the same on every run and start with ``mgm_`` so they sort together beside MLflow's own
(``eval_results_table.json`` on the classic path). The tables go through ``mlflow.log_table``, which records them
in the run's ``mlflow.loggedArtifacts`` tag: that tag is what makes the artifact view offer "View as table". A
table is written once per run: ``log_table`` appends to an existing file, so logging again to the same run
replaces each table's file instead (in ``log_table``'s own format, ``orient="split"``). A Spark result's tables
are Parquet folders that never come to the driver whole: its JSON tables hold the first
``SPARK_TABLE_ROWS`` rows of each Parquet copy, and ``mgm/*.parquet`` stays the complete record.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import mlflow
import pandas as pd
import pyarrow.dataset as pa_dataset
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from .. import plots
from ..grounding.model import calibrated_on
from ..signature import parse_signature
from ..summarization.metrics import run_metrics
from ..summarization.result import RunResult

ARTIFACT_DIR = "mgm"
SIGNATURE_TAG = "mgm.signature"
WARNING_TAG_PREFIX = "mgm.warning."  # + the warning's kind, e.g. mgm.warning.low_verification
TABLES = ("rows", "claims", "key_points")  # a summary run's tables; an answers run has "facts" for "key_points"
SPARK_TABLE_ROWS = 1_000  # rows of each Spark table shown as an MLflow table; the Parquet copy holds them all


def table_artifact(name: str) -> str:
    """The top-level artifact a run's table ``name`` ("rows", "claims", "key_points") is logged as."""
    return f"mgm_{name}.json"


def plot_artifact(name: str) -> str:
    """The top-level artifact a run's plot ``name`` ("metrics", "verdicts", "categories") is saved as."""
    return f"mgm_plot_{name}.png"


def set_tags(client: MlflowClient, run_id: str, tags: dict[str, str], params: dict[str, str] | None = None) -> None:
    """Set ``tags`` (and log ``params``) on ``run_id`` in one request: one call to a tracking server (one transaction
    on a SQL store) instead of one per value."""
    tags, params = [RunTag(k, v) for k, v in tags.items()], [Param(k, v) for k, v in (params or {}).items()]
    for start in range(0, max(len(tags), len(params)), 100):  # MLflow takes up to 100 of each a request
        client.log_batch(run_id, tags=tags[start : start + 100], params=params[start : start + 100])


def loggable_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """MLflow stores numbers; an undefined aggregate (e.g. alignment when no row was judged) is left out."""
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


NOTE_TAG = "mlflow.note.content"  # MLflow's run description, the first thing a run's page shows
NOTE_LIMIT = 8000  # the longest tag value MLflow stores (mlflow.utils.validation.MAX_TAG_VAL_LENGTH)
_NOTE_SECTION = re.compile(r"\n*<!-- mlflow_genai_metrics (.+?) -->\n")
GROUNDING_CALIBRATION_TAG = "mgm.grounding.calibrated_on"  # the data the grounding score and its 0.5 cut are calibrated on


def log_result(result: RunResult, *, run_id: str | None = None, log_metrics: bool = False, all_metrics: bool = False) -> str:
    """Log the tables, report, signature and plots of ``result`` (one process's ``SummarizationResult`` or Spark's)
    to ``run_id`` (default: the active run), under the names of this module's docstring.

    ``log_metrics=True`` also logs the headline aggregates as run metrics (``summarization.metrics.run_metrics``:
    each with its interval and n, and the judge's calls and cost; every aggregate with ``all_metrics=True``); the
    report holds every figure either way. Logging the same result to the same run again leaves each table
    with its rows once.
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
    tags.update({f"{WARNING_TAG_PREFIX}{kind}": message for kind, message in report.get("warnings", {}).items()})
    if parse_signature(result.signature).get("grounding"):  # what the grounded label holds on, beside the run's figures
        tags[GROUNDING_CALIBRATION_TAG] = calibrated_on()
    # A one-process result's tables are in memory already; a Spark result's are read back only in part.
    limit = None if isinstance(getattr(result, "rows", None), pd.DataFrame) else SPARK_TABLE_ROWS
    return _log(run_id, result.TABLE_NAMES, result.write_tables, limit, figures, report, result.signature, run_metrics(result.metrics, all_metrics=all_metrics) if log_metrics else None, tags)


def log_spark_result(result: RunResult, *, run_id: str | None = None, log_metrics: bool = True, all_metrics: bool = False) -> str:
    """``log_result`` for a ``judge_summaries_spark`` result, logging its metrics by default (no MLflow evaluation
    logs them for it). Its JSON tables hold the first ``SPARK_TABLE_ROWS`` rows of each table; the Parquet copies
    under ``mgm/`` hold every row."""
    return log_result(result, run_id=run_id, log_metrics=log_metrics, all_metrics=all_metrics)


def _read_table(path: Path, limit: int | None) -> pd.DataFrame:
    """A table's Parquet copy (a file, or Spark's folder of parts), whole or its first ``limit`` rows."""
    if limit is None:
        return pd.read_parquet(path)
    return pa_dataset.dataset(str(path), format="parquet").head(limit).to_pandas()


def _log_table(client: MlflowClient, run_id: str, table: pd.DataFrame, artifact_file: str, existing: set[str]) -> None:
    """``log_table``, written once per run: it would append to a file already there, so a rerun replaces it."""
    if artifact_file not in existing:
        client.log_table(run_id, table, artifact_file)
        return
    with tempfile.TemporaryDirectory(prefix="mgm-table-") as scratch:
        path = Path(scratch) / artifact_file
        table.to_json(path, orient="split", index=False, date_format="iso")  # log_table's own format
        client.log_artifact(run_id, str(path))


def _number_parts(folder: Path) -> None:
    """Spark names its parts with a fresh uuid each time; numbered parts make a rerun replace them, not add to them."""
    for index, part in enumerate(sorted(folder.glob("part-*"))):
        part.rename(folder / f"part-{index:05d}.parquet")


def _log(
    run_id: str | None,
    tables: tuple[str, ...],
    write_tables: Callable[[Path], None],
    limit: int | None,
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
    # The tables, report and plots are written to a local folder first and kept there if anything after fails, so
    # nothing judged is lost to a logging failure; the error says where they are.
    folder = Path(tempfile.mkdtemp(prefix="mgm-artifacts-")) / ARTIFACT_DIR
    try:
        folder.mkdir()
        write_tables(folder)
        (folder / "report.json").write_text(json.dumps(report, indent=1))
        for name, draw in figures.items():
            figure = draw()
            figure.savefig(folder / plot_artifact(name), dpi=110)
            plt.close(figure)
        existing = {item.path for item in client.list_artifacts(run_id)}
        for name in tables:
            copy = folder / f"{name}.parquet"
            _log_table(client, run_id, _read_table(copy, limit), table_artifact(name), existing)
            if copy.is_dir():  # Spark's folder of parts
                _number_parts(copy)
                client.log_artifacts(run_id, str(copy), artifact_path=f"{ARTIFACT_DIR}/{copy.name}")
            else:
                client.log_artifact(run_id, str(copy), artifact_path=ARTIFACT_DIR)
        for name in figures:
            client.log_artifact(run_id, str(folder / plot_artifact(name)))
        # The report goes last: a run whose mgm/report.json exists has every other artifact whole.
        client.log_artifact(run_id, str(folder / "report.json"), artifact_path=ARTIFACT_DIR)
        params = {"mgm.signature": signature, **{f"mgm.{k}": v for k, v in parse_signature(signature).items()}}
        logged = client.get_run(run_id).data
        for key in logged.tags:  # a warning of an earlier logging that this result does not call for
            if key.startswith(WARNING_TAG_PREFIX) and key not in (tags or {}):
                client.delete_tag(run_id, key)
        # params are write-once in MLflow; a rerun of the same run logs nothing new
        set_tags(client, run_id, {SIGNATURE_TAG: signature, **(tags or {})},
                 {key: value for key, value in params.items() if logged.params.get(key) != value})
        if metrics is not None:
            now, loggable = int(time.time() * 1000), loggable_metrics(metrics)
            client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in loggable.items()])
            # The model evaluated (a logged model the run takes as input) carries the headline figures too, so the
            # Models tab compares versions: the figures alone, their intervals and counts stay the run's.
            headline = {k: v for k, v in loggable.items() if not k.endswith(("_ci_low", "_ci_high", "_n")) and not k.startswith("judge/")}
            for model in _evaluated_models(client, run_id):
                client.log_batch(run_id, metrics=[Metric(k, v, now, 0, model_id=model) for k, v in headline.items()])
    except Exception as error:
        raise LoggingFailedError(
            f"logging to MLflow run {run_id} failed ({type(error).__name__}: {error}). Nothing judged is lost: the "
            f"per-row tables (Parquet), report and plots are in {folder} (and the judge's answers in its cache, so "
            "a rerun makes no call)."
        ) from error
    shutil.rmtree(folder.parent, ignore_errors=True)
    return run_id


def _evaluated_models(client: MlflowClient, run_id: str) -> list[str]:
    """The logged models ``run_id`` evaluated: those it takes as input (``evaluate_summaries(model_id=)``,
    ``SummarizerModel.log`` inside the run)."""
    inputs = client.get_run(run_id).inputs
    return sorted({m.model_id for m in (getattr(inputs, "model_inputs", None) or [])})


class LoggingFailedError(RuntimeError):
    """Logging a result to MLflow failed after everything was judged; the message says where the tables are kept."""


def tag_value(text: str) -> str:
    """``text`` as a tag's value: past ``NOTE_LIMIT`` cut short, ending "..." (MLflow refuses a longer one)."""
    return text if len(text) <= NOTE_LIMIT else text[: NOTE_LIMIT - 3] + "..."


def set_note_section(client: MlflowClient, run_id: str, section: str, text: str) -> None:
    """Put ``text`` in the run's description under ``section`` (a gate's decision, people's estimate): the person's
    own text stays first, each of our sections after it in the order first written, replaced by its latest. Past
    ``NOTE_LIMIT`` the longest section is cut short (ending "..."), its mark kept whole, so the others stay whole."""
    parts = _NOTE_SECTION.split(client.get_run(run_id).data.tags.get(NOTE_TAG, ""))
    sections = {name: body.rstrip() for name, body in zip(parts[1::2], parts[2::2])}
    own = [parts[0].rstrip()] if parts[0].strip() else []

    def note() -> str:
        return "\n\n".join([*own, *(f"<!-- mlflow_genai_metrics {name} -->\n{body}" for name, body in sections.items())])

    sections[section] = text
    while (over := len(note()) - NOTE_LIMIT) > 0 and len(longest := max(sections.values(), key=len)) > 3:
        name = next(name for name, body in sections.items() if body is longest)
        sections[name] = longest[: max(0, len(longest) - over - 3)] + "..."
    client.set_tag(run_id, NOTE_TAG, note())
