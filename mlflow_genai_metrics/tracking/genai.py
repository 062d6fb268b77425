"""Rows in MLflow's terms: where the texts are in a row (``parse_row``), the judge's preflight, and ``Pipeline``,
the judgements of one evaluation that ``evaluate_summaries``, ``log_results`` and ``score_traces`` judge
in one batch before MLflow reads them.

A ``Pipeline`` lives as long as the call that made it: nothing here is kept for the process, so a ``Judge`` passed
in is the judge used and no judgement reaches another evaluation. (The scorers' own rows are in ``scored_rows``.)

The judge's own chat calls are made with MLflow tracing off for them (``mlflow.tracing.context(enabled=False)``,
carried into the judge's event loop with the call's context), so they are never traces of the evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow

from ..judge import Judge, JudgeConfigError, Preflight
from ..rewrites.api import check_instructions, rewrite_result
from ..stats import StatisticsOptions
from ..summarization.api import build_result
from ..summarization.ids import canonical_id
from ..summarization.judging import judge_rows, prepare_rows, source_key
from ..summarization.options import JudgingOptions
from ..summarization.records import RowInput, RowJudgement
from ..summarization.result import SummarizationResult

log = logging.getLogger(__name__)

# Where a reference summary sits in MLflow's ``expectations``: MLflow's own key first (its Correctness and
# Equivalence judges read ``expected_response``), then ours.
REFERENCE_KEYS = ("expected_response", "expected_summary")


@dataclass(frozen=True)
class InputKeys:
    """Where the source, the row id and the category are in a row's ``inputs`` (a dict), and the summary in
    ``outputs``; for rewrites also the instruction (``instruction``: a key of ``inputs``; None for summaries)."""

    source: str = "text"
    id: str = "id"
    category: str = "category"
    instruction: str | None = None


@dataclass(frozen=True)
class ParsedRow:
    """One row as a judge sees it: the validated texts, its category and reference (if any), the trace it is on,
    and whether its id was given (else it is its source's hash)."""

    row: RowInput
    category: Any = None
    reference: str | None = None
    trace_id: str | None = None
    id_given: bool = True
    instruction: str | None = None  # a rewrite's instruction (``InputKeys.instruction``)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))  # MLflow turns None into NaN


def parse_row(inputs: Any, outputs: Any, expectations: Any = None, *, keys: InputKeys = InputKeys(), trace_id: str | None = None) -> ParsedRow:
    """The row in MLflow's terms: the source is ``inputs`` (a string) or ``inputs[keys.source]``, the summary is
    ``outputs`` (or ``outputs["summary"]``; a missing one is an empty summary), the id ``inputs[keys.id]`` (else a
    hash of the source, so one article pairs up across runs), the reference ``expectations["expected_response"]``
    (or ``["expected_summary"]``). Raises ``ValueError`` naming what is wrong."""
    if isinstance(inputs, str):
        source, row_id, category = inputs, None, None
    elif isinstance(inputs, dict) and isinstance(inputs.get(keys.source), str):
        source, row_id, category = inputs[keys.source], inputs.get(keys.id), inputs.get(keys.category)
    else:
        found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"the source text must be `inputs` (a string) or `inputs[{keys.source!r}]`; got {found}")
    summary = outputs.get("summary") if isinstance(outputs, dict) else outputs
    if not _missing(summary) and not isinstance(summary, str):
        raise ValueError(f"`outputs` must be the summary text (or {{'summary': text}}); got {type(outputs).__name__}")
    reference = None
    if isinstance(expectations, dict):
        reference = next((expectations[k] for k in REFERENCE_KEYS if isinstance(expectations.get(k), str)), None)
    instruction = None
    if keys.instruction is not None:
        instruction = inputs.get(keys.instruction) if isinstance(inputs, dict) else None
        if not isinstance(instruction, str) or not instruction.strip():
            found = "missing" if _missing(instruction) else "empty" if isinstance(instruction, str) else type(instruction).__name__
            raise ValueError(f"a rewrite's instruction must be text in `inputs[{keys.instruction!r}]`; it is {found}")
    id_given = not _missing(row_id)
    row = prepare_rows([source], ["" if _missing(summary) else summary], [row_id if id_given else source_key(source)])[0]
    return ParsedRow(row=row, category=None if _missing(category) else category, reference=reference, trace_id=trace_id, id_given=id_given,
                     instruction=instruction)


class Pipeline:
    """One judgement per row for one judge and one set of options, for one evaluation (``evaluate_summaries``,
    ``log_results``, ``score_traces``): made by the call that uses it and gone with it, so no judge or
    judgement of it reaches another evaluation. A row is known by its texts (its source and summary; a rewrite's
    instruction too), so MLflow's copies of one row, handed to each scorer, are judged once. With
    ``keys.instruction`` the rows are rewrites: each is also asked whether it follows its instruction, and the
    result is ``rewrites``' (``instruction_following``, the rows keyed by input and instruction)."""

    def __init__(self, judge: Judge | None, *, options: JudgingOptions, statistics: StatisticsOptions = StatisticsOptions(),
                 keys: InputKeys = InputKeys()):
        self.judge, self.statistics, self.keys = judge, statistics, keys
        self.options = options.for_judge(judge)
        self.preflight = Preflight(judge)
        self._judged: dict[tuple[str, str], RowJudgement] = {}
        self._lock = threading.Lock()
        self._source_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedRow:
        return parse_row(inputs, outputs, expectations, keys=self.keys, trace_id=trace_id_of(trace))

    def check(self) -> None:
        """The preflight, once: a configuration error is raised now and for every later row, with no further call."""
        self.preflight.check()

    def judgement(self, parsed: ParsedRow) -> RowJudgement:
        """The row's judgement, from any thread: rows of one source are judged one at a time, so its key points are
        asked once and then come from the judge's cache."""
        self.check()
        try:
            with self._source_locks[parsed.row.source_key]:
                return self._judgements([parsed])[0]
        except JudgeConfigError as error:
            self.preflight.failed(error)
            raise

    def judge_all(self, rows: Sequence[ParsedRow]) -> list[RowJudgement]:
        """Judge many rows in one batch (the judge's concurrency, one pass per round), before any is read."""
        self.check()
        return self._judgements(rows)

    def result(self, rows: Sequence[ParsedRow]) -> SummarizationResult:
        """The result of these rows (judging any not judged yet)."""
        ordered, references, extra = result_inputs(rows)
        inputs, judgements = [p.row for p in ordered], self._judgements(ordered)
        common = {"judge": self.judge, "options": self.options, "statistics": self.statistics, "references": references, "extra_columns": extra}
        if self.keys.instruction is not None:
            return rewrite_result(inputs, judgements, [p.instruction or "" for p in ordered], **common)
        return build_result(inputs, judgements, **common)

    def _judgements(self, rows: Sequence[ParsedRow]) -> list[RowJudgement]:
        """Each row's judgement under its own id, judging (in one batch) only the rows not judged before."""
        with self._lock:
            missing = {key: parsed for parsed in rows if (key := _texts(parsed)) not in self._judged}
        if missing:
            asked = [parsed.row for parsed in missing.values()]
            with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
                judged = judge_rows(asked, self.judge, self.options, progress=False)
                if self.keys.instruction is not None:
                    judged = check_instructions(self.judge, asked, [p.instruction or "" for p in missing.values()], judged)
            with self._lock:
                for key, judgement in zip(missing, judged):
                    self._judged.setdefault(key, judgement)
        with self._lock:
            return [self._judged[_texts(parsed)].model_copy(update={"id": parsed.row.id}) for parsed in rows]


def _texts(parsed: ParsedRow) -> tuple[str, str, str | None]:
    return parsed.row.source_key, hashlib.sha256(parsed.row.summary.encode("utf-8")).hexdigest(), parsed.instruction


def trace_id_of(trace: Any) -> str | None:
    """The id of the trace MLflow handed a scorer (None when it handed none: the store did not write it)."""
    return getattr(getattr(trace, "info", None), "trace_id", None)


def repeated_ids(rows: Sequence[ParsedRow], *, id_key: str = "id") -> list[str]:
    """Each row whose id another row has already, in ``prepare_rows``' words (nothing: every id is unique). A row is
    named by its trace, else by its position. A row without an id is known by its source's hash (so an article pairs
    up across runs), so two rows of one article need ids."""
    problems, seen = [], {}
    for position, parsed in enumerate(rows):
        label = f"the row of trace {parsed.trace_id}" if parsed.trace_id else f"row {position}"
        stored = canonical_id(parsed.row.id)
        if stored not in seen:
            seen[stored] = (label, parsed)
            continue
        first_label, first = seen[stored]
        if parsed.id_given or first.id_given:
            problems.append(f"{label} (id {parsed.row.id!r}): the id repeats {first_label} (id {first.row.id!r}); both are stored as {stored!r}; ids must be unique")
        else:
            problems.append(f"{label} (no id): its source is that of {first_label} (no id), and a row without an id is known by its "
                            f"source's hash ({stored!r}); ids must be unique: give each row an id (inputs[{id_key!r}])")
    return problems


def unique_ids(rows: Sequence[ParsedRow], *, id_key: str = "id") -> None:
    """Refuse rows whose ids repeat (``ValueError`` naming each, as ``prepare_rows`` does): one row's figures would
    count twice, and runs pair up by id."""
    problems = repeated_ids(rows, id_key=id_key)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError(f"cannot judge these rows:\n  {shown}{more}")


def result_inputs(rows: Sequence[ParsedRow]) -> tuple[list[ParsedRow], list[str] | None, dict[str, list[Any]] | None]:
    """The rows of a run in a stable order, with their references and categories, as ``build_result`` takes them.
    Rows whose ids repeat are refused (``unique_ids``), never renamed."""
    ordered = sorted(rows, key=lambda p: (canonical_id(p.row.id), p.row.summary))
    unique_ids(ordered)
    categories = [p.category for p in ordered]
    extra = {"category": categories} if any(c is not None for c in categories) else None
    references = [p.reference for p in ordered]
    if any(r is None for r in references):
        if any(r is not None for r in references):
            log.warning("only %d of %d rows have a reference summary: ROUGE, BLEU and chrF are left out", sum(r is not None for r in references), len(ordered))
        references = None
    return ordered, references, extra


def root_span(trace: Any) -> Any:
    """A trace's root span (None when it has none)."""
    return next((span for span in trace.data.spans if span.parent_id is None), None)


def trace_rows(traces: Sequence[Any], pipeline: Any) -> tuple[list[Any], list[str]]:
    """Each trace as a row (its root span's inputs and outputs, its expectations, read by ``pipeline.parse``: a
    ``Pipeline``'s summary rows, or ``answer_rows.AnswerRows``' answer rows), and the ids of the traces that are not one."""
    rows, unusable = [], []
    for trace in traces:
        root = root_span(trace)
        expectations = {a.name: a.value for a in trace.info.assessments if getattr(a, "expectation", None) is not None}
        try:
            if root is None:
                raise ValueError("no root span")
            rows.append(pipeline.parse(root.inputs, root.outputs, expectations, trace))
        except ValueError:
            unusable.append(trace.info.trace_id)
    return rows, unusable


def evaluated_row_count(run_id: str) -> int | None:
    """The rows ``mlflow.genai.evaluate`` evaluated in ``run_id``: the ``num_rows`` of the dataset it logged as the
    run's input (None when it logged none, or several)."""
    inputs = mlflow.get_run(run_id).inputs
    datasets = inputs.dataset_inputs if inputs is not None else []
    if len(datasets) != 1:
        return None
    try:
        return int(json.loads(datasets[0].dataset.profile or "{}")["num_rows"])
    except (ValueError, KeyError, TypeError):
        return None
