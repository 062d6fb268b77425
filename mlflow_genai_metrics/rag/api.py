"""``judge_answers``: answers from retrieved passages, judged claim by claim with the evidence cited."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..grounding.model import model_tag
from ..judge import BatchOptions, Judge, Usage
from ..prompts import ANSWER_PROMPTS
from ..signature import summarization_signature
from ..stats import StatisticsOptions
from ..summarization.api import response_mode_of
from ..summarization.judging import RowsRefused, as_list, check_same_index, id_problems, is_missing, plain_id, unencodable
from ..summarization.method import Method, method_of
from ..summarization.options import JudgingOptions
from ..summarization.result import JudgedTables
from ..summarization.scoring import Estimate, rate_statistics, result_metrics
from ..tables import MissingColumnError
from .grounded import check_against_passages
from .pipeline import PARTS, judge_answer_pipelines
from .records import AnswerInput, AnswerJudgement
from .scoring import answer_claims_table, answer_rows_table, facts_table

# The prompts an answer's judgement asks: the summaries' claim extraction, then the answers' own (``facts`` is in
# every answer signature, so runs with and without expected answers compare on their claims).
ANSWER_SIGNATURE_PROMPTS = ("claims", "claims_retry", *ANSWER_PROMPTS)


def answer_source_key(question: str, passages: Sequence[str]) -> str:
    """The fingerprint of what an answer is judged against: its question and its passages, in order."""
    return hashlib.sha256("\0".join([question, *passages]).encode("utf-8")).hexdigest()[:16]


PASSAGE_SEQUENCES = (list, tuple, np.ndarray, pd.Series)  # what a row's passages may be given as


def _passage_list(value: Any) -> list[Any] | str:
    """A row's passages as a list, or what is wrong with them."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "the passages are missing (give an empty list when nothing was retrieved)"
    if isinstance(value, str):
        return "the passages are one string, not a list of passages (wrap it in a list if it is one passage)"
    if not isinstance(value, PASSAGE_SEQUENCES):
        return f"the passages are {type(value).__name__}, not a list of texts"
    return list(value)


def prepare_answer_rows(
    questions: Sequence[str], passages: Sequence[Sequence[str]], answers: Sequence[str], ids: Sequence[Any] | None = None,
    expected: Sequence[str | None] | None = None,
) -> list[AnswerInput]:
    """Validate every row before anything is judged; each problem names its row (and its passage)."""
    inputs = {"questions": questions, "passages": passages, "answers": answers, "ids": ids, "expected": expected}
    lists = {name: as_list(values, name) for name, values in inputs.items() if values is not None or name in ("questions", "passages", "answers")}
    check_same_index(inputs)
    count = len(lists["questions"])
    for name, values in lists.items():
        if len(values) != count:
            raise ValueError(f"{name} has {len(values)} rows but questions has {count}")
    if not count:
        raise ValueError("there are no rows to judge: questions, passages and answers are empty")
    id_list = lists.get("ids", list(range(count)))
    expected_list = lists.get("expected", [None] * count)
    problems: list[tuple[str, str]] = []
    seen: dict[str, tuple[int, Any]] = {}
    rows = []
    for position, (row_id, question, given, answer, wanted) in enumerate(zip(id_list, lists["questions"], lists["passages"], lists["answers"], expected_list)):
        label = f"row {position} (id {row_id!r})"
        problems.extend(id_problems(position, row_id, seen))
        if is_missing(question) or not isinstance(question, str) or not question.strip():
            problems.append((label, f"the question is {'missing' if is_missing(question) else 'empty or not text'}"))
        texts = _passage_list(given)
        if isinstance(texts, str):
            problems.append((label, texts))
            texts = []
        for number, passage in enumerate(texts, start=1):
            if not isinstance(passage, str) or not passage.strip():
                problems.append((label, f"passage {number} is {'empty' if isinstance(passage, str) else type(passage).__name__}, not text"))
        if not is_missing(answer) and not isinstance(answer, str):
            problems.append((label, f"the answer is not text ({type(answer).__name__})"))
        if not is_missing(wanted) and not isinstance(wanted, str):
            problems.append((label, f"the expected answer is not text ({type(wanted).__name__})"))
        fields = {"id": [row_id], "question": [question], "passage": texts, "answer": [answer], "expected answer": [wanted]}
        problems.extend((label, problem) for problem in unencodable(fields))
        if not problems:
            rows.append(AnswerInput(
                id=plain_id(row_id), question=question, passages=texts, answer="" if is_missing(answer) else answer,
                expected=None if is_missing(wanted) else wanted, source_key=answer_source_key(question, texts),
            ))
    if problems:
        raise RowsRefused("cannot judge these answers", problems)
    return rows


@dataclass(frozen=True)
class AnswersResult(JudgedTables):
    """Per-row values, claims (with passages and quotes), expected facts, aggregates and the signature of one judged
    set of answers.

    - ``rows``: one row per input, in input order: ``id``, a summary's claim columns (``claim_count``, ``aligned``,
      ``strictly_aligned``, ...), the answer's own (``passages``, ``passages_cited``, ``context_utilisation``,
      ``quote_failures``, ``answer_relevance``, ``defect_irrelevant``, ``expected_facts``, ``context_sufficiency``,
      ``answer_recall``), ``reasoning``, ``relevance_reasoning``, ``facts_reasoning``, ``error``, judge usage;
    - ``claims``: one row per claim: verdict, reason, ``passage``, ``quote``, ``quote_found``, ``judge_verdict``;
    - ``facts``: one row per fact of an expected answer: in the passages (verdict, passage, quote), in the answer;
    - ``metrics``: every aggregate with ``_ci_low``, ``_ci_high`` and ``_n``, and the ``judge/...`` usage.
    """

    TABLE_NAMES = ("rows", "claims", "facts")
    rows: pd.DataFrame
    claims: pd.DataFrame
    facts: pd.DataFrame
    metrics: dict[str, float]
    signature: str
    judgements: list[AnswerJudgement] = field(repr=False)
    usage: Usage = field(repr=False)
    reported_models: dict[str, int] = field(default_factory=dict, repr=False)
    estimates: dict[str, Estimate] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        shown = ("strict_alignment", "answer_relevance", "context_utilisation")
        headline = ", ".join(f"{name}={self.metrics[name]:.3f}" for name in shown if name in self.metrics)
        return f"AnswersResult({len(self.rows)} rows, {headline}, signature={self.signature!r})"


def judge_answers(
    questions: Sequence[str],
    passages: Sequence[Sequence[str]],
    answers: Sequence[str],
    *,
    judge: Judge,
    ids: Sequence[Any] | None = None,
    expected: Sequence[str | None] | None = None,
    max_source_tokens: int | None = None,
    statistics: StatisticsOptions | None = None,
    grounding: bool = True,
    progress: bool | None = None,
    batch: bool | BatchOptions = False,
    method: Method | None = None,
    **keywords: Any,
) -> AnswersResult:
    """Judge each answer against the passages retrieved for its question, claim by claim, with the evidence cited.

    >>> result = judge_answers(questions, passages, answers, judge=Judge("gpt-4o-mini"))
    >>> result.metrics["strict_alignment"], result.metrics["answer_relevance"], result.metrics["context_utilisation"]
    >>> result.claims[["id", "claim", "verdict", "passage", "quote", "quote_found"]]

    ``passages[i]`` is the list of texts retrieved for row i, in their order (an empty list: nothing retrieved);
    each claim's verdict cites one by its 1-based number. ``expected`` (optional, None for a row without one) adds
    ``context_sufficiency`` and ``answer_recall``. Passages longer than ``max_source_tokens`` together (None: what
    the judge's ``context_window`` leaves room for) are verified in chunks of whole passages. ``grounding`` (default
    on) checks each judged claim against the passages with the model-free check: its ``lexical_support`` in the
    best passage and a ``suspect`` flag where the verdict disagrees sharply (``judge/suspect_rate``). ``batch=True``
    (or ``BatchOptions(...)``) asks through batch files, as ``judge_summaries`` does (``Judge.batched``): the same
    answers into the same cache, each pass that needs earlier answers one more batch. ``method`` (or its fields as
    keywords: ``stability=3``, ``order_check=0.2``, ``examples="examples.json"``) says how claims are verified, as for
    summaries. Bad input raises before any call, naming every bad row; a row the judge fails on keeps its ``error``
    and gets no value.
    """
    method = method_of("judge_answers", keywords, method)
    if batch and isinstance(judge, Judge) and judge.settings.batch is None:
        batched = judge.batched(batch if isinstance(batch, BatchOptions) else None)
        try:
            return judge_answers(questions, passages, answers, judge=batched, ids=ids, expected=expected, max_source_tokens=max_source_tokens,
                                 statistics=statistics, grounding=grounding, progress=progress, method=method)
        finally:
            judge.count_copy(batched)  # the Judge given is the one whose usage grows
            batched.close()
    statistics, chunk = checked_arguments("judge_answers", judge, statistics, max_source_tokens)
    rows = prepare_answer_rows(questions, passages, answers, ids, expected)
    judgements = judge_answer_rows(rows, judge, max_source_tokens=chunk, grounding=grounding, progress=progress, method=method)
    return build_answers_result(judgements, judge=judge, max_source_tokens=chunk, statistics=statistics, grounding=grounding, method=method)


def checked_arguments(caller: str, judge: Any, statistics: Any, max_source_tokens: int | None) -> tuple[StatisticsOptions, int | None]:
    """The statistics (default: ``StatisticsOptions()``) and the passages' chunk size (checked like a summary's
    source's) for ``caller`` (``judge_answers``, its Spark twin), after refusing a judge or statistics of the wrong
    type."""
    statistics = statistics if statistics is not None else StatisticsOptions()
    if not isinstance(statistics, StatisticsOptions):
        raise TypeError(f"{caller}(): statistics= must be a StatisticsOptions, not {type(statistics).__name__}")
    if not isinstance(judge, Judge):
        raise TypeError(f"{caller}(): judge= must be a Judge, not {type(judge).__name__}")
    return statistics, JudgingOptions(max_source_tokens=max_source_tokens).for_judge(judge).max_source_tokens


def judge_answer_rows(rows: Sequence[AnswerInput], judge: Judge, *, max_source_tokens: int | None, grounding: bool = True,
                      progress: bool | None = None, method: Method = Method(), parts: frozenset[str] = PARTS) -> list[AnswerJudgement]:
    """One judgement per validated row: the judge's passes (its claims verified as ``method`` says; ``parts``: which,
    ``rag.pipeline.PARTS``), then (``grounding``) the model-free check of each claim against its passages
    (``rag.grounded``)."""
    judgements = judge_answer_pipelines(rows, judge, max_source_tokens=max_source_tokens, progress=progress, method=method, parts=parts)
    return check_against_passages(rows, judgements, judge) if grounding else judgements


def build_answers_result(judgements: Sequence[AnswerJudgement], *, judge: Judge, max_source_tokens: int | None,
                         statistics: StatisticsOptions, grounding: bool = True, method: Method = Method()) -> AnswersResult:
    """Tables, aggregates and signature from one judgement per row (``grounding``: its claims were checked against
    the passages by the model-free check)."""
    usage = Usage.total([j.usage for j in judgements])
    table = answer_rows_table(judgements, suspect=grounding, stability=method.repeated, order=method.order_checked)
    histograms = {name: statistic.histogram() for name, statistic in rate_statistics(table).items()}
    found, metrics = result_metrics(histograms, usage, prices=judge.prices, statistics=statistics)
    signature = answers_signature(judge, max_source_tokens=max_source_tokens, usage=usage, statistics=statistics, grounding=grounding,
                                  method=method)
    return AnswersResult(rows=table, claims=answer_claims_table(judgements), facts=facts_table(judgements), metrics=metrics,
                         signature=signature, judgements=list(judgements), usage=usage, reported_models=dict(usage.reported_models),
                         estimates=found)


def answers_signature(judge: Judge, *, max_source_tokens: int | None, usage: Usage, statistics: StatisticsOptions,
                      grounding: bool, method: Method = Method()) -> str:
    """What produced an answers run's numbers: the judge, the answer prompts, the chunk size, the response mode its
    replies came in (from ``usage``), the statistics and the model-free check's model (``grounding``)."""
    return summarization_signature(judge, max_source_tokens=max_source_tokens, response_mode=response_mode_of(usage),
                                   statistics=statistics, prompts=ANSWER_SIGNATURE_PROMPTS, grounding=model_tag() if grounding else None,
                                   method=method)


def judge_answers_frame(
    frame: pd.DataFrame,
    *,
    judge: Judge,
    question_col: str = "question",
    passages_col: str = "passages",
    answer_col: str = "answer",
    id_col: str | None = None,
    expected_col: str | None = None,
    **keywords: Any,
) -> AnswersResult:
    """``judge_answers`` over the columns of a DataFrame (the passages column holds a list of texts per row)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"judge_answers_frame needs a pandas DataFrame, not {type(frame).__name__}; use judge_answers for lists")
    missing = [c for c in (question_col, passages_col, answer_col, id_col, expected_col) if c is not None and c not in frame.columns]
    if missing:
        raise MissingColumnError(f"the DataFrame has no column {missing}; it has {list(frame.columns)}")
    return judge_answers(
        frame[question_col], frame[passages_col], frame[answer_col], judge=judge,
        ids=frame[id_col] if id_col else None, expected=frame[expected_col] if expected_col else None, **keywords,
    )
