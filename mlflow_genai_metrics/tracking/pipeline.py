"""``TaskPipeline``: the judgements of one evaluation of one task, the shape every task's MLflow side takes.

A task (summaries, answers, rewrites, or one of your own) says four things about its rows here: how one is read
from MLflow's ``inputs``/``outputs``/``expectations`` and its trace (``parse``), what identifies its texts
(``texts``), how a batch of them is judged (``ask``: the task's passes of the claim engine) and what result a
run's rows give (``build``: the task's tables, metrics with intervals, signature). Everything else is shared:
each row judged once however many scorers read it (whichever asks first; the others wait for it), the judge's
preflight once per evaluation, the judge's own calls never traced into the evaluation, the rows of a result in a
stable order with their ids checked. The MLflow adapter above it (``rows``, ``judges``, ``evaluate``) reads any
task through this shape, so adding a task adds a subclass and its scorers, not another adapter.

A pipeline lives as long as the call that made it: nothing here is kept for the process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections import defaultdict
from collections.abc import Hashable, Sequence
from concurrent.futures import Future
from typing import Any, ClassVar

import mlflow

from ..judge import Judge, JudgeConfigError, JudgeError, Preflight, Usage
from ..stats import StatisticsOptions
from ..summarization.ids import canonical_id
from ..summarization.records import RowError, RowJudgement


class TaskPipeline:
    """One judgement per row for one judge, one task and one evaluation (see the module's docstring). ``keys``: where
    the task's texts are in a row (it has at least ``id``); ``preflight``: one shared with other pipelines (a plain
    scorer's, checked once for all its rows)."""

    holding: ClassVar[str] = "a row"  # what a trace must hold to be one of this task's rows, in words
    known_by: ClassVar[str] = "source"  # what a row without an id is known by (its hash), in words

    def __init__(self, judge: Judge | None, *, keys: Any, statistics: StatisticsOptions = StatisticsOptions(),
                 preflight: Preflight | None = None):
        self.judge, self.keys, self.statistics = judge, keys, statistics
        self.preflight = preflight if preflight is not None else Preflight(judge)
        self._judged: dict[Hashable, Future[Any]] = {}
        self._lock = threading.Lock()
        self._serial: defaultdict[Hashable, threading.Lock] = defaultdict(threading.Lock)
        self._carriers: dict[Hashable, str] = {}  # texts -> the row id whose judgement carries their cost

    # -- what a task says ------------------------------------------------------------------------------------------

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> Any:
        """The row in MLflow's terms (an object with ``row.id``, ``trace_id`` and ``id_given``, and a ``failure`` field
        defaulting to None: ``read``); ``ValueError`` naming what is wrong. ``outputs`` is None where ``evaluate`` reads
        a row before ``predict_fn`` answers, or where the application failed: read it as an empty output."""
        raise NotImplementedError

    judged_as: ClassVar[type[RowJudgement]] = RowJudgement  # the task's judgement (a failed row's too)

    def read(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> Any:
        """``parse``, with what the application raised on the row (``application_failure``) kept as its ``failure``:
        such a row is failed (its cards errors, ``judge_error_rate`` counts it), never judged as an empty output (a
        ``predict_fn`` that raised once gave its row the cards of an empty summary: "no claim", coverage 0). A task
        whose rows have no ``failure`` field refuses the row instead, naming the failure."""
        failure = application_failure(trace)
        try:
            parsed = self.parse(inputs, outputs, expectations, trace)
        except ValueError as error:
            if failure is None:
                raise
            raise ValueError(f"the application failed on this row ({failure}), and the row cannot be read without it: {error}") from error
        if failure is None:
            return parsed
        if not any(field.name == "failure" for field in dataclasses.fields(parsed)):
            raise ValueError(f"the application failed on this row ({failure}): there is no output to judge")
        return dataclasses.replace(parsed, failure=failure)

    def failed(self, parsed: Any) -> RowJudgement:
        """The judgement of a row the application failed on: no judge asked, no grounding, the error."""
        error = RowError(stage="the application", error=JudgeError(kind="application", message=parsed.failure))
        return self.judged_as(id=parsed.row.id, source_key=parsed.row.source_key, error=error)

    def texts(self, parsed: Any) -> Hashable:
        """What identifies a row's texts: MLflow's copies of one row, handed to each scorer, are judged once."""
        raise NotImplementedError

    def ask(self, rows: list[Any]) -> list[Any]:
        """Judge these rows in one batch: one judgement each, in order."""
        raise NotImplementedError

    def build(self, rows: list[Any], judgements: list[Any]) -> Any:
        """The run's result from its rows (in ``order``) and their judgements."""
        raise NotImplementedError

    def order(self, parsed: Any) -> Any:
        """The sort key of a row in a result."""
        raise NotImplementedError

    def repeated_ids(self, rows: Sequence[Any]) -> list[str]:
        """Each row whose id another row has already, in words (nothing: every id is unique): ``repeated_ids``."""
        return repeated_ids(rows, known_by=self.known_by, id_key=self.keys.id)

    def serial(self, parsed: Any) -> Hashable | None:
        """Rows with one key here are judged one at a time (None: any row at once)."""
        return None

    # -- shared ------------------------------------------------------------------------------------------------------

    def check(self) -> None:
        """The preflight, once: a configuration error is raised now and for every later row, with no further call."""
        self.preflight.check()

    def unique(self, rows: Sequence[Any]) -> None:
        """Refuse rows whose ids repeat (``ValueError`` naming each): one row's figures would count twice."""
        refuse_repeated(self.repeated_ids(rows))

    def judgement(self, parsed: Any) -> Any:
        """The row's judgement under its own id, from any thread."""
        self.check()
        key = self.serial(parsed)
        try:
            with self._serial[key] if key is not None else contextlib.nullcontext():
                return self._judgements([parsed])[0]
        except JudgeConfigError as error:
            self.preflight.failed(error)
            raise

    def judge_all(self, rows: Sequence[Any]) -> list[Any]:
        """Judge many rows in one batch (the judge's concurrency), before any is read."""
        self.check()
        return self._judgements(rows)

    def result(self, rows: Sequence[Any]) -> Any:
        """The result of these rows (judging any not judged yet); rows whose ids repeat are refused, never renamed."""
        ordered = sorted(rows, key=self.order)
        self.unique(ordered)
        return self.build(ordered, self._judgements(ordered))

    def _judgements(self, rows: Sequence[Any]) -> list[Any]:
        mine: dict[Hashable, tuple[Any, Future[Any]]] = {}
        keys = [("failed", failure, self.texts(parsed)) if (failure := getattr(parsed, "failure", None)) else self.texts(parsed) for parsed in rows]
        with self._lock:
            for key, parsed in zip(keys, rows):
                if key not in self._judged:
                    self._judged[key] = Future()
                    mine[key] = (parsed, self._judged[key])
            futures = [self._judged[key] for key in keys]
        for key in [key for key, (parsed, _) in mine.items() if getattr(parsed, "failure", None)]:
            parsed, future = mine.pop(key)
            future.set_result(self.failed(parsed))
        if mine:
            try:
                with mlflow.tracing.context(enabled=False):  # the judge's calls are not traces of the evaluation
                    judged = self.ask([parsed for parsed, _ in mine.values()])
            except BaseException as error:
                with self._lock:
                    for key, (_, future) in mine.items():
                        future.set_exception(error)
                        self._judged.pop(key, None)  # asked again by a later row, not failed for good
                raise
            for (_, future), judgement in zip(mine.values(), judged):
                future.set_result(judgement)
        judged = []
        for key, parsed, future in zip(keys, rows, futures):
            judgement = future.result()
            with self._lock:  # the first row to hold these texts carries what judging them cost; another id shares it
                carrier = self._carriers.setdefault(key, canonical_id(parsed.row.id))
            shared = {} if carrier == canonical_id(parsed.row.id) else {
                "usage": _shared(judgement.usage), "usage_by_pass": {p: _shared(u) for p, u in judgement.usage_by_pass.items()}}
            judged.append(judgement.model_copy(update={"id": parsed.row.id, **shared}))
        return judged


def _shared(usage: Usage) -> Usage:
    """What a row cost whose judgement another row of the evaluation paid for (the same texts under another id):
    its requests, answered with no call, as from the cache (two such rows once logged 16 calls for 12 sent)."""
    return Usage(requests=usage.requests, cache_hits=usage.requests, cost_usd=None if usage.cost_usd is None else 0.0)


def root_span(trace: Any) -> Any:
    """A trace's root span (None when it has none, or no spans were read)."""
    spans = getattr(getattr(trace, "data", None), "spans", None) or []
    return next((span for span in spans if span.parent_id is None), None)


def application_failure(trace: Any) -> str | None:
    """What the application raised on a row, in words, when its trace's root span ended in an error with no output
    (``mlflow.genai.evaluate``'s ``predict_fn`` raised); None when it answered, or there is no trace."""
    root = root_span(trace)
    status = getattr(getattr(root, "status", None), "status_code", None)
    if root is None or root.outputs is not None or str(getattr(status, "value", status)) != "ERROR":
        return None
    for event in root.events or []:
        if event.name == "exception":
            said = event.attributes or {}
            return f"{said.get('exception.type', 'an exception')}: {said.get('exception.message', '')}".rstrip(": ")
    return "its trace ended in an error, with no output"


def missing(value: Any) -> bool:
    """No value: None, or the NaN MLflow turns a None into."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def input_text(inputs: Any, key: str, what: str, where: str = "") -> tuple[str, dict[str, Any]]:
    """A row's main text (``inputs`` itself, a string, or ``inputs[key]``) and the rest of its inputs (``{}`` when
    ``inputs`` is a string); ``ValueError`` naming what was found instead (``where``: the trace, in words)."""
    if isinstance(inputs, str):
        return inputs, {}
    if isinstance(inputs, dict) and isinstance(inputs.get(key), str):
        return inputs[key], inputs
    if isinstance(inputs, dict) and key in inputs:  # there, but no text (an empty CSV cell is NaN)
        value = inputs[key]
        raise ValueError(f"the {what} `inputs[{key!r}]` is {'missing' if missing(value) else type(value).__name__}, not text{where}")
    found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
    raise ValueError(f"the {what} must be `inputs` (a string) or `inputs[{key!r}]`; got {found}{where}")


def output_text(outputs: Any, key: str, what: str, where: str = "") -> str | None:
    """A row's output text (``outputs``, a string, or ``outputs[key]``; None when it has none: ``outputs`` or
    ``outputs[key]`` is None); ``ValueError`` for anything else. A dict without ``key`` is refused, not read as no
    text: an application's reply under another key (``{"response": ...}``) would be judged an empty one."""
    if isinstance(outputs, dict) and key not in outputs:
        keys = sorted(map(str, outputs))
        found = f"a dict with keys {keys[:10]}{' ...' if len(keys) > 10 else ''} and no {key!r}" if keys else "an empty dict"
        raise ValueError(f"`outputs` must be the {what} text (or {{{key!r}: text}}); got {found}{where}")
    text = outputs[key] if isinstance(outputs, dict) else outputs
    if not missing(text) and not isinstance(text, str):
        found = f"{{{key!r}: {type(text).__name__}}}" if isinstance(outputs, dict) else type(outputs).__name__
        raise ValueError(f"`outputs` must be the {what} text (or {{{key!r}: text}}); got {found}{where}")
    return None if missing(text) else text


def repeated_ids(rows: Sequence[Any], *, known_by: str = "source", id_key: str = "id") -> list[str]:
    """Each row whose id another row has already, in words (nothing: every id is unique). A row is named by its
    trace, else by its position; a row without an id is known by the hash of its ``known_by`` (so one source pairs
    up across runs), so two rows of one source need ids."""
    found, seen = [], {}
    for position, parsed in enumerate(rows):
        label = f"the row of trace {parsed.trace_id}" if parsed.trace_id else f"row {position}"
        stored = canonical_id(parsed.row.id)
        if stored not in seen:
            seen[stored] = (label, parsed)
            continue
        first_label, first = seen[stored]
        if parsed.id_given or first.id_given:
            found.append(f"{label} (id {parsed.row.id!r}): the id repeats {first_label} (id {first.row.id!r}); both are "
                         f"stored as {stored!r}; ids must be unique")
        else:
            found.append(f"{label} (no id): its {known_by} is that of {first_label} (no id), and a row without an id is "
                         f"known by its {known_by}'s hash ({stored!r}); ids must be unique: give each row an id "
                         f"(inputs[{id_key!r}])")
    return found


def refuse_repeated(found: list[str]) -> None:
    """``ValueError`` naming each repeated id ``repeated_ids`` found (the first 20), if any."""
    if found:
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise ValueError("cannot judge these rows:\n  " + "\n  ".join(found[:20]) + more)
