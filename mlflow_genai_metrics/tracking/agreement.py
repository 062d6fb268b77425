"""The judge's agreement with people, read back from the feedback on an experiment's (or one run's) traces.

    from mlflow_genai_metrics.tracking import judge_agreement
    report = judge_agreement("my-app", name="claim_alignment")   # or judge_agreement(run_id=evaluation_run_id)
    report.metrics["cohen_kappa"], report.counts["pairs_used"], report.confusion

What is compared is the card's value, so its meaning is the card's: under ``claim_alignment`` the judge's "yes"
means *faithful*, the summary makes claims and the source supports every one (``strictly_aligned``; a contradicted
or an unverifiable claim makes it "no"). People labelling those traces answer the same question: is every
statement of the summary supported by the source? (``mgm meta-eval`` measures the study's ``aligned``, no claim
contradicted, against a labelled file instead.)

Per trace, under the feedback name ``name``:

- **the judge's verdict**: the latest feedback from an ``LLM_JUDGE`` source that has no error, also when a person
  overrode it (``mlflow.override_feedback`` marks it not valid: it is still what the judge said, and the override
  is that person's vote); a feedback with an error is not a verdict (a later error never erases an earlier
  verdict), and a trace whose judge feedback are all errors counts as ``judge_error``, or as ``application_error``
  where one of them is an ``APPLICATION_ERROR`` card (the row's application failed: nothing was judged, so it is
  not the judge's error; left out of the figures and counted, as the judge's are);
- **the people's verdict**: each person's (``HUMAN`` source id) latest valid feedback is their vote (an overridden
  one was replaced); the majority of the votes decides, a tie is left out and counted (``human_ties``);
- a value is a verdict when it is "yes"/"no", "true"/"false" (any case), True/False or 1/0; anything else (a
  share, "unknown", a list) is never guessed: a person's such value is no vote, and a trace whose judge value or
  every vote is such counts as ``unusable_values``.

Each trace lands in exactly one count: ``pairs_used``, ``judge_only`` (no person labelled it), ``human_only`` (no
judge feedback), ``judge_error``, ``application_error``, ``unusable_values``, ``human_ties`` or ``unlabelled`` (no
feedback under ``name`` from a judge or a person); they add up to ``traces_seen``. Beside them, never silently:
``votes_not_verdicts`` (people's values that are not yes/no, no vote), ``other_sources`` (traces with feedback under
``name`` from neither a judge nor a person, e.g. ``mlflow.log_feedback`` without ``source=``, a ``CODE`` source: not
used) and ``judges`` (the judges whose verdicts were paired; more than one without ``judge_source_id`` mixes them),
each said in ``notes``. Balanced accuracy and Cohen's kappa (``meta.binary_agreement``: the
people are the truth, exact intervals) are logged as an MLflow run in the source experiment
with the counts, the confusion matrix and the per-trace table (``mlflow.log_table``) and tags naming the source.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ..meta_evaluation import binary_agreement_metrics, confusion_frame
from ..summarization.verdicts import COMBINE_RULE, OUTCOMES, trace_verdicts
from .feedback import application_card
from .run_logging import ARTIFACT_DIR, SIGNATURE_TAG, loggable_metrics, tag_value

CONFUSION_TABLE = f"{ARTIFACT_DIR}/agreement_confusion.json"
TRACES_TABLE = f"{ARTIFACT_DIR}/agreement_traces.json"


@dataclass
class AgreementReport:
    """``metrics``: balanced accuracy and Cohen's kappa with ``_ci_low``/``_ci_high``/``_n``; ``counts``: traces
    per outcome, ``traces_seen``, ``people`` and those beside them (module doc); ``notes``: what they say, in words; ``confusion``: people (rows) by judge (columns); ``traces``: one row
    per trace; ``run_id``: the MLflow run the report was logged as (None with ``log=False``)."""

    name: str
    experiment_id: str
    source_run_id: str | None
    judge_source_id: str | None
    metrics: dict[str, float]
    counts: dict[str, int]
    confusion: pd.DataFrame
    traces: pd.DataFrame
    run_id: str | None = None
    notes: tuple[str, ...] = ()  # what was left out or mixed, in sentences (``mgm agreement`` prints them)


def _not_found(error: MlflowException) -> bool:
    return error.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND")


def _experiment(client: MlflowClient, id_or_name: str):
    found = client.get_experiment_by_name(id_or_name)
    if found is None and id_or_name.isdigit():
        try:
            found = client.get_experiment(id_or_name)
        except MlflowException as error:
            if not _not_found(error):
                raise
    if found is None or found.lifecycle_stage == "deleted":
        raise ValueError(f"no experiment {id_or_name!r} in the tracking store {mlflow.get_tracking_uri()}")
    return found


def _source(client: MlflowClient, experiment_id_or_name: str | None, run_id: str | None) -> tuple[str, str | None]:
    """The experiment id to search and the run to filter on; a missing one is a ValueError."""
    if run_id is not None:
        try:
            run = client.get_run(run_id)
        except MlflowException as error:
            if _not_found(error):
                raise ValueError(f"no run {run_id!r} in the tracking store {mlflow.get_tracking_uri()}") from None
            raise
        if experiment_id_or_name is not None and _experiment(client, experiment_id_or_name).experiment_id != run.info.experiment_id:
            raise ValueError(f"run {run_id} is not in experiment {experiment_id_or_name!r}")
        return run.info.experiment_id, run_id
    experiment_id_or_name = experiment_id_or_name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or os.environ.get("MLFLOW_EXPERIMENT_ID")
    if not experiment_id_or_name:
        raise ValueError("name an experiment or a run whose traces to read (or set MLFLOW_EXPERIMENT_NAME)")
    return _experiment(client, experiment_id_or_name).experiment_id, None


def judge_agreement(
    experiment_id_or_name: str | None = None,
    *,
    run_id: str | None = None,
    name: str = "claim_alignment",
    judge_source_id: str | None = None,
    max_traces: int | None = None,
    log: bool = True,
) -> AgreementReport:
    """How well the judge's feedback ``name`` (for ``claim_alignment``: yes = every claim supported) agrees with the
    feedback people left under the same name on the traces of an experiment (id or name; default ``$MLFLOW_EXPERIMENT_NAME``) or of one run (``run_id``, e.g. an
    evaluation run). ``judge_source_id`` keeps one judge's feedback (its source id, e.g. the model) when several
    judged. With ``log=True`` the report is logged as a run in the source experiment. Rules: the module doc.

        report = judge_agreement(run_id=run.info.run_id)
        print(report.metrics["balanced_accuracy"], report.counts)
    """
    client = MlflowClient()
    experiment_id, source_run_id = _source(client, experiment_id_or_name, run_id)
    traces = mlflow.search_traces(
        locations=[experiment_id], run_id=source_run_id, max_results=max_traces, return_type="list", include_spans=False, flush=True
    )
    sorted_traces = [trace_verdicts(t.info.trace_id, t.info.assessments or [], name, judge_source_id, application_card=application_card)
                     for t in traces]
    pairs = [t for t in sorted_traces if t.outcome == "pairs_used"]
    matrix = [[0, 0], [0, 0]]
    for pair in pairs:
        matrix[int(pair.human)][int(pair.judge)] += 1
    metrics = binary_agreement_metrics(matrix)
    outcomes = Counter(t.outcome for t in sorted_traces)
    counts = {"traces_seen": len(sorted_traces), **{o: outcomes[o] for o in OUTCOMES}}
    counts["people"] = len({p for t in sorted_traces for p in t.people})
    counts["votes_not_verdicts"] = sum(v is None for t in sorted_traces for v in t.people.values())
    counts["other_sources"] = sum(bool(t.other_sources) for t in sorted_traces)
    judges = sorted({t.judge_source for t in pairs if t.judge_source is not None})
    counts["judges"] = len(judges)
    table = pd.DataFrame(
        [{"trace_id": t.trace_id, "judge": t.judge, "human": t.human, "people": json.dumps(t.people), "outcome": t.outcome,
          "judge_source": t.judge_source} for t in sorted_traces],
        columns=["trace_id", "judge", "human", "people", "outcome", "judge_source"],
    )
    confusion = confusion_frame(matrix, people=("no", "yes"), judge=("no", "yes"))
    notes = _notes(name, counts, judges, sorted({s for t in sorted_traces for s in t.other_sources}), judge_source_id)
    report = AgreementReport(name, experiment_id, source_run_id, judge_source_id, metrics, counts, confusion, table, notes=notes)
    if log:
        log_agreement(report)
    return report


def _notes(name: str, counts: dict[str, int], judges: list[str], others: list[str], judge_source_id: str | None) -> tuple[str, ...]:
    """Sentences for what the figures leave out or mix (nothing when there is nothing to say)."""
    notes = []
    if counts["application_error"]:
        notes.append(f"{counts['application_error']} labelled traces whose application failed (APPLICATION_ERROR cards: nothing was "
                     "judged) are left out of the figures: not the judge's errors")
    if counts["votes_not_verdicts"]:
        notes.append(f"{counts['votes_not_verdicts']} of people's values under {name!r} are not yes/no: never guessed, no vote")
    if counts["other_sources"]:
        notes.append(f"{counts['other_sources']} traces carry feedback under {name!r} from neither a judge nor a person "
                     f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): not used; a person's label needs "
                     "source=AssessmentSource(source_type='HUMAN', source_id=...) (mlflow.log_feedback's default is CODE)")
    if len(judges) > 1 and judge_source_id is None:
        notes.append(f"the pairs mix the verdicts of {len(judges)} judges ({', '.join(judges[:3])}{', ...' if len(judges) > 3 else ''}): "
                     "the figures describe no one judge; name one with judge_source_id= (mgm agreement --judge-source)")
    return tuple(notes)


def log_agreement(report: AgreementReport) -> str:
    """Log ``report`` as a finished run of ``<source experiment>/agreement`` (``side_experiment``: metrics, counts,
    tables, tags naming the source); sets and returns ``report.run_id``."""
    tags = {"mgm.agreement.feedback_name": report.name, "mgm.agreement.source_experiment": report.experiment_id}
    if report.source_run_id:
        tags["mgm.agreement.source_run"] = report.source_run_id
    if report.judge_source_id:
        tags["mgm.agreement.judge_source"] = report.judge_source_id
    if report.notes:
        tags["mgm.agreement.notes"] = tag_value("; ".join(report.notes))
    report.run_id = log_report_run(
        side_experiment(report.experiment_id, "agreement"), f"agreement {report.name}", {**report.metrics, **report.counts},
        params={"mgm.agreement.combine": COMBINE_RULE}, tags=tags,
        tables={CONFUSION_TABLE: _labelled(report.confusion), TRACES_TABLE: report.traces},
    )
    return report.run_id


def _labelled(confusion: pd.DataFrame) -> pd.DataFrame:
    """A confusion matrix as a table: its row labels become the first column (a logged table has no index)."""
    return confusion.rename_axis("people").reset_index()


def log_report_run(
    experiment_id: str,
    run_name: str,
    metrics: dict[str, float],
    *,
    params: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    tables: dict[str, pd.DataFrame] | None = None,
) -> str:
    """A finished run holding a report: its metrics (NaN left out), params, tags and tables; failed if logging fails."""
    client = MlflowClient()
    run_id = client.create_run(experiment_id, run_name=run_name).info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, now, 0) for k, v in loggable_metrics(metrics).items()],
            params=[Param(k, str(v)) for k, v in (params or {}).items() if v is not None],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )
        for artifact_file, table in (tables or {}).items():
            mlflow.log_table(table, artifact_file, run_id=run_id)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id)
    return run_id


def side_experiment(source_experiment_id: str, kind: str) -> str:
    """The experiment beside ``source_experiment_id`` that holds its ``kind`` runs (agreement, align, comparisons),
    ``<source name>/<kind>``, made when missing with its artifacts beside the source's: the source's Evaluation runs
    page then lists the candidates alone, their headline figures first."""
    client = MlflowClient()
    source = client.get_experiment(source_experiment_id)
    name = f"{source.name}/{kind}"
    found = client.get_experiment_by_name(name)
    if found is not None and found.lifecycle_stage != "deleted":
        return found.experiment_id
    if found is not None:
        raise ValueError(f"experiment {name!r} (where {kind} runs of {source.name!r} go) is deleted: restore it")
    location = f"{source.artifact_location.rstrip('/')}/{kind}" if source.artifact_location else None
    return client.create_experiment(name, artifact_location=location, tags={"mgm.source_experiment": source_experiment_id})


def report_experiment(name: str) -> str:
    """The id of experiment ``name``, created when missing (so a bad store fails before any work)."""
    client = MlflowClient()
    found = client.get_experiment_by_name(name)
    if found is not None and found.lifecycle_stage == "deleted":
        raise ValueError(f"experiment {name!r} is deleted: restore it or name another")
    return found.experiment_id if found is not None else client.create_experiment(name)


def log_meta_report(
    metrics: dict[str, float],
    confusion: pd.DataFrame,
    *,
    experiment_id: str,
    signature: str,
    params: dict[str, Any],
    groups: pd.DataFrame | None = None,
    reliability: pd.DataFrame | None = None,
) -> str:
    """An ``mgm meta-eval`` report as a run of ``experiment_id``: the figures as metrics, the confusion matrix (and
    the per-group figures, and the grounding check's reliability table) as tables, the data file and settings as
    params, the signature tag."""
    tables = {f"{ARTIFACT_DIR}/meta_confusion.json": _labelled(confusion)}
    if groups is not None and not groups.empty:
        tables[f"{ARTIFACT_DIR}/meta_groups.json"] = groups
    if reliability is not None:
        tables[f"{ARTIFACT_DIR}/meta_reliability.json"] = reliability
    return log_report_run(
        experiment_id, f"meta-eval {params.get('mgm.meta.data', '')}".strip(), metrics, params=params, tags={SIGNATURE_TAG: signature}, tables=tables
    )
