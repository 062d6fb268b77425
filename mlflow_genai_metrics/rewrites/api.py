"""``judge_rewrites``: rewrites judged against their inputs: no new facts, nothing lost, the instruction followed.

A rewrite is judged as a summary of its input (``summarization``: its claims verified against the input, the input's
key points checked against it, with the summaries' prompts, cache, chunking and typed errors), plus one call per
row asking whether it follows its instruction (``instruction`` prompt), set aside and asked within the row's share of
a budget once its other passes succeeded (``pipeline.After``), so a short budget finishes the rows it starts. The result is a ``SummarizationResult``
whose rows also carry ``instruction_followed`` and ``instruction_reasoning`` and whose metrics add
``instruction_following``; its signature names the ``instruction`` prompt, so a rewrites run and a summaries run are
never compared as equals.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..judge import Judge, JudgeReply, JudgeRequest, run_sync
from ..prompts import REWRITE_PROMPTS, SUMMARY_PROMPTS
from ..signature import summarization_signature
from ..stats import StatisticsOptions
from ..summarization.api import build_result, response_mode_of
from ..summarization.judging import as_list, check_same_index, is_missing, judge_rows, prepare_rows, source_key, unencodable
from ..summarization.method import Method, method_of
from ..summarization.options import JudgingOptions
from ..summarization.records import RowError, RowInput, RowJudgement, TaskVerdict
from ..summarization.result import SummarizationResult
from ..summarization.statements import has_words
from ..tables import MissingColumnError
from .passes import InstructionCheck, instruction_request

REWRITE_SIGNATURE_PROMPTS = (*SUMMARY_PROMPTS, *REWRITE_PROMPTS)
EMPTY_REWRITE = "The rewrite is empty: it does nothing the instruction asks."


def _instructions(instruction: str | Sequence[str], count: int) -> list[str]:
    """One instruction per row (one text is every row's); refused before any call, naming each bad row."""
    given = [instruction] * count if isinstance(instruction, str) else as_list(instruction, "instruction")
    if len(given) != count:
        raise ValueError(f"instruction has {len(given)} rows but inputs has {count} (give one text for every row, or one per row)")
    bad = [f"row {i}: the instruction is {'missing' if is_missing(text) else 'empty or not text'}"
           for i, text in enumerate(given) if is_missing(text) or not isinstance(text, str) or not text.strip()]
    bad += [f"row {i}: {problem}" for i, text in enumerate(given) if isinstance(text, str)
            for problem in unencodable({"instruction": [text]})]  # else it fails mid-run, after the other passes' calls
    if bad:
        raise ValueError("cannot judge these rewrites:\n  " + "\n  ".join(bad[:20]))
    return given


class _Checks:
    """Each row's instruction request, asked by the row's pipeline once its passes succeeded (``pipeline.After``)."""

    def __init__(self, rows: Sequence[RowInput], instructions: Sequence[str], max_source_tokens: int | None = None):
        self.rows, self.instructions, self.max_source_tokens = rows, instructions, max_source_tokens
        self.replies: dict[int, JudgeReply] = {}

    def request(self, index: int) -> JudgeRequest | None:
        row = self.rows[index]
        if not has_words(row.summary):
            return None
        return instruction_request(self.instructions[index], row.source, row.summary, self.max_source_tokens)

    def answered(self, index: int, reply: JudgeReply) -> None:
        self.replies[index] = reply


async def _checks(judge: Judge, checks: _Checks, judgements: Sequence[RowJudgement]) -> list[InstructionCheck | JudgeReply | None]:
    """Each row's instruction check (an empty rewrite: "no", with no call): the reply its pipeline had, or asked now;
    None for a row that failed already (its check could only be paid for, never give it a value)."""

    async def one(index: int) -> InstructionCheck | JudgeReply | None:
        if index in checks.replies:
            return checks.replies[index]
        if judgements[index].error is not None:
            return None
        request = checks.request(index)
        return InstructionCheck(reason=EMPTY_REWRITE, followed="no") if request is None else await judge.aask(request)

    return list(await asyncio.gather(*(one(index) for index in range(len(checks.rows)))))


def _with_check(judgement: RowJudgement, check: InstructionCheck | JudgeReply | None) -> RowJudgement:
    """The row's judgement with its instruction verdict (``verdicts["instruction"]``) and that call's usage, answered
    or not (an answered check's call once went uncounted: 4 calls a row in the run's figures for 5 sent); its error
    when the check failed (and nothing failed before it). A row that failed before its check is left as it is."""
    if check is None:
        return judgement
    if not isinstance(check, JudgeReply):  # an empty rewrite: "no", with no call
        if judgement.error is not None:
            return judgement
        return judgement.model_copy(update={"verdicts": {**judgement.verdicts, "instruction": TaskVerdict(value=check.followed, reason=check.reason)}})
    usage = {"usage": judgement.usage.model_copy(), "usage_by_pass": {**judgement.usage_by_pass, "instruction": check.usage}}
    usage["usage"].add(check.usage)
    if judgement.error is not None:
        return judgement.model_copy(update=usage)
    if check.ok:
        verdict = TaskVerdict(value=check.answer.followed, reason=check.answer.reason)
        return judgement.model_copy(update={**usage, "verdicts": {**judgement.verdicts, "instruction": verdict}})
    return RowJudgement(id=judgement.id, source_key=judgement.source_key, error=RowError(stage="instruction check", error=check.error), **usage)


def judge_with_instructions(judge: Judge, rows: Sequence[RowInput], instructions: Sequence[str], options: JudgingOptions, *,
                            progress: bool | None = None, claims: bool = True) -> list[RowJudgement]:
    """The rows judged (``judge_rows``) with each row's instruction check: its verdict under ``verdicts["instruction"]``,
    or, when the call failed, the row's error (its usage counted either way). A row's check is asked within its share
    of the judge's budget; a row read whole from the cache is asked after, a row that failed not at all."""
    checks = _Checks(rows, instructions, options.max_source_tokens)  # a long input cut to fit, as its chunks are
    return _with_checks(judge, checks, judge_rows(list(rows), judge, options, progress=progress, claims=claims, after=checks))


def check_instructions(judge: Judge, rows: Sequence[RowInput], instructions: Sequence[str],
                       judgements: Sequence[RowJudgement], max_source_tokens: int | None = None) -> list[RowJudgement]:
    """``judgements`` (judged without the checks: an instruction judge's own rows) with each row's instruction check,
    as ``judge_with_instructions`` says."""
    return _with_checks(judge, _Checks(rows, instructions, max_source_tokens), judgements)


def _with_checks(judge: Judge, checks: _Checks, judgements: Sequence[RowJudgement]) -> list[RowJudgement]:
    """``judgements`` with each row's check: the reply its pipeline had, or asked now, but for rows that failed
    already (never asked: a budget error's row once paid for a check it could not use)."""
    replies = run_sync(_checks(judge, checks, judgements), rows=len(checks.rows))
    return [_with_check(judgement, reply) for judgement, reply in zip(judgements, replies)]


def rewrite_key(text: str, instruction: str) -> str:
    """What a rewrite's row pairs on across runs: its input *and* its instruction, so identical rewrites judged
    under different instructions are never compared as equals."""
    return source_key(f"{text}\0instruction\0{instruction}")


def rewrite_result(rows: Sequence[RowInput], judgements: Sequence[RowJudgement], instructions: Sequence[str], *, judge: Judge,
                   options: JudgingOptions, statistics: StatisticsOptions, references: Sequence[str] | None = None,
                   extra_columns: dict[str, Sequence[Any]] | None = None) -> SummarizationResult:
    """The result of judged rewrites (``check_instructions``' judgements): the summaries' tables and figures plus
    ``instruction_followed`` and ``instruction_reasoning`` per row and ``instruction_following``, signed with the
    ``instruction`` prompt, each row keyed by its input and instruction (``rewrite_key``)."""
    verdicts = [j.verdicts.get("instruction") if j.error is None else None for j in judgements]
    followed = pd.array([None if v is None else int(v.value == "yes") for v in verdicts], dtype="Int64")
    reasons = [None if v is None else f"Instruction {v.value}: {v.reason}" for v in verdicts]
    result = build_result(rows, judgements, judge=judge, options=options, statistics=statistics, references=references,
                          extra_columns={**(extra_columns or {}), "instruction_followed": followed, "instruction_reasoning": reasons})
    signature = summarization_signature(judge, coverage=options.coverage, max_source_tokens=options.max_source_tokens,
                                        response_mode=response_mode_of(result.usage), statistics=statistics, prompts=REWRITE_SIGNATURE_PROMPTS,
                                        method=options.method)
    keys = [rewrite_key(row.source, text) for row, text in zip(rows, instructions)]
    return dataclasses.replace(result, signature=signature, rows=result.rows.assign(source_key=keys))


def judge_rewrites(
    inputs: Sequence[str],
    rewrites: Sequence[str],
    *,
    instruction: str | Sequence[str],
    judge: Judge,
    ids: Sequence[Any] | None = None,
    max_source_tokens: int | None = None,
    statistics: StatisticsOptions | None = None,
    progress: bool | None = None,
    method: Method | None = None,
    **keywords: Any,
) -> SummarizationResult:
    """Judge each rewrite against its input and its instruction.

    >>> result = judge_rewrites(emails, rewrites, instruction="Make it polite and brief.", judge=Judge("gpt-4o-mini"))
    >>> result.metrics["strict_alignment"], result.metrics["coverage"], result.metrics["instruction_following"]
    >>> result.rows[["id", "strictly_aligned", "coverage", "instruction_followed", "instruction_reasoning"]]

    - no new facts: ``strictly_aligned`` (every claim of the rewrite supported by the input; a claim the input does
      not support is a new fact: ``unverifiable_claims``, and one it contradicts ``contradicted_claims``);
    - nothing lost: ``coverage`` (the share of the input's key points the rewrite keeps);
    - the instruction followed: ``instruction_followed`` (1 or 0, with the judge's reason).

    ``instruction``: one text for every row, or one per row. Bad input raises before any call, naming every bad
    row; a row the judge fails on (any pass) keeps its ``error`` and gets no value. ``method`` (or its fields as
    keywords: ``stability=3``, ``order_check=0.2``, ``examples=...``) says how claims are verified, as for summaries.
    """
    method = method_of("judge_rewrites", keywords, method)
    statistics = statistics if statistics is not None else StatisticsOptions()
    if not isinstance(judge, Judge):
        raise TypeError(f"judge_rewrites(): judge= must be a Judge, not {type(judge).__name__}")
    if not isinstance(statistics, StatisticsOptions):
        raise TypeError(f"judge_rewrites(): statistics= must be a StatisticsOptions, not {type(statistics).__name__}")
    if not isinstance(instruction, str):  # paired by position: a Series of instructions in another order is refused
        check_same_index({"inputs": inputs, "rewrites": rewrites, "instruction": instruction})
    rows = prepare_rows(inputs, rewrites, ids)
    instructions = _instructions(instruction, len(rows))
    options = JudgingOptions(coverage=True, grounding=False, max_source_tokens=max_source_tokens, method=method).for_judge(judge)
    judgements = judge_with_instructions(judge, rows, instructions, options, progress=progress)
    return rewrite_result(rows, judgements, instructions, judge=judge, options=options, statistics=statistics)


def judge_rewrites_frame(frame: pd.DataFrame, *, judge: Judge, instruction: str | None = None, input_col: str = "input",
                         rewrite_col: str = "rewrite", instruction_col: str | None = None, id_col: str | None = None,
                         **keywords: Any) -> SummarizationResult:
    """``judge_rewrites`` over the columns of a DataFrame: one ``instruction`` for every row, or ``instruction_col``."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"judge_rewrites_frame needs a pandas DataFrame, not {type(frame).__name__}; use judge_rewrites for lists")
    if (instruction is None) == (instruction_col is None):
        raise ValueError("give either instruction= (one text for every row) or instruction_col= (one per row)")
    missing = [c for c in (input_col, rewrite_col, instruction_col, id_col) if c is not None and c not in frame.columns]
    if missing:
        raise MissingColumnError(f"the DataFrame has no column {missing}; it has {list(frame.columns)}")
    return judge_rewrites(frame[input_col], frame[rewrite_col], instruction=instruction if instruction is not None else frame[instruction_col],
                          judge=judge, ids=frame[id_col] if id_col else None, **keywords)
