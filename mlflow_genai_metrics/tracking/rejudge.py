"""The champion's rows judged again at gate time, with the candidate's judge: a hosted judge that drifted under an
unchanged name and signature is then the same judge on both sides of a decision.

A run keeps no copy of its texts, so the gate is given the champion's outputs (``champion_data``: the table its
evaluation read, columns ``id``, ``text``, ``summary``, and ``reference`` when the candidate was scored against
references) and the candidate's ``Judge``. They are judged under the candidate's options (read from its signature:
coverage, chunking, grounding, references, statistics), logged as a run of their own in the candidate's experiment
(``<model> v<version> judged again``, tagged ``mgm.gate.rejudge_of``), and that run is the champion's side of the
comparison. What the cache holds is answered from it, so an unchanged judge costs no call; a row asked again that
answers otherwise is drift, counted on the candidate's run (``mgm.gate.champion_drift``).

The table must be the champion's: its ids, sources and summaries are those of the champion's run (``source_key``,
``output_key``: fingerprints of the texts; a run logged before summaries had one is checked on what it holds, its
word counts and grounding scores), row by row; otherwise the gate refuses, naming the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from ..judge import ExampleSet, Judge
from ..signature import Signature, task_of
from ..stats import StatisticsOptions
from ..summarization.api import judge_summaries
from ..summarization.ids import canonical_id
from ..summarization.method import Method
from ..summarization.options import JudgingOptions
from ..tables import read_table
from .compare import EvaluatedRun, load_run
from .run_logging import log_result

REJUDGE_TAG = "mgm.gate.rejudge_of"  # on the run of the champion's rows judged again: the champion's own run
_COLUMNS = ("id", "text", "summary")
# Row values the judge gives: a row whose values differ between the champion's run and today's judgement was judged
# differently (the judge drifted, or its answers vary).
_JUDGED = ("claim_count", "supported_claims", "contradicted_claims", "strictly_aligned", "covered_key_points")


class ChampionDataError(ValueError):
    """The table given as the champion's outputs is not what the champion's run judged."""


@dataclass(frozen=True)
class Rejudged:
    """The champion's rows judged again: the run, and what the gate says about it."""

    run: EvaluatedRun
    rows: int
    drifted: int  # rows judged on both occasions whose judge values differ
    compared: int  # rows judged without an error on both occasions
    calls: int  # requests the judge sent (the rest came from its cache)

    @property
    def note(self) -> str:
        return (f"{self.rows} rows of the champion judged again with the candidate's judge (run {self.run.run_id}, "
                f"{self.calls} requests sent, the rest from the cache); {self.drifted} of {self.compared} judged otherwise "
                "than in the champion's own run")


def check_rejudgeable(signature: str, run_id: str) -> None:
    """``ValueError`` unless the candidate's run (``signature``) judged summaries: the champion's rows are judged again
    as summaries (id, text, summary), so a rewrites or answers candidate's signature could never match them."""
    task = task_of(Signature.parse(signature)) if signature else None
    if task not in (None, "summaries"):
        raise ValueError(f"champion_data cannot be judged again for run {run_id}: it judged {task}, and the champion's rows "
                         f"are judged again only as summaries (id, text, summary), never as {task}, so the signatures could "
                         "never match: gate it without champion_data (--champion-data), against the champion's own run, or "
                         "evaluate the champion's outputs again with the candidate's judge into a run and register that one")


def rejudge_champion(champion: EvaluatedRun, data: pd.DataFrame | str | Path, judge: Judge, candidate: Run,
                     signature: str, label: str, client: MlflowClient, examples: ExampleSet | None = None) -> Rejudged:
    """Judge ``data`` (the champion's outputs) with ``judge`` under the options of the candidate's ``signature`` (its
    stability; ``examples``: those it was judged with, which the signature names by their tag), log it beside the
    ``candidate`` run as ``label``, and check it is the champion's run's rows (``ChampionDataError``)."""
    if not isinstance(judge, Judge):
        raise TypeError(f"judging the champion again needs the candidate's mlflow_genai_metrics.Judge, not {type(judge).__name__}")
    table = read_table(data, text_columns=(*_COLUMNS, "reference")) if isinstance(data, (str, Path)) else data
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"champion_data must be a DataFrame or a table's path, not {type(table).__name__}")
    parsed = Signature.parse(signature)
    references = parsed.reference is not None
    missing = [c for c in (*_COLUMNS, *(["reference"] if references else [])) if c not in table.columns]
    if missing:
        raise ChampionDataError(f"champion_data has no column {missing} (it has {list(table.columns)}): give the table the "
                                "champion's evaluation read: id, text, summary" + (", reference" if references else ""))
    options, statistics = _options(parsed, examples)
    result = judge_summaries(table["text"].tolist(), table["summary"].tolist(), judge=judge, ids=table["id"].tolist(),
                             references=table["reference"].tolist() if references else None, options=options,
                             statistics=statistics, progress=False)
    _check_same_rows(champion, result.rows)
    experiment = candidate.info.experiment_id
    with mlflow.start_run(experiment_id=experiment, run_name=label, nested=mlflow.active_run() is not None) as run:
        mlflow.set_tags({REJUDGE_TAG: champion.run_id, "mgm.gate.candidate_run": candidate.info.run_id})
        log_result(result, run_id=run.info.run_id, log_metrics=True)
    drifted, compared = _drift(champion.rows, result.rows)
    return Rejudged(load_run(run.info.run_id, client), len(result.rows), drifted, compared, int(result.usage.calls))


def _options(signature: Signature, examples: ExampleSet | None = None) -> tuple[JudgingOptions, StatisticsOptions]:
    """The judging and statistics options a signature records, with ``examples`` when it names them (refused when
    they are not the ones it names: their tag is signed, not their content)."""
    judge = signature.judge
    signed, given = judge.examples if judge else None, examples.tag if examples is not None else None
    if signed != given:
        raise ValueError(f"the candidate was judged with {f'the examples {signed}' if signed else 'no examples'}, and "
                         f"{f'the examples {given}' if given else 'none'} were given to judge the champion again with: give the "
                         "candidate's own (examples=, --examples FILE)")
    method = Method(stability=judge.stability or 1 if judge else 1, examples=examples)
    options = JudgingOptions(
        coverage=judge is not None and "keypoints" in judge.prompts, grounding=signature.grounding is not None,
        ter=bool(signature.reference and "ter" in signature.reference), max_source_tokens=judge.chunk if judge else None,
        method=method,
    )
    defaults = StatisticsOptions()
    statistics = StatisticsOptions(
        resamples=signature.resamples or defaults.resamples, confidence=signature.confidence or defaults.confidence,
        seed=defaults.seed if signature.bootstrap_seed is None else signature.bootstrap_seed,
    )
    return options, statistics


def _check_same_rows(champion: EvaluatedRun, rows: pd.DataFrame) -> None:
    """Refuse a table that is not the champion's: other ids or sources, or other summaries (their fingerprint, or
    where the run has none, their lengths or grounding), and one whose summaries the run gives no way to check:
    outputs put in the champion's place could otherwise decide the gate."""
    theirs = champion.rows.assign(id=champion.rows["id"].map(canonical_id)).set_index("id")
    ours = rows.assign(id=rows["id"].map(canonical_id)).set_index("id")
    problems, checked = [], set()
    if set(theirs.index) != set(ours.index):
        lacking, extra = sorted(set(theirs.index) - set(ours.index)), sorted(set(ours.index) - set(theirs.index))
        problems.append(f"ids differ from the champion's run ({len(lacking)} of its ids missing, e.g. {lacking[:3]}; "
                        f"{len(extra)} ids it does not have, e.g. {extra[:3]})")
    shared = sorted(set(theirs.index) & set(ours.index))
    for column, what in (("source_key", "sources"), ("output_key", "summaries"), ("summary_words", "summaries' word counts"),
                         ("grounding", "summaries' grounding scores")):
        if column not in theirs or column not in ours:
            continue
        checked.add(column)
        differ = [i for i in shared if not _same(theirs.at[i, column], ours.at[i, column])]
        if differ:
            problems.append(f"{what} differ on {len(differ)} rows (e.g. ids {differ[:3]})")
    if problems:
        raise ChampionDataError(f"champion_data is not the outputs the champion's run {champion.run_id} judged: "
                                + "; ".join(problems))
    if not checked & {"output_key", "summary_words", "grounding"}:
        raise ChampionDataError(f"the champion's run {champion.run_id} keeps no fingerprint of its summaries (it was logged "
                                "before output_key), so champion_data cannot be checked to be its outputs: evaluate the "
                                "champion's outputs again into a new run with the candidate's judge and gate against it")


def _same(a: Any, b: Any) -> bool:
    """Equal, with a missing value on either side (a row the check could not read) taken as no evidence."""
    if _missing(a) or _missing(b):
        return True
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _drift(before: pd.DataFrame, today: pd.DataFrame) -> tuple[int, int]:
    """Rows judged without an error both times whose judge values differ, and how many were compared."""
    columns = [c for c in _JUDGED if c in before and c in today]
    if not columns:
        return 0, 0

    def judged(rows: pd.DataFrame) -> pd.DataFrame:
        ok = rows["error"].fillna("").eq("") if "error" in rows else pd.Series(True, index=rows.index)
        return rows[ok].assign(id=rows["id"].map(canonical_id)).set_index("id")[columns]

    a, b = judged(before), judged(today)
    shared = a.index.intersection(b.index)
    differ = sum(any(not _same(a.at[i, c], b.at[i, c]) for c in columns) for i in shared)
    return int(differ), len(shared)
