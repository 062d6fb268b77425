"""People's corrections, read back from an experiment's traces, made into the judge's few-shot examples (``mgm align``).

    from mlflow_genai_metrics.tracking import align_judge
    report = align_judge("my-app", judge=judge, output="examples.json")
    report.before["balanced_accuracy"], report.after["balanced_accuracy"]   # on feedback the examples did not use
    evaluate(data, summarization_scorers(judge, examples="examples.json"))  # or: mgm evaluate --examples examples.json

The traces are those ``judge_agreement`` reads: each trace whose people's verdict under ``name`` (default
``claim_alignment``: yes = every statement of the summary supported) is decided (their majority; a tie or no verdict
is left out) is a labelled row, its source and summary what the trace's root span was given and gave back (the
source is ``inputs`` when a string, else ``inputs[source_key]``). An exact count of them (``floor(held_out * n)``, drawn
by ``seed`` from the sorted trace ids) is held back; the rest become the examples, each with the reason of the latest
person who gave the majority's verdict. The held-back rows are then judged twice with ``judge``: without examples
and with them; the people's agreement with each (balanced accuracy, Cohen's kappa, with intervals) is the report.
Judging rows never shows an example drawn from them (``ExampleSet.without``), and the examples prompt and the set's
hash are in the signature of every run judged with them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from ..judge import CorrectedVerdict, ExampleSet, Judge
from ..meta_evaluation import binary_agreement_metrics
from ..signature import summarization_signature
from ..summarization import judge_summaries
from ..summarization.method import Method
from ..summarization.verdicts import HUMAN_SOURCE, latest_feedback, normalise_verdict, trace_verdicts
from .agreement import _source, log_report_run, side_experiment
from .pipeline import root_span


@dataclass(frozen=True)
class LabelledTrace:
    trace_id: str
    source: str
    summary: str
    human: bool
    rationale: str


@dataclass
class AlignmentReport:
    """``examples``: the set written to ``output``; ``before``/``after``: agreement on the held-back rows without and
    with it (``balanced_accuracy``, ``cohen_kappa`` and their ``_ci_low``/``_ci_high``/``_n``); ``counts``: labelled
    traces, examples, held back, and rows the judge failed on (left out of both figures); ``signature``: that of runs
    judged with the examples."""

    examples: ExampleSet
    output: Path
    before: dict[str, float]
    after: dict[str, float]
    counts: dict[str, int]
    signature: str
    held_out_traces: list[str]
    run_id: str | None = None


def labelled_traces(experiment_id: str, run_id: str | None, name: str, source_key: str = "text") -> list[LabelledTrace]:
    """Each trace of the experiment (or run) whose people's verdict under ``name`` is decided, with its texts."""
    return _labelled_traces(experiment_id, run_id, name, source_key)[0]


def _labelled_traces(experiment_id: str, run_id: str | None, name: str, source_key: str) -> tuple[list[LabelledTrace], int]:
    """``labelled_traces``, and how many traces with a decided people's verdict have no source and summary to show
    (the application failed on them, or they are not a summary of a source): counted, never an example."""
    skipped = 0
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list", include_spans=True, flush=True)
    found = []
    for trace in traces:
        verdicts = trace_verdicts(trace.info.trace_id, trace.info.assessments or [], name)
        if verdicts.human is None:
            continue
        root = root_span(trace)
        inputs, outputs = (root.inputs, root.outputs) if root is not None else (None, None)
        source = inputs if isinstance(inputs, str) else inputs.get(source_key) if isinstance(inputs, dict) else None
        if not isinstance(source, str) or not source.strip() or not isinstance(outputs, str) or not outputs.strip():
            skipped += 1
            continue  # not a summary of a source: nothing to show as an example
        found.append(LabelledTrace(trace.info.trace_id, source, outputs, verdicts.human, _reason(trace.info.assessments, name, verdicts.human)))
    return sorted(found, key=lambda t: t.trace_id), skipped


def _reason(assessments: list, name: str, verdict: bool) -> str:
    """The rationale of the latest person's feedback that gave ``verdict``."""
    agreeing = [a for a in assessments if getattr(a, "feedback", None) is not None and a.name == name and a.valid is not False
                and a.source.source_type == HUMAN_SOURCE and a.error is None and normalise_verdict(a.value) is verdict]
    return (latest_feedback(agreeing).rationale or "") if agreeing else ""


def held_back(trace_ids: Sequence[str], share: float, seed: int) -> set[str]:
    """The held-back traces: exactly ``floor(share * n)`` of the ``n`` ids (at least 1, at most n - 1, so both sides
    have one when n >= 2), drawn by ``seed`` from the ids in sorted order. The same ids and seed give the same split
    in every run, whatever order the ids arrive in; a count, not a per-id coin, so 12 traces at 0.3 always hold back
    3 (a coin per id left nothing held back about 3% of the time)."""
    ordered = sorted(set(trace_ids))
    # floor of the share as written: 0.29 * 100 is 28.999999999999996 in floating point, and held back 28
    count = min(max(math.floor(Fraction(repr(share)) * len(ordered)), 1), len(ordered) - 1)
    return set(random.Random(seed).sample(ordered, count)) if count > 0 else set()


def align_judge(
    experiment_id_or_name: str | None = None,
    *,
    judge: Judge,
    output: str | Path,
    run_id: str | None = None,
    name: str = "claim_alignment",
    source_key: str = "text",
    held_out: float = 0.3,
    seed: int = 0,
    per_request: int = 3,
    log: bool = True,
) -> AlignmentReport:
    """Build the examples from people's feedback on an experiment's (or one run's) traces, write them to ``output``,
    and measure the judge's agreement with people on the held-back feedback without and with them (module doc)."""
    if not isinstance(judge, Judge):
        raise TypeError(f"judge must be a mlflow_genai_metrics.Judge, not {type(judge).__name__}")
    if not 0 < held_out < 1:
        raise ValueError(f"held_out={held_out}: the share of labelled traces held back must be between 0 and 1")
    experiment_id, source_run_id = _source(MlflowClient(), experiment_id_or_name, run_id)
    labelled, without_texts = _labelled_traces(experiment_id, source_run_id, name, source_key)
    held = held_back([t.trace_id for t in labelled], held_out, seed)
    test = [t for t in labelled if t.trace_id in held]
    train = [t for t in labelled if t.trace_id not in held]
    if not train or not test:
        raise ValueError(
            f"{len(labelled)} traces carry a decided people's verdict under {name!r} and a source and summary: too few to build examples "
            f"from some and measure on the others (held back {len(test)}, left {len(train)}); label more traces"
            + (f" ({without_texts} labelled traces have no source and summary: the application failed on them, or they are not a "
               f"summary of a {source_key!r} input)" if without_texts else "")
        )
    examples = ExampleSet(
        examples=tuple(CorrectedVerdict(source=t.source, statement=t.summary, verdict="yes" if t.human else "no", rationale=t.rationale,
                                        origin=t.trace_id) for t in train),
        per_request=per_request,
    )
    written = examples.write(output)
    before, failed_before = _agreement(judge, test)
    after, failed_after = _agreement(judge, test, examples)
    counts = {"labelled_traces": len(labelled), "labelled_without_texts": without_texts, "examples": len(train), "held_out": len(test),
              "judge_failed_before": failed_before, "judge_failed_after": failed_after}
    signature = summarization_signature(judge, coverage=False, method=Method(examples=examples))
    report = AlignmentReport(examples, written, before, after, counts, signature, [t.trace_id for t in test])
    if log:
        metrics = {**{f"before/{k}": v for k, v in before.items()}, **{f"after/{k}": v for k, v in after.items()}, **counts}
        report.run_id = log_report_run(
            side_experiment(experiment_id, "align"), f"align {name}", metrics,
            params={"mgm.align.feedback_name": name, "mgm.align.examples": examples.tag, "mgm.align.held_out": held_out,
                    "mgm.align.seed": seed, "mgm.align.per_request": per_request, "mgm.align.output": str(written)},
            tags={"mgm.align.source_experiment": experiment_id, **({"mgm.align.source_run": source_run_id} if source_run_id else {})},
            tables={"mgm/align_held_out.json": pd.DataFrame({"trace_id": report.held_out_traces})},
        )
    return report


def _agreement(judge: Judge, rows: list[LabelledTrace], examples: ExampleSet | None = None) -> tuple[dict[str, float], int]:
    """People's agreement with ``judge``'s ``strictly_aligned`` on ``rows`` (those it judged, shown ``examples``), and
    how many failed."""
    result = judge_summaries([r.source for r in rows], [r.summary for r in rows], judge=judge, ids=[r.trace_id for r in rows],
                             coverage=False, grounding=False, progress=False, examples=examples)
    judged = result.rows.set_index("id")
    matrix = [[0, 0], [0, 0]]
    failed = 0
    for row in rows:
        verdict: Any = judged.loc[row.trace_id, "strictly_aligned"]
        if judged.loc[row.trace_id, "error"] or pd.isna(verdict):
            failed += 1
            continue
        matrix[int(row.human)][int(bool(verdict))] += 1
    return binary_agreement_metrics(matrix), failed
