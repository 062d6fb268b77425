"""Rows in -> judge requests -> one ``RowJudgement`` per row.

Inputs are checked and turned into ``RowInput``s here; ``pipeline`` then takes each row through its passes at its
own pace: claim extraction (and key points once per distinct source text), then verification of the claims and
coverage of the source's key points. A summary with words the judge found no claim in is asked about once more.
So one model on N articles costs at most 4N calls (more only when a source is split into chunks or claims are
asked for again), each further model on the same articles at most 3N, and an identical rerun none (the judge's
cache).
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import pandas as pd

from ..judge import Judge, older_objects_set_aside
from ..tables import is_missing
from ..text import normalised, texts
from .grounded import DEFAULT_GROUNDING_CACHE, ground_judgements, grounding_alongside, grounding_cache
from .ids import canonical_id
from .options import JudgingOptions
from .pipeline import After, judge_row_pipelines
from .records import RowInput, RowJudgement


def source_key(text: str) -> str:
    """A source's fingerprint: rows of two runs pair only when theirs match; the same text in another Unicode form
    (NFD, identical on screen) has the same one."""
    return hashlib.sha256(normalised(text).encode("utf-8")).hexdigest()[:16]


def as_list(values: Any, name: str) -> list[Any]:
    if values is None:
        raise ValueError(f"{name} is required")
    if isinstance(values, str):
        raise TypeError(f"{name} must be a sequence of texts (a list or a pandas Series), not one string")
    if isinstance(values, Mapping):
        # list() of a mapping is its keys: the texts would silently be the dict's keys.
        raise TypeError(f"{name} is a mapping ({type(values).__name__}); pass its values in row order as a list or a pandas Series")
    if isinstance(values, pd.DataFrame):
        raise TypeError(f"{name} is a DataFrame; pass one of its columns, or use judge_summaries_frame")
    if isinstance(values, AbstractSet):
        raise TypeError(f"{name} is a set, which has no row order; pass a list or a pandas Series")
    return list(values)


def check_same_index(inputs: dict[str, Any]) -> None:
    """Rows are paired by position, so pandas Series given together must be in the same order: the same index."""
    series = [(name, values) for name, values in inputs.items() if isinstance(values, pd.Series)]
    for name, values in series[1:]:
        first_name, first = series[0]
        if not values.index.equals(first.index):
            raise ValueError(
                f"{first_name} and {name} are pandas Series with different indexes; rows are paired by position, "
                "so give them the same index (e.g. .reset_index(drop=True) on both) or pass lists"
            )


class RowsRefused(ValueError):
    """Rows refused before any judge call: ``problems`` holds (the row's label, what is wrong with it), listed under
    ``head`` (the first 20). ``alone()``: a one-row check's problems without its row's label, for a caller that names
    the row itself (a plain MLflow row, by its position in the data)."""

    def __init__(self, head: str, problems: list[tuple[str, str]]):
        self.problems = problems
        shown = "\n  ".join(f"{label}: {problem}" for label, problem in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{head}:\n  {shown}{more}")

    def alone(self) -> str:
        return "; ".join(problem for _, problem in self.problems)


_Row = TypeVar("_Row")


def one_row(prepare: Callable[..., list[_Row]], *values: Any, where: str = "") -> _Row:
    """One row checked as ``prepare`` (``prepare_rows``, ``rag``'s ``prepare_answer_rows``) checks a list of them,
    given its column ``values`` in ``prepare``'s order; its problems raised as one ``ValueError`` without the list's
    "row 0" (``RowsRefused.alone``, then ``where``), for a caller that names the row itself (a plain MLflow row)."""
    try:
        return prepare(*([value] for value in values))[0]
    except RowsRefused as refused:
        raise ValueError(f"{refused.alone()}{where}") from None


def id_problems(position: int, row_id: Any, seen: dict[str, tuple[int, Any]]) -> list[tuple[str, str]]:
    """What is wrong with row ``position``'s id (none, or one (label, problem)): not usable as an id, or the same as
    an earlier row's once stored (``seen``: canonical id -> (first row, id as given), updated here)."""
    try:
        stored = canonical_id(row_id)
    except (TypeError, ValueError) as exc:
        return [(f"row {position}", str(exc))]
    if stored in seen:
        first, first_id = seen[stored]
        return [(f"row {position} (id {row_id!r})",
                 f"the id repeats row {first} (id {first_id!r}); both are stored as {stored!r}; ids must be unique")]
    seen[stored] = (position, row_id)
    return []


def prepare_rows(
    sources: Sequence[str],
    summaries: Sequence[str],
    ids: Sequence[Any] | None,
    references: Sequence[str | Sequence[str]] | None = None,
) -> list[RowInput]:
    """Validate the inputs before anything is judged; every problem names its row.

    Each input is a sequence in row order (list, tuple, pandas Series, numpy array); rows are paired by position.
    A mapping, a set or a DataFrame is refused, and so are pandas Series whose indexes differ.
    """
    source_list = as_list(sources, "sources")
    summary_list = as_list(summaries, "summaries")
    check_same_index({"sources": sources, "summaries": summaries, "ids": ids, "references": references})
    if len(source_list) != len(summary_list):
        raise ValueError(f"sources has {len(source_list)} rows but summaries has {len(summary_list)}")
    if not source_list:
        raise ValueError("there are no rows to judge: sources and summaries are empty")
    if ids is None:
        id_list: list[Any] = list(range(len(source_list)))
    else:
        id_list = as_list(ids, "ids")
        if len(id_list) != len(source_list):
            raise ValueError(f"ids has {len(id_list)} rows but sources has {len(source_list)}")
    reference_list: list[Any] = [None] * len(source_list)
    if references is not None:
        reference_list = texts(as_list(references, "references"), "reference", allow_sentence_lists=True)
        if len(reference_list) != len(source_list):
            raise ValueError(f"references has {len(reference_list)} rows but sources has {len(source_list)}")
    problems: list[tuple[str, str]] = []
    seen: dict[str, tuple[int, Any]] = {}  # canonical id -> (first row, id as given)
    for position, (row_id, source, summary, reference) in enumerate(zip(id_list, source_list, summary_list, reference_list)):
        label = f"row {position} (id {row_id!r})"
        problems.extend(id_problems(position, row_id, seen))
        if is_missing(source) or not isinstance(source, str) or not source.strip():
            problems.append((label, f"the source is {'missing' if is_missing(source) else 'empty or not text'} ({type(source).__name__})"))
        elif not any(character.isalnum() for character in source):  # zero-width spaces, NUL, a BOM, "...": no text to check against
            problems.append((label, f"the source has no letter or digit ({len(source)} characters: {source[:20]!r})"))
        if not is_missing(summary) and not isinstance(summary, str):
            problems.append((label, f"the summary is not text ({type(summary).__name__})"))
        sentences = reference if isinstance(reference, (list, tuple)) else [reference]
        fields = {"id": [row_id], "source": [source], "summary": [summary], "reference": sentences}
        problems.extend((label, problem) for problem in unencodable(fields))
    if problems:
        raise RowsRefused("cannot judge these rows", problems)
    # A missing summary (None, NaN) is a model that wrote nothing: an empty summary, scored as defect_empty.
    return [
        RowInput(id=plain_id(row_id), source=source, summary="" if is_missing(summary) else summary, source_key=source_key(source))
        for row_id, source, summary in zip(id_list, source_list, summary_list)
    ]


def unencodable(fields: dict[str, list[Any]]) -> list[str]:
    """Text that cannot be sent as UTF-8 (an unpaired surrogate, e.g. from a bad decode) would fail mid-run."""
    problems = []
    for name, values in fields.items():
        for text in (value for value in values if isinstance(value, str)):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                problems.append(f"the {name} cannot be encoded as UTF-8: {exc.reason} ({text[exc.start]!r} at character {exc.start})")
                break
    return problems


def plain_id(value: Any) -> str | int:
    """The id as the user gave it, as int or str so records serialise; its text is always ``canonical_id(value)``."""
    if isinstance(value, str):
        return value
    stored = canonical_id(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(stored)
    return stored


def judge_rows(
    rows: list[RowInput],
    judge: Judge | None,
    options: JudgingOptions = JudgingOptions(),
    *,
    progress: bool | None = None,
    grounding_cache_dir: Any = DEFAULT_GROUNDING_CACHE,
    claims: bool = True,
    after: After | None = None,
) -> list[RowJudgement]:
    """Judge every row as ``options`` say (``coverage``, ``grounding``, ``max_source_tokens``, ``method``; ``ter`` is the
    reference metrics', not the judge's); a row whose judging failed carries the error and is never given a score.
    ``claims=False`` asks only the key-point passes (a coverage judge whose rows' claims another judge asks);
    ``after``: a task's own request per row, asked within the row's share of the judge's budget (``pipeline.After``).

    ``options.grounding`` adds the model-free check to every row and claim (``grounded``), through the grounding cache
    beside the judge's (``grounding_cache_dir``: another folder, or None for none). ``judge=None`` asks no judge:
    the records carry only the grounding check (``judged`` is False). The grounding cache is opened first: one
    that cannot be read (``StoreUnreadable``) stops the run before any judge call, not after every row was paid for.
    """
    with older_objects_set_aside(len(rows)):  # the judge's loop and the check's scores after it
        return _judge_rows(rows, judge, options, progress, grounding_cache_dir, claims, after)


def _judge_rows(rows: list[RowInput], judge: Judge | None, options: JudgingOptions, progress: bool | None,
                grounding_cache_dir: Any, claims: bool, after: After | None = None) -> list[RowJudgement]:
    store = grounding_cache(judge, grounding_cache_dir) if options.grounding else None
    alongside = None
    try:
        if judge is None:
            judgements = [RowJudgement(id=row.id, source_key=row.source_key, judged=False) for row in rows]
        else:
            # With a cache, the check runs while the judge waits (its results stored, and handed over: what it did
            # not hand over is read back below).
            alongside = grounding_alongside(rows, store) if store is not None else None
            judgements = judge_row_pipelines(rows, judge, coverage=options.coverage, max_source_tokens=options.max_source_tokens,
                                             progress=progress, alongside=alongside, claims=claims, method=options.method,
                                             after=after)
        return ground_judgements(rows, judgements, store, alongside.scored if alongside is not None else None) if options.grounding else judgements
    finally:
        if store is not None:
            store.close()
