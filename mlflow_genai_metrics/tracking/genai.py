"""Summaries (and rewrites) in MLflow's terms: where the texts are in a row (``parse_row``), their
``TaskPipeline`` (``Pipeline``: the judgements of one evaluation, or of one plain scorer's row), and reading an
evaluation's traces back as rows (``trace_rows``, ``evaluated_row_count``).

A ``Pipeline`` lives as long as the call that made it: nothing here is kept for the process, so a ``Judge`` passed
in is the judge used and no judgement reaches another evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from pandas.api.types import is_scalar

from ..judge import Judge, Preflight
from ..rewrites.api import check_instructions, judge_with_instructions, rewrite_result
from ..stats import StatisticsOptions
from ..summarization.api import build_result
from ..summarization.ids import canonical_id
from ..summarization.judging import judge_rows, one_row, prepare_rows, source_key, unencodable
from ..summarization.options import JudgingOptions
from ..summarization.records import RowInput, RowJudgement
from ..summarization.result import SummarizationResult
from .pipeline import TaskPipeline, input_text, missing, output_text, refuse_repeated, repeated_ids, root_span

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
    category: str | None = None
    reference: str | None = None
    trace_id: str | None = None
    id_given: bool = True
    instruction: str | None = None  # a rewrite's instruction (``InputKeys.instruction``)
    failure: str | None = None  # what the application raised on this row (``TaskPipeline.read``): not judged


def parse_row(inputs: Any, outputs: Any, expectations: Any = None, *, keys: InputKeys = InputKeys(), trace_id: str | None = None) -> ParsedRow:
    """The row in MLflow's terms: the source is ``inputs`` (a string) or ``inputs[keys.source]``, the summary is
    ``outputs`` (or ``outputs["summary"]``; a missing one is an empty summary), the id ``inputs[keys.id]`` (else a
    hash of the source, so one article pairs up across runs), the category ``inputs[keys.category]`` (``category_text``),
    the reference ``expectations["expected_response"]`` (or ``["expected_summary"]``). Raises ``ValueError`` naming
    what is wrong."""
    source, rest = input_text(inputs, keys.source, "source text")
    row_id, category = rest.get(keys.id), category_text(rest.get(keys.category), keys.category)
    summary = output_text(outputs, "summary", "summary")
    reference = None
    if isinstance(expectations, dict):
        reference = next((expectations[k] for k in REFERENCE_KEYS if isinstance(expectations.get(k), str)), None)
    instruction = None
    if keys.instruction is not None:
        instruction = inputs.get(keys.instruction) if isinstance(inputs, dict) else None
        if not isinstance(instruction, str) or not instruction.strip():
            found = "missing" if missing(instruction) else "empty" if isinstance(instruction, str) else type(instruction).__name__
            raise ValueError(f"a rewrite's instruction must be text in `inputs[{keys.instruction!r}]`; it is {found}")
        if problems := unencodable({"instruction": [instruction]}):  # else a bare UnicodeEncodeError mid-run, naming no row
            raise ValueError(problems[0])
    id_given = not missing(row_id)
    row = one_row(prepare_rows, source, summary or "", row_id if id_given else source_key(source))
    return ParsedRow(row=row, category=category, reference=reference, trace_id=trace_id, id_given=id_given, instruction=instruction)


def category_text(value: Any, key: str = "category", where: str | None = None) -> str | None:
    """A row's category as it is stored: text, a number as its text (``7`` and ``7.0`` -> ``"7"``, as ids are), None
    when missing or blank (a nameless category once got a bar of its own); ``ValueError`` for anything else. The rows' categories are one column of the run's tables, so a
    list, a dict or a boolean is refused where the row is read, before any judge call, not when the run is logged."""
    if value is None or (is_scalar(value) and not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return canonical_id(value)
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise ValueError(f"the category {where or f'`inputs[{key!r}]`'} must be text (or a number); got {type(value).__name__} {shown}")


class Pipeline(TaskPipeline):
    """The summaries' (and rewrites') ``TaskPipeline``: one judgement per row for one judge and one set of options,
    for one evaluation (``evaluate_summaries``, ``log_results``, ``score_traces``) or one plain scorer's row. A row
    is known by its texts (its source and summary; a rewrite's instruction too); rows of one source are judged one
    at a time, so its key points are asked once and then come from the judge's cache. ``claims=False``: only the
    key-point passes (a coverage scorer alone); ``instruction``: ask whether each rewrite follows its instruction
    (default: when ``keys.instruction`` says the rows are rewrites). With ``keys.instruction`` the result is
    ``rewrites``' (``instruction_following``, the rows keyed by input and instruction)."""

    holding = "a source and a summary"

    def __init__(self, judge: Judge | None, *, options: JudgingOptions, statistics: StatisticsOptions = StatisticsOptions(),
                 keys: InputKeys = InputKeys(), claims: bool = True, instruction: bool | None = None, preflight: Preflight | None = None):
        super().__init__(judge, keys=keys, statistics=statistics, preflight=preflight)
        self.options, self.claims = options.for_judge(judge), claims
        self.instruction = keys.instruction is not None if instruction is None else instruction

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedRow:
        return parse_row(inputs, outputs, expectations, keys=self.keys, trace_id=trace_id_of(trace))

    def texts(self, parsed: ParsedRow) -> tuple[str, str, str | None]:
        return parsed.row.source_key, hashlib.sha256(parsed.row.summary.encode("utf-8")).hexdigest(), parsed.instruction

    def serial(self, parsed: ParsedRow) -> str:
        return parsed.row.source_key

    def order(self, parsed: ParsedRow) -> tuple[str, str]:
        return canonical_id(parsed.row.id), parsed.row.summary

    def ask(self, rows: list[ParsedRow]) -> list[RowJudgement]:
        asked = [parsed.row for parsed in rows]
        judges_rows = self.judge is None or self.claims or self.options.coverage
        if self.instruction and judges_rows:  # each row's check within its share of the judge's budget
            return judge_with_instructions(self.judge, asked, [p.instruction or "" for p in rows], self.options, progress=False, claims=self.claims)
        if judges_rows:
            return judge_rows(asked, self.judge, self.options, progress=False, claims=self.claims)
        judged = [RowJudgement(id=row.id, source_key=row.source_key) for row in asked]  # the instruction alone
        if not self.instruction:
            return judged
        return check_instructions(self.judge, asked, [p.instruction or "" for p in rows], judged, self.options.max_source_tokens)

    def build(self, rows: list[ParsedRow], judgements: list[RowJudgement]) -> SummarizationResult:
        categories, references = [p.category for p in rows], [p.reference for p in rows]
        if any(r is None for r in references):
            if any(r is not None for r in references):
                log.warning("only %d of %d rows have a reference summary: ROUGE, BLEU and chrF are left out",
                            sum(r is not None for r in references), len(rows))
            references = None
        common = {"judge": self.judge, "options": self.options, "statistics": self.statistics, "references": references,
                  "extra_columns": {"category": categories} if any(c is not None for c in categories) else None}
        inputs = [p.row for p in rows]
        if self.keys.instruction is not None:
            return rewrite_result(inputs, judgements, [p.instruction or "" for p in rows], **common)
        return build_result(inputs, judgements, **common)


def trace_id_of(trace: Any) -> str | None:
    """The id of the trace MLflow handed a scorer (None when it handed none: the store did not write it)."""
    return getattr(getattr(trace, "info", None), "trace_id", None)


def unique_ids(rows: Sequence[ParsedRow], *, id_key: str = "id") -> None:
    """Refuse summary rows whose ids repeat (``ValueError`` naming each): one row's figures would count twice."""
    refuse_repeated(repeated_ids(rows, id_key=id_key))


def trace_rows(traces: Sequence[Any], pipeline: Any) -> tuple[list[Any], list[str]]:
    """Each trace as a row (its root span's inputs and outputs, its expectations, read by ``pipeline.parse``: a
    task's ``TaskPipeline``), and each trace that is not one, in words: its id, its row's id when it has one, and
    why (what its card said), so a refusal names the row and its real problem, not a count."""
    rows, unusable = [], []
    for trace in traces:
        root = root_span(trace)
        expectations = {a.name: a.value for a in trace.info.assessments if getattr(a, "expectation", None) is not None}
        try:
            if root is None:
                raise ValueError("no root span")
            rows.append(pipeline.read(root.inputs, root.outputs, expectations, trace))
        except ValueError as error:
            inputs = root.inputs if root is not None else None
            row_id = inputs.get(pipeline.keys.id) if isinstance(inputs, dict) else None
            said = str(error)
            label = "the row" if trace.info.trace_id in said else f"the row of trace {trace.info.trace_id}"  # answers' errors name it
            unusable.append(f"{label}{f' (id {row_id!r})' if not missing(row_id) else ''}: {said}")
    return rows, unusable


def evaluated_row_count(run_id: str) -> int | None:
    """The rows ``mlflow.genai.evaluate`` evaluated in ``run_id``: the ``num_rows`` of the dataset it logged as the
    run's input (None when it logged none). Several datasets are several evaluations in one active run: one report
    over all of their rows would be none of them (``ValueError``)."""
    inputs = mlflow.get_run(run_id).inputs
    datasets = inputs.dataset_inputs if inputs is not None else []
    if len(datasets) > 1:
        raise ValueError(f"run {run_id} holds {len(datasets)} evaluations (MLflow logged {len(datasets)} datasets as its "
                         "inputs: mlflow.genai.evaluate was called more than once inside one active run); a report is of one "
                         "evaluation: evaluate each into a run of its own")
    if len(datasets) != 1:
        return None
    try:
        return int(json.loads(datasets[0].dataset.profile or "{}")["num_rows"])
    except (ValueError, KeyError, TypeError):
        return None
