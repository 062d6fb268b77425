"""Answers from retrieved passages in MLflow's terms: where a row's question, passages and answer are (its
``inputs``/``outputs``, or the trace itself: the documents of its RETRIEVER spans), and ``AnswerPipeline``, the
answers' ``TaskPipeline``.

A RAG application instrumented with MLflow tracing is judged as it runs: ``mlflow.genai.evaluate(data,
predict_fn=app, scorers=answer_scorers(judge))`` hands each scorer the question (``inputs``), the answer (``outputs``)
and the trace, whose RETRIEVER spans hold what was retrieved (MLflow's ``Document``s: ``page_content``), in the
order they ran. Passages given in ``inputs["passages"]`` are used as they are instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from mlflow.entities import SpanType

from ..judge import Judge, Preflight
from ..rag import AnswerInput, AnswersResult, prepare_answer_rows
from ..rag.api import PASSAGE_SEQUENCES, build_answers_result, judge_answer_rows
from ..rag.pipeline import PARTS
from ..rag.records import AnswerJudgement
from ..stats import StatisticsOptions
from ..summarization.ids import canonical_id
from ..summarization.judging import one_row
from ..summarization.method import Method
from ..summarization.options import JudgingOptions
from .genai import trace_id_of
from .pipeline import TaskPipeline, input_text, missing, output_text

log = logging.getLogger(__name__)

# Where an expected answer sits in MLflow's ``expectations``: MLflow's own key first, then ours.
EXPECTED_KEYS = ("expected_response", "expected_answer")
_DOCUMENT_TEXT = ("page_content", "content", "text")  # a retrieved document's text, as MLflow and LangChain name it


@dataclass(frozen=True)
class AnswerKeys:
    """Where a row's texts are: the question in ``inputs[question]`` (or ``inputs`` itself, a string), the passages
    in ``inputs[passages]`` (else the trace's RETRIEVER spans), the id in ``inputs[id]``, the answer in ``outputs``
    (a string, or ``outputs[answer]``)."""

    question: str = "question"
    passages: str = "passages"
    id: str = "id"
    answer: str = "answer"


@dataclass(frozen=True)
class ParsedAnswer:
    """One row as the answer judges see it: the validated texts, the trace it is on, whether its id was given (else
    its question's hash) and where its passages came from ("inputs" or "trace")."""

    row: AnswerInput
    trace_id: str | None = None
    id_given: bool = True
    passages_from: str = "inputs"
    failure: str | None = None  # what the application raised on this row (``TaskPipeline.read``): not judged


def document_text(document: Any) -> Any:
    """A retrieved document's text: a string as it is; MLflow's ``Document`` (or its dict) by ``page_content``."""
    if isinstance(document, str):
        return document
    for name in _DOCUMENT_TEXT:
        value = document.get(name) if isinstance(document, dict) else getattr(document, name, None)
        if isinstance(value, str):
            return value
    return document  # refused, named, by prepare_answer_rows


def retrieved_passages(trace: Any) -> list[Any] | None:
    """The documents the trace's RETRIEVER spans returned, in the order the spans started (a retriever inside another
    is its parent's business, not counted again); None when the trace has no RETRIEVER span."""
    spans = [s for s in getattr(getattr(trace, "data", None), "spans", None) or [] if s.span_type == SpanType.RETRIEVER]
    if not spans:
        return None
    by_id = {s.span_id: s for s in getattr(trace.data, "spans", [])}

    def nested(span: Any) -> bool:
        parent = by_id.get(span.parent_id)
        while parent is not None:
            if parent.span_type == SpanType.RETRIEVER:
                return True
            parent = by_id.get(parent.parent_id)
        return False

    passages: list[Any] = []
    for span in sorted((s for s in spans if not nested(s)), key=lambda s: s.start_time_ns):
        outputs = span.outputs
        if isinstance(outputs, str):  # a span read back from a store may hold its outputs as JSON text
            try:
                outputs = json.loads(outputs)
            except ValueError:
                pass
        passages.extend(document_text(d) for d in (outputs if isinstance(outputs, list) else [] if outputs is None else [outputs]))
    return passages


def parse_answer(inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None, *, keys: AnswerKeys = AnswerKeys()) -> ParsedAnswer:
    """The row in MLflow's terms (``AnswerKeys``); the expected answer from ``expectations["expected_response"]``
    (or ``["expected_answer"]``). Raises ``ValueError`` naming what is wrong (and the trace)."""
    trace_id = trace_id_of(trace)
    where = f" (trace {trace_id})" if trace_id else ""
    question, rest = input_text(inputs, keys.question, "question", where)
    row_id, given = rest.get(keys.id), rest.get(keys.passages)
    answer = output_text(outputs, keys.answer, "answer", where)
    passages_from = "inputs"
    if missing(given):
        given, passages_from = retrieved_passages(trace), "trace"
        if given is None:
            raise ValueError(f"no passages for this row{where}: give them as inputs[{keys.passages!r}] (a list of texts), or "
                             "judge the trace of an application whose retriever is traced (a span of type RETRIEVER)")
    elif isinstance(given, PASSAGE_SEQUENCES):  # anything else is refused, named, below (a dict was read as its keys)
        given = [document_text(d) for d in given]
    expected = None
    if isinstance(expectations, dict):  # one that is not text is refused by prepare_answer_rows (was taken as none)
        expected = next((expectations[k] for k in EXPECTED_KEYS if not missing(expectations.get(k))), None)
    id_given = not missing(row_id)
    fallback = "q-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]
    row = one_row(prepare_answer_rows, question, given, answer, row_id if id_given else fallback, expected, where=where)
    return ParsedAnswer(row=row, trace_id=trace_id, id_given=id_given, passages_from=passages_from)


class AnswerPipeline(TaskPipeline):
    """The answers' ``TaskPipeline``: each row judged once (its question's passages, its answer, its expected answer
    identify it) by ``rag``'s passes (``parts``: which; its claims verified as ``method`` says), the result
    ``rag.AnswersResult``."""

    holding = "a question, passages and an answer"
    known_by = "question"
    judged_as = AnswerJudgement

    def __init__(self, judge: Judge, *, keys: AnswerKeys = AnswerKeys(), max_source_tokens: int | None = None,
                 statistics: StatisticsOptions = StatisticsOptions(), preflight: Preflight | None = None,
                 method: Method = Method(), parts: frozenset[str] = PARTS):
        super().__init__(judge, keys=keys, statistics=statistics, preflight=preflight)
        self.method, self.parts = method, parts
        self.max_source_tokens = JudgingOptions(max_source_tokens=max_source_tokens).for_judge(judge).max_source_tokens

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedAnswer:
        return parse_answer(inputs, outputs, expectations, trace, keys=self.keys)

    def texts(self, parsed: ParsedAnswer) -> tuple[str, str, str | None]:
        row = parsed.row
        return row.source_key, hashlib.sha256(row.answer.encode("utf-8")).hexdigest(), row.expected

    def order(self, parsed: ParsedAnswer) -> tuple[str, str]:
        return canonical_id(parsed.row.id), parsed.row.answer

    def ask(self, rows: list[ParsedAnswer]) -> list[AnswerJudgement]:
        return judge_answer_rows([p.row for p in rows], self.judge, max_source_tokens=self.max_source_tokens, progress=False,
                                 method=self.method, parts=self.parts)

    def build(self, rows: list[ParsedAnswer], judgements: list[AnswerJudgement]) -> AnswersResult:
        return build_answers_result(judgements, judge=self.judge, max_source_tokens=self.max_source_tokens, statistics=self.statistics,
                                    method=self.method)
