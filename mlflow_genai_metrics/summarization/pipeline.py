"""Each row through its passes at its own pace: no row waits for another row's answers.

A row asks for its claims (once more, saying so, when a summary with words got none), then verifies them against
every chunk of its source and checks its source's key points, as soon as its own answers are back. Key points are
asked once per distinct source, by whichever row needs them first, and shared. Every call of every row and pass
goes through the one ``Judge``, whose limiter alone bounds the calls in flight, so the endpoint's slots stay full
until the last row: there is no batch-wide barrier whose tail leaves them idle. The records are exactly those the
passes give whatever the order the answers come back in. A record's usage is split by pass (``usage_by_pass``): the
claim passes, and the key-point passes (its coverage check, and its source's key points on the source's first row).

Under a budget (``max_calls``, ``max_cost_usd``) a row starts only once the budget has set aside what its passes
will take (``row_needs``, ``Budget.earmark``), and its calls draw from that: once the budget is short, the rows
under way finish before new rows start, so half the budget a run needs judges about half its rows, and a row the
budget cannot pay for is a ``budget`` error with no call made. A row of the order check's sample holds its shuffled
requests too; when nothing can leave room for them but its own requests fit, it is judged without its order check.
The order check only measures: its failure never fails the row (``order_pass``). A task's own request for a row
(``After``: the rewrites' instruction check) is set aside and asked within the row's share too, once its passes
succeeded, so a short budget never pays for a row's passes and then refuses the request that finishes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..judge import BudgetExhausted, Judge, JudgeError, JudgeReply, JudgeRequest, Usage, drawing_from, run_sync
from .chunking import combine_verdicts, split_source
from .extraction import extract_claims
from .method import Method
from .order import OrderCheck
from .order_pass import compare_orders, not_asked, order_requests, row_orders
from .passes import check_coverage_request, extract_key_points_request, run_examples, verify_claims_request
from .records import CheckedClaim, CoveredKeyPoint, JudgePass, RowError, RowInput, RowJudgement
from .row_needs import RowNeed, row_need
from .stability import majority_verdict
from .statements import distinct_statements, has_words
from .stored_rows import Asked, RowStore, StoredRow

# Rows under way at once, per slot of the judge: enough to keep every slot busy while rows wait between passes,
# few enough that the first calls go out at once instead of after every row's cache lookup.
ROWS_PER_SLOT = 4


# Claims repeated in a summary are one fact (``statements``): the name the package has long exported for it.
distinct_claims = distinct_statements


@dataclass
class _RowState:
    claims: list[str] | None = None
    duplicates: list[int] = field(default_factory=list)  # per claim kept: copies removed
    verdicts: list[list[list[tuple[str, str]]]] = field(default_factory=list)  # per claim, per repetition, per chunk
    key_points: list[CoveredKeyPoint] | None = None
    usage: dict[JudgePass, Usage] = field(default_factory=dict)  # per pass asked: what its calls for this row cost
    error: RowError | None = None
    order: OrderCheck | None = None  # the order check, on the rows of its sample
    order_room: bool = True  # False: the budget had room for the row's own requests only, not its order check's

    def fail(self, stage: str, reply: JudgeReply) -> None:
        if self.error is None:  # the first failure of a row is its error: the kind, the message, the raw excerpt
            self.error = RowError(stage=stage, error=reply.error)


@dataclass
class _KeyPoints:
    """One source's key points over all its chunks, in order, without repeats; or the first chunk's failure."""

    points: list[str] = field(default_factory=list)
    error: JudgeReply | None = None
    usage: Usage = field(default_factory=Usage)


class Alongside(Protocol):
    """Work done while the judge's requests are in flight (``grounded.GroundingWhileJudging`` on the judge's loop,
    ``grounded.GroundingInAnotherProcess`` beside it): started with the rows, told each row's claims as they are
    extracted, closed when every row is judged, then awaited."""

    async def run(self) -> None: ...

    def claims_ready(self, index: int, claims: list[str]) -> None: ...

    def close(self) -> None: ...


class After(Protocol):
    """A task's own request for a row, asked once the row's passes succeeded, within the row's share of the judge's
    budget (``rewrites``' instruction check): ``request`` gives it (None: none for this row), ``answered`` takes its
    reply. A row read whole from the row store is not asked here (the task asks it after), nor a row that failed."""

    def request(self, index: int) -> JudgeRequest | None: ...

    def answered(self, index: int, reply: JudgeReply) -> None: ...


def judge_row_pipelines(
    rows: Sequence[RowInput],
    judge: Judge,
    *,
    coverage: bool,
    max_source_tokens: int | None,
    progress: bool | None = None,
    claims: bool = True,
    alongside: Alongside | None = None,
    method: Method = Method(),
    after: After | None = None,
) -> list[RowJudgement]:
    """One ``RowJudgement`` per row (in order); only ``JudgeConfigError`` stops the run (answers so far are cached).

    ``claims=False`` asks only the key-point passes (key points and coverage; with ``coverage=True``): the part of
    a row that a key-point judge needs when another judge asks its claims. Its records have no claims.
    ``alongside`` runs on the same loop while the judge waits (its steps between the pipelines' own); ``method``: how
    claims are verified (``stability``, ``order_check``, ``examples``); ``after``: a task's own request per row."""
    return run_sync(_Pipelines(rows, judge, coverage, max_source_tokens, claims, alongside, method, after).run(progress))


class _Pipelines:
    def __init__(self, rows: Sequence[RowInput], judge: Judge, coverage: bool, max_source_tokens: int | None, claims: bool = True,
                 alongside: Alongside | None = None, method: Method = Method(), after: After | None = None) -> None:
        self.rows, self.judge, self.coverage, self.max_source_tokens = rows, judge, coverage, max_source_tokens
        self.claims, self.alongside, self.method, self.after = claims, alongside, method, after
        self.passes: tuple[JudgePass, ...] = (*(("claims",) if claims else ()), *(("key_points",) if coverage else ()))
        self.chunks_of: dict[str, list[str]] = {}
        self.first_row_of: dict[str, int] = {}
        for index, row in enumerate(rows):
            if row.source_key not in self.chunks_of:
                self.chunks_of[row.source_key] = split_source(row.source, max_source_tokens) if max_source_tokens else [row.source]
                self.first_row_of[row.source_key] = index
        self.key_points: dict[str, asyncio.Task[_KeyPoints]] = {}
        self.built: dict[int, RowJudgement] = {}  # each judged row's record, made as it finished (not after the last)
        self.examples = run_examples(method.examples, rows)  # people's corrected verdicts, less those from these rows

    async def run(self, progress: bool | None) -> list[RowJudgement]:
        from tqdm.auto import tqdm

        show = self.judge.progress if progress is None else progress
        bar = tqdm(total=len(self.rows), desc="judging rows", unit="row", disable=None if show is None else not show, leave=False)
        # Whole rows are stored with their claims: a row of key points alone replays its transcripts instead.
        stores = self.judge.cache is not None and self.claims
        store = RowStore(self.judge, self.method, coverage=self.coverage, max_source_tokens=self.max_source_tokens, examples=self.examples) if stores else None
        try:
            keys = [store.key(row) for row in self.rows] if store is not None else []
            stored = store.read(keys) if store is not None else {}
            states = [_RowState(usage={name: Usage() for name in self.passes}) for _ in self.rows]
            found = {index: stored[key] for index, key in enumerate(keys) if key in stored}
            bar.update(len(found))
            judged = [index for index in range(len(self.rows)) if index not in found]
            side = asyncio.create_task(self.alongside.run()) if self.alongside is not None else None
            try:
                await self._judge_rows(judged, states, bar)
            except BaseException:
                if side is not None:  # the run stops here (a configuration error, Ctrl-C): so does the work beside it
                    side.cancel()
                    await asyncio.gather(side, return_exceptions=True)
                raise
            if side is not None:
                self.alongside.close()  # type: ignore[union-attr]
                await side
            # What a row's own requests counted, pass by pass, before its source's key points are added to its usage.
            # A row whose order check failed is not stored whole: a rerun asks its shuffled requests again.
            asked = {index: {name: Asked.of(usage) for name, usage in states[index].usage.items()}
                     for index in judged if states[index].error is None and (states[index].order is None or not states[index].order.failed)}
            records = self._records(states, found)
            if store is not None:
                store.write([(keys[index], self._stored(records[index], own)) for index, own in asked.items()])
        finally:
            bar.close()
            if store is not None:
                store.close()
        return records

    def _records(self, states: list[_RowState], found: dict[int, StoredRow]) -> list[RowJudgement]:
        """Every row's record: those read whole counted as their replayed requests would be; a source's key points
        paid once, by its first row (when every row of the source was read whole, as their stored requests)."""
        for index, row in found.items():
            states[index].usage = {"claims": row.asked.count_cached(self.judge)}
            if self.coverage:
                states[index].usage["key_points"] = (row.coverage_asked or Asked()).count_cached(self.judge)
        stored_key_points = {self.rows[index].source_key: row.key_points_asked for index, row in found.items()}
        for key, first in self.first_row_of.items():
            if key in self.key_points:
                states[first].usage["key_points"].add(self.key_points[key].result().usage)
            elif self.coverage and stored_key_points.get(key) is not None:
                states[first].usage["key_points"].add(stored_key_points[key].count_cached(self.judge))
            else:
                continue
            if first in self.built:  # its usage has changed since
                self.built[first] = self.built[first].model_copy(update=_usage(states[first]))
        return [_stored_record(self.rows[index], found[index], state) if index in found
                else self.built[index] if index in self.built else _record(self.rows[index], state)
                for index, state in enumerate(states)]

    async def _judge_rows(self, pending: list[int], states: list[_RowState], bar: Any) -> None:
        next_row = iter(pending)

        async def worker(group: asyncio.TaskGroup) -> None:
            for index in next_row:
                await self._row(index, states[index], group)
                self.built[index] = _record(self.rows[index], states[index])  # while the judge answers other rows
                bar.update(1)

        try:
            async with asyncio.TaskGroup() as group:  # a configuration error cancels every other row
                for _ in range(min(len(pending), ROWS_PER_SLOT * self.judge.max_concurrency)):
                    group.create_task(worker(group))
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None  # the first failure, as the synchronous path raised it

    def _stored(self, record: RowJudgement, asked: dict[JudgePass, Asked]) -> StoredRow:
        """What to store of a row judged now: its record, what its own requests counted (its claim passes, its
        coverage check), and its source's key points'."""
        key_points = self.key_points.get(record.source_key)
        return StoredRow(claims=record.claims, key_points=record.key_points, order_check=record.order_check, asked=asked["claims"],
                         coverage_asked=asked.get("key_points"),
                         key_points_asked=Asked.of(key_points.result().usage) if key_points is not None else None)

    async def _key_points(self, key: str) -> _KeyPoints:
        found = _KeyPoints()
        replies = await _each(self.judge.aask(extract_key_points_request(chunk)) for chunk in self.chunks_of[key])
        for reply in replies:
            found.usage.add(reply.usage)
            if reply.ok:
                found.points.extend(reply.answer.key_points)
            elif found.error is None:
                found.error = reply
        found.points = distinct_statements(found.points)[0]  # one point twice is one place in coverage's denominator
        return found

    async def _row(self, index: int, state: _RowState, group: asyncio.TaskGroup) -> None:
        """Judge the row once the judge's budget (if any) has set aside what it needs (its task's own request
        included); a row it cannot pay for is a ``budget`` error, with no call made."""
        budget = self.judge.budget
        extra = self.after.request(index) if self.after is not None else None
        if budget is None:
            await self._passes(index, state, group)
            return await self._after(index, state, extra)
        need = self._need(self.rows[index])
        if extra is not None:
            need = RowNeed(need.calls + 1, need.cost_usd + self.judge.worst_cost(extra), need.order_calls, need.order_cost_usd)
        try:
            earmark = await budget.earmark(need.calls, need.cost_usd, optional_calls=need.order_calls, optional_cost_usd=need.order_cost_usd)
        except BudgetExhausted as exc:
            message = f"not sent: the judge's budget cannot pay for this row's {need.calls} calls ({exc})"
            state.error = RowError(stage="judging", error=JudgeError(kind="budget", message=message, attempts=0))
            return
        state.order_room = earmark.optional
        try:
            with drawing_from(earmark):
                await self._passes(index, state, group)
                await self._after(index, state, extra)
        finally:
            budget.close(earmark)

    async def _after(self, index: int, state: _RowState, request: JudgeRequest | None) -> None:
        if request is not None and state.error is None:
            self.after.answered(index, await self.judge.aask(request))  # type: ignore[union-attr]

    def _need(self, row: RowInput) -> RowNeed:
        """What the row will take of the budget: its source's key points too, unless another row asked for them."""
        asked = self.key_points.get(row.source_key)
        answered = asked is not None and asked.done() and not asked.cancelled() and asked.exception() is None
        known = asked.result().points or None if answered else None  # type: ignore[union-attr]
        return row_need(self.judge, self.method, row, self.chunks_of[row.source_key], coverage=self.coverage,
                        asks_key_points=asked is None, key_points=known, claims=self.claims, examples=self.examples)

    async def _passes(self, index: int, state: _RowState, group: asyncio.TaskGroup) -> None:
        row = self.rows[index]
        if self.coverage and row.source_key not in self.key_points:  # asked by the source's first row, then shared
            self.key_points[row.source_key] = group.create_task(self._key_points(row.source_key))
        if self.claims and has_words(row.summary):
            await self._claims(row, state)
            if state.claims and self.alongside is not None:
                self.alongside.claims_ready(index, state.claims)
        else:
            state.claims = []  # an empty summary makes no claim: no call needed (nor when claims are not asked)
        key_points = await self.key_points[row.source_key] if self.coverage else None
        if key_points is not None and key_points.error is not None:
            state.fail("key-point extraction (for this row's source)", key_points.error)
        if state.error is not None:
            return
        chunks = self.chunks_of[row.source_key]
        asks: list[Awaitable[JudgeReply]] = []
        repetitions = self.method.stability
        if state.claims:  # each chunk asked once per repetition (``stability``), repetition by repetition
            asks += [self.judge.aask(verify_claims_request(chunk, state.claims, self.examples).repeated(r)) for r in range(repetitions) for chunk in chunks]
        points = key_points.points if key_points is not None else []
        covering = key_points is not None and has_words(row.summary)
        if covering:
            asks.append(self.judge.aask(check_coverage_request(points, row.summary)))
        elif key_points is not None:
            state.key_points = [CoveredKeyPoint(key_point=p, covered=False, reason="The summary is empty.") for p in points]
        orders = row_orders(row, state.claims or [], points if covering else [], self.method.order_check)
        shuffled = order_requests(row, chunks, state.claims or [], points, orders, self.examples) if state.order_room else []
        replies = await _each([*asks, *(self.judge.aask(request) for request in shuffled)])
        replies, order_replies = replies[: len(asks)], replies[len(asks):]
        # Taken in the order asked, not the order answered: a row's error is the same whichever came back first.
        if state.claims:
            self._take_verdicts(state, replies[: len(chunks) * repetitions], len(chunks))
        if covering:
            self._take_coverage(state, replies[-1], points)
        if shuffled:  # its failure is the order check's alone: the row's verdicts stand
            state.order = compare_orders(order_replies, orders, len(chunks), state.usage,
                                         state.verdicts if state.error is None else None, state.key_points)
        elif orders != (None, None):
            state.order = not_asked("the judge's budget had room for this row's own requests only")

    async def _claims(self, row: RowInput, state: _RowState) -> None:
        found = await extract_claims(self.judge, row.summary)
        state.usage["claims"].add(found.usage)
        if found.error is not None:
            state.error = state.error or found.error
        else:
            state.claims, state.duplicates = found.claims, found.duplicates

    @staticmethod
    def _take_verdicts(state: _RowState, replies: list[JudgeReply], chunks: int) -> None:
        repetitions = len(replies) // chunks
        state.verdicts = [[[] for _ in range(repetitions)] for _ in state.claims or []]
        for position, reply in enumerate(replies):
            state.usage["claims"].add(reply.usage)
            if not reply.ok:
                state.fail("claim verification", reply)
                continue
            for claim_verdicts, check in zip(state.verdicts, reply.answer.verdicts):
                claim_verdicts[position // chunks].append((check.verdict, check.reason))

    @staticmethod
    def _take_coverage(state: _RowState, reply: JudgeReply, points: list[str]) -> None:
        state.usage["key_points"].add(reply.usage)
        if not reply.ok:
            state.fail("coverage check", reply)
            return
        state.key_points = [
            CoveredKeyPoint(key_point=point, covered=check.covered == "yes", reason=check.reason)
            for point, check in zip(points, reply.answer.covered)
        ]


async def _each(awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await several at once, results in order; one awaitable is awaited directly (no task to make)."""
    pending = list(awaitables)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


def _usage(state: _RowState) -> dict[str, Any]:
    """A record's usage fields: the row's total and its parts by pass."""
    return {"usage": Usage.total(list(state.usage.values())), "usage_by_pass": state.usage}


def _stored_record(row: RowInput, stored: StoredRow, state: _RowState) -> RowJudgement:
    return RowJudgement(id=row.id, source_key=row.source_key, claims=stored.claims, key_points=stored.key_points,
                        order_check=stored.order_check, **_usage(state))


def _record(row: RowInput, state: _RowState) -> RowJudgement:
    if state.error is not None:
        return RowJudgement(id=row.id, source_key=row.source_key, error=state.error, **_usage(state))
    claims = []
    for claim, duplicates, per_repetition in zip(state.claims or [], state.duplicates, state.verdicts):
        verdict, reason, agreement = majority_verdict([combine_verdicts(per_chunk) for per_chunk in per_repetition])
        claims.append(CheckedClaim(claim=claim, verdict=verdict, reason=reason, duplicates=duplicates,
                                   agreement=agreement if len(per_repetition) > 1 else None))
    return RowJudgement(id=row.id, source_key=row.source_key, claims=claims, key_points=state.key_points, order_check=state.order,
                        **_usage(state))
