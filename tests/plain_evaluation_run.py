"""One plain ``mlflow.genai.evaluate`` at MLflow's default workers on a SQLite store of its own, with one Judge per
scorer, checked as issue 46 asks: every row gets every card and MLflow's own aggregates (a card MLflow could not
store, its pool of SQLite connections spent, MLflow warns of), and ``log_results`` gives the complete figures or
names the rows MLflow did not store; never a false alarm.

``python plain_evaluation_run.py BASE_URL MODEL RUN STORE_URI ARTIFACTS_URI``: run number RUN (15 + RUN % 6 rows)
against the scripted judge at BASE_URL. Its last line of output says how it ended (JSON: ``{"run": RUN, "rows": n,
"ended": "complete" | "rows named"}``); a failed check is a traceback and a non-zero exit status.

``test_one_evaluation.py`` runs ten of these at once, each in a process of its own: MLflow's tracking store
is the process's, and at its default workers each run spends most of its time waiting (its own threads wait out
SQLAlchemy's 30-s pool timeout), so the waits overlap instead of adding up.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import mlflow
from helpers import judge_for
from mlflow.tracking import MlflowClient
from test_one_evaluation import mlflow_warnings, rows_for

from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, log_results
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch
from mlflow_genai_metrics.tracking.genai import root_span


def one_run(base_url: str, model: str, run: int) -> dict:
    server = SimpleNamespace(base_url=base_url, models=(model,))
    rows = rows_for(f"p{run}", 15 + run % 6)
    scorers = [ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server, seed=7)), Grounding()]
    with mlflow_warnings() as said:
        result = mlflow.genai.evaluate(data=rows, scorers=scorers)
    cards = result.result_df  # the rows MLflow kept: each with every card, unless MLflow said it could not store it
    missing = {name: int(cards[f"{name}/value"].isna().sum()) for name in ("claim_alignment", "key_point_coverage", "grounding")}
    if any(missing.values()):  # MLflow ran out of SQLite connections writing a trace or its assessments: it says so
        assert [message for message in said if message.startswith("Failed to")], (missing, said)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert {"claim_alignment/mean", "key_point_coverage/mean", "grounding/mean"} <= set(metrics)
    mlflow.flush_trace_async_logging()  # the run's traces as MLflow lists them once its writers are done (some may
    traces = len(mlflow.search_traces(run_id=result.run_id, include_spans=False, return_type="list"))  # lack a tag)
    try:  # the full report signs one judge: the claim judge's scorers (coverage's judge is another)
        logged = log_results(result.run_id, [scorers[0], scorers[2]], data=rows)
    except RunRowsMismatch as mismatch:  # MLflow lost traces (or their spans): said with the ids it does not hold, nothing logged
        # what MLflow itself lists, once its writers are done: a trace whose spans it could not write holds no row
        listed = mlflow.search_traces(run_id=result.run_id, return_type="list")
        held = {root.inputs["id"] for trace in listed if (root := root_span(trace)) is not None}
        lost = [row["inputs"]["id"] for row in rows if row["inputs"]["id"] not in held]
        assert lost and f"the run evaluated {len(rows)} rows, {traces} of their traces can be read back (not stored: ids {', '.join(lost)})" in str(mismatch)
        assert "alignment" not in MlflowClient().get_run(result.run_id).data.metrics
        return {"run": run, "rows": len(rows), "ended": "rows named"}
    assert traces == len(rows) == len(logged.rows)
    assert MlflowClient().get_run(result.run_id).data.metrics["alignment_n"] == len(rows)
    return {"run": run, "rows": len(rows), "ended": "complete"}


def main(argv: list[str]) -> None:
    base_url, model, run, store, artifacts = argv
    mlflow.set_tracking_uri(store)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("mgm-tests", artifact_location=artifacts))
    print(json.dumps(one_run(base_url, model, int(run))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
