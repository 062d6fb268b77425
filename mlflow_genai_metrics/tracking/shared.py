"""One judgement per row, however many MLflow metrics or scorers ask for it.

MLflow calls each metric function (and each scorer) separately, and tests every metric on the first row before
the full pass. ``SharedJudgement`` keeps each row's ``RowJudgement`` (keyed by the texts, not by position), so the
row is judged once; the judge's cache then makes a later identical evaluation free as well.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from typing import Any

from ..judge import Judge, Usage
from ..summarization.api import build_result, source_token_budget
from ..summarization.judging import judge_rows
from ..summarization.records import RowInput, RowJudgement
from ..summarization.result import SummarizationResult

__all__ = ["SharedJudgement"]


def _content_key(row: RowInput) -> tuple[str, str]:
    return row.source_key, hashlib.sha256(row.summary.encode("utf-8")).hexdigest()


class SharedJudgement:
    """Memoised judgements and results for one judge and one set of options."""

    def __init__(
        self,
        judge: Judge | None,
        *,
        coverage: bool = True,
        grounding: bool = True,
        ter: bool = False,
        max_source_tokens: int | None = None,
        progress: bool | None = None,
    ):
        self.judge = judge  # None: the grounding check alone, no judge call
        self.coverage = coverage
        self.grounding = grounding
        self.ter = ter
        self.max_source_tokens = max_source_tokens if max_source_tokens is not None else source_token_budget(judge)
        self.progress = progress
        self._judgements: dict[tuple[str, str], RowJudgement] = {}
        self._judged_in: dict[tuple[str, str], str | None] = {}  # the session (run) each row was judged in
        self.session: str | None = None
        self._results: OrderedDict[str, SummarizationResult] = OrderedDict()
        self._lock = threading.Lock()
        self._source_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def judgements(self, rows: Sequence[RowInput]) -> list[RowJudgement]:
        """Each row's judgement, judging (in one batch) only the rows not judged before."""
        with self._lock:
            missing = {}
            for row in rows:
                key = _content_key(row)
                if key not in self._judgements:
                    missing.setdefault(key, row)
        if missing:
            batch = list(missing.values())
            judged = judge_rows(
                batch, self.judge, coverage=self.coverage, max_source_tokens=self.max_source_tokens, progress=self.progress,
                grounding=self.grounding,
            )
            with self._lock:
                for key, judgement in zip(missing, judged):
                    if key not in self._judgements:
                        self._judgements[key] = judgement
                        self._judged_in[key] = self.session
        with self._lock:
            return [self._for_session(_content_key(row), row.id) for row in rows]

    def _for_session(self, key: tuple[str, str], row_id: str | int) -> RowJudgement:
        """A row judged in an earlier session (run) costs this one nothing: its usage shows as cache hits."""
        judgement = self._judgements[key]
        update: dict[str, Any] = {"id": row_id}
        if self._judged_in[key] != self.session:
            update["usage"] = self._cached(judgement.usage)
            update["usage_by_pass"] = {name: self._cached(usage) for name, usage in judgement.usage_by_pass.items()}
        return judgement.model_copy(update=update)

    def _cached(self, usage: Usage) -> Usage:
        return Usage(
            requests=usage.requests, cache_hits=usage.requests, cost_usd=0.0 if self.judge is not None and self.judge.prices else None,
            reported_models=usage.reported_models, response_modes=usage.response_modes,
        )

    def begin_session(self, session: str | None) -> None:
        """Start billing judge usage to a new session (an MLflow run); results are rebuilt for it."""
        with self._lock:
            if session != self.session:
                self.session = session
                self._results.clear()

    def judgement(self, row: RowInput) -> RowJudgement:
        """One row, from any thread: rows of the same source are judged one at a time, so its key points are
        asked for once and then come from the cache."""
        with self._source_locks[row.source_key]:
            return self.judgements([row])[0]

    def result(
        self,
        rows: Sequence[RowInput],
        *,
        references: Sequence[Any] | None = None,
        extra_columns: dict[str, Sequence[Any]] | None = None,
    ) -> SummarizationResult:
        """The ``SummarizationResult`` for these rows, built once per distinct input."""
        fingerprint = hashlib.sha256(
            repr(([(r.id, *_content_key(r)) for r in rows], references, extra_columns)).encode("utf-8")
        ).hexdigest()
        with self._lock:
            cached = self._results.get(fingerprint)
        if cached is not None:
            return cached
        result = build_result(
            rows,
            self.judgements(rows),
            judge=self.judge,
            coverage=self.coverage,
            grounding=self.grounding,
            max_source_tokens=self.max_source_tokens,
            references=references,
            extra_columns=extra_columns,
            ter=self.ter,
        )
        with self._lock:
            self._results[fingerprint] = result
            while len(self._results) > 8:
                self._results.popitem(last=False)
        return result
