"""Each answer through its passes at its own pace, every call through the one ``Judge`` (its limiter alone bounds the
calls in flight, its cache answers an identical rerun).

Per row, at once: the answer's claims (``summarization.extraction``), then their verification against each chunk of
the passages (``verify_passages``; with the judge's ``stability`` above 1 asked that many times, as distinct requests,
the majority kept and its share of the repetitions in the claim's ``agreement``, as a summary's; with its
``order_check``, the claims of a fixed sample of rows verified again in a shuffled order, each verdict compared with
the row's own first one: ``order_checked``, ``order_changed``, as a summary's, and a failed shuffled request fails
the check alone, never the row; with its ``examples``, people's corrected verdicts most like the claims shown, never
one from a passage or answer of the rows being judged); the answer's relevance to the question; and, with an expected answer, its facts,
then their check against the passages and against the answer. A claim's verdicts over the chunks combine as a
summary's do over a source's chunks (yes in any chunk, else no in any, else idk), taking only verdicts whose quote is
in the passage they cite: a yes or no whose quote is not there counts as idk, and is kept as the claim's verdict
(``quote_found`` False) when no chunk decides it, so that it is counted. The first failure of a row, in the order
claims, relevance, facts, is its error; only ``JudgeConfigError`` stops the run (answers so far are cached).

An empty answer makes no claim and addresses nothing (relevance no), with no call; no passage at all makes every
claim and fact idk, with no verification call. With a budget on the judge, each row first sets aside what its
passes will take (``answer_need``, ``Budget.earmark``), as a summary's does: a short budget finishes the rows it
starts, and a row it cannot pay for is a ``budget`` error with no call made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..judge import BudgetExhausted, ExampleSet, Judge, JudgeError, JudgeReply, JudgeRequest, Usage, drawing_from, run_sync
from ..summarization.extraction import extract_claims
from ..summarization.method import Method
from ..summarization.order import OrderCheck, changed_answers, in_sample, shuffled_order
from ..summarization.order_pass import CLAIMS_STAGE, not_asked
from ..summarization.passes import MAX_CLAIMS, extract_claims_request, run_examples
from ..summarization.records import CheckedClaim, JudgePass, RowError
from ..summarization.row_needs import WORDS_PER_CLAIM, RowNeed, likely_statements
from ..summarization.stability import majority_verdict
from ..summarization.statements import distinct_statements, has_words
from .passages import PassageChunk, chunk_passages, quote_found
from .passes import MAX_FACTS, ClaimCitation, expected_facts_request, relevance_request, verify_passages_request
from .records import AnswerInput, AnswerJudgement, AnswerRelevance, Cited, FactCheck

ROWS_PER_SLOT = 4  # rows under way per slot of the judge, as for summaries
PARTS: frozenset[str] = frozenset({"claims", "relevance", "facts"})  # a row's passes; a scorer of one card asks its own alone
NO_PASSAGE = "No passage was retrieved to check it against."
EMPTY_ANSWER = "The answer is empty."


def judge_answer_pipelines(rows: Sequence[AnswerInput], judge: Judge, *, max_source_tokens: int | None,
                           progress: bool | None = None, method: Method = Method(), parts: frozenset[str] = PARTS) -> list[AnswerJudgement]:
    """One ``AnswerJudgement`` per row, in order, its claims verified as ``method`` says; ``parts``: the passes asked
    (``PARTS``: all; a part not asked is left None, or no claims)."""
    unknown = sorted(set(parts) - PARTS)
    if unknown or not parts:
        raise ValueError(f"parts must be some of {sorted(PARTS)}; got {sorted(parts)}")
    return run_sync(_Answers(rows, judge, max_source_tokens, method, frozenset(parts)).run(progress), rows=len(rows))


def answer_need(judge: Judge, method: Method, row: AnswerInput, chunks: list[PassageChunk], examples: ExampleSet | None = None,
                parts: frozenset[str] = PARTS) -> RowNeed:
    """What judging ``row``'s ``parts`` will take of the judge's budget when every pass answers: its claims (one call)
    and their verification (one per chunk of passages, ``stability`` times), its relevance (one), and with an expected
    answer its facts (one), their check against each chunk and against the answer (one). Statements not known yet are
    priced by stand-ins of the likely size (``summarization.row_needs``); retries and repair turns draw from what is
    free."""
    requests: list[JudgeRequest] = []
    shuffled: list[JudgeRequest] = []
    if has_words(row.answer) and "claims" in parts:
        likely = likely_statements(row.answer, WORDS_PER_CLAIM, MAX_CLAIMS)
        requests += [extract_claims_request(row.answer),
                     *(verify_passages_request(chunk, likely, examples).repeated(r) for r in range(method.stability) for chunk in chunks)]
        if chunks and in_sample(row.source_key, row.answer, method.order_check):  # the shuffled verification: optional
            shuffled = [verify_passages_request(chunk, likely, examples) for chunk in chunks]
    if has_words(row.answer) and "relevance" in parts:
        requests.append(relevance_request(row.question, row.answer))
    if row.expected is not None and has_words(row.expected) and "facts" in parts:
        facts = likely_statements(row.expected, WORDS_PER_CLAIM, MAX_FACTS)
        requests += [expected_facts_request(row.question, row.expected), *(verify_passages_request(chunk, facts) for chunk in chunks)]
        if has_words(row.answer):
            requests.append(verify_passages_request(PassageChunk((1,), (row.answer,)), facts))
    return RowNeed(len(requests), sum(judge.worst_cost(request) for request in requests),
                   order_calls=len(shuffled), order_cost_usd=sum(judge.worst_cost(request) for request in shuffled))


def cite(check: ClaimCitation, chunk: PassageChunk) -> Cited:
    """One verdict of a chunk, its quote checked against the passage it cites: a yes or no whose passage is not in
    the chunk, or whose quote is not in that passage, is idk (``quote_found`` False, ``judge_verdict`` the judge's)."""
    if check.verdict == "idk":
        return Cited(verdict="idk", reason=check.reason)
    cited = [text for number, text in zip(chunk.numbers, chunk.texts) if number == check.passage]
    if any(quote_found(check.quote, text) for text in cited):
        return Cited(verdict=check.verdict, reason=check.reason, passage=check.passage, quote=check.quote, quote_found=True)
    return Cited(verdict="idk", reason=check.reason, passage=check.passage or None, quote=check.quote, quote_found=False,
                 judge_verdict=check.verdict)


def combine_cited(per_chunk: Sequence[Cited]) -> Cited:
    """A statement's verdict over the chunks: a quoted yes, else a quoted no, else a failed quote, else idk."""
    for wanted in ("yes", "no"):
        for cited in per_chunk:
            if cited.verdict == wanted:
                return cited
    return next((cited for cited in per_chunk if cited.quote_found is False), per_chunk[0])


def majority_cited(per_repetition: Sequence[Cited]) -> tuple[Cited, float]:
    """A statement's verdicts over repeated verifications -> the majority's (its first repetition's passage, quote
    and reason) and the share of repetitions that gave it; idk with the first reason when there is no majority
    (``summarization.stability.majority_verdict``)."""
    verdict, reason, agreement = majority_verdict([(cited.verdict, cited.reason) for cited in per_repetition])
    chosen = next((cited for cited in per_repetition if cited.verdict == verdict), None)
    return (chosen if chosen is not None else Cited(verdict="idk", reason=reason)), agreement


@dataclass
class _Row:
    usage: dict[JudgePass, Usage]
    errors: dict[str, RowError] = field(default_factory=dict)  # by part: claims, relevance, facts
    order: OrderCheck | None = None  # the order check, on the rows of its sample
    order_room: bool = True  # False: the budget had room for the row's own requests only, not its order check's


def claim_order(row: AnswerInput, claims: Sequence[str], chunks: Sequence[PassageChunk], share: float) -> list[int] | None:
    """The shuffled order the order check verifies the answer's claims in again (``summarization.order``), when the
    row is in its sample and there are two claims or more and a passage to check them against; else None."""
    if len(claims) < 2 or not chunks or not in_sample(row.source_key, row.answer, share):
        return None
    return shuffled_order(len(claims), row.source_key, row.answer)


def compare_cited_orders(replies: Sequence[JudgeReply], chunks: Sequence[PassageChunk], order: Sequence[int],
                         original: Sequence[str]) -> OrderCheck:
    """The order check of an answer's claims: each claim's verdict over the chunks in the shuffled requests
    (``replies``, one per chunk; quotes checked as in the row's own) beside its verdict in the row's own first
    verification (``original``, by position). A failed reply fails the check, never the row."""
    failed = next((reply for reply in replies if not reply.ok), None)
    if failed is not None:
        return OrderCheck(failed=str(RowError(stage=CLAIMS_STAGE, error=failed.error)))
    per_chunk = [[cite(check, chunk) for check in reply.answer.verdicts] for reply, chunk in zip(replies, chunks)]
    shuffled = [combine_cited([chunk[j] for chunk in per_chunk]).verdict for j in range(len(order))]
    return OrderCheck(checked=len(order), changed=changed_answers(original, shuffled, order))


class _Answers:
    def __init__(self, rows: Sequence[AnswerInput], judge: Judge, max_source_tokens: int | None, method: Method,
                 parts: frozenset[str] = PARTS) -> None:
        self.rows, self.judge, self.method, self.parts = rows, judge, method, parts
        self.chunks = [chunk_passages(row.passages, max_source_tokens) for row in rows]
        self.examples = run_examples(method.examples, rows)

    async def run(self, progress: bool | None) -> list[AnswerJudgement]:
        from tqdm.auto import tqdm

        show = self.judge.progress if progress is None else progress
        bar = tqdm(total=len(self.rows), desc="judging answers", unit="row", disable=None if show is None else not show, leave=False)
        records: list[AnswerJudgement | None] = [None] * len(self.rows)
        pending = iter(range(len(self.rows)))

        async def worker() -> None:
            for index in pending:
                records[index] = await self._row(index)
                bar.update(1)

        try:
            async with asyncio.TaskGroup() as group:  # a configuration error cancels every other row
                for _ in range(min(len(self.rows), ROWS_PER_SLOT * self.judge.max_concurrency)):
                    group.create_task(worker())
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
        finally:
            bar.close()
        missing = [index for index, record in enumerate(records) if record is None]
        if missing:  # every row gets a record or the run raises: a row is never dropped silently
            raise RuntimeError(f"rows {missing[:10]} got no judgement")
        return records  # type: ignore[return-value]

    async def _row(self, index: int) -> AnswerJudgement:
        """The row's judgement, once the judge's budget (if any) has set aside what its passes need."""
        budget = self.judge.budget
        if budget is None:
            return await self._passes(index)
        row = self.rows[index]
        need = answer_need(self.judge, self.method, row, self.chunks[index], self.examples, self.parts)
        try:
            earmark = await budget.earmark(need.calls, need.cost_usd, optional_calls=need.order_calls, optional_cost_usd=need.order_cost_usd)
        except BudgetExhausted as exc:
            message = f"not sent: the judge's budget cannot pay for this row's {need.calls} calls ({exc})"
            error = RowError(stage="judging", error=JudgeError(kind="budget", message=message, attempts=0))
            return AnswerJudgement(id=row.id, source_key=row.source_key, passage_count=len(row.passages), error=error)
        try:
            with drawing_from(earmark):
                return await self._passes(index, order_room=earmark.optional)
        finally:
            budget.close(earmark)

    async def _passes(self, index: int, *, order_room: bool = True) -> AnswerJudgement:
        row, chunks = self.rows[index], self.chunks[index]
        asked = self.parts - (set() if row.expected is not None and has_words(row.expected) else {"facts"})
        # in the order a row's first failure is told
        passes: dict[str, Callable[[], Awaitable]] = {"claims": lambda: self._claims(row, chunks, state),
                                                      "relevance": lambda: self._relevance(row, state),
                                                      "facts": lambda: self._facts(row, chunks, state)}
        named = [part for part in passes if part in asked]
        state = _Row(usage={part: Usage() for part in named}, order_room=order_room)
        done = dict(zip(named, await asyncio.gather(*(passes[part]() for part in named))))
        usage = {"usage": Usage.total(list(state.usage.values())), "usage_by_pass": state.usage}
        base = {"id": row.id, "source_key": row.source_key, "passage_count": len(row.passages)}
        error = next((state.errors[part] for part in named if part in state.errors), None)
        if error is not None:
            return AnswerJudgement(**base, error=error, **usage)
        return AnswerJudgement(**base, claims=done.get("claims", []), relevance=done.get("relevance"), facts=done.get("facts"),
                               order_check=state.order, **usage)

    async def _verify(self, chunks: list[PassageChunk], statements: list[str], usage: Usage, *, repetitions: int = 1,
                      examples: ExampleSet | None = None) -> list[tuple[Cited, float | None, Cited]] | JudgeReply:
        """Each statement's verdict over the chunks (idk for all when there is none), with the share of repetitions
        that gave it (``repetitions`` above 1: each chunk asked that many times, the majority kept; else None) and
        the first repetition's verdict (what the order check compares); a failed reply instead of them."""
        if not chunks:
            idk = Cited(verdict="idk", reason=NO_PASSAGE)
            return [(idk, None, idk) for _ in statements]
        asked = [(r, chunk) for r in range(repetitions) for chunk in chunks]
        replies = await asyncio.gather(*(self.judge.aask(verify_passages_request(chunk, statements, examples).repeated(r)) for r, chunk in asked))
        for reply in replies:
            usage.add(reply.usage)
        failed = next((reply for reply in replies if not reply.ok), None)  # in the order asked, not answered
        if failed is not None:
            return failed
        per_chunk = [[cite(check, chunk) for check in reply.answer.verdicts] for reply, (_, chunk) in zip(replies, asked)]
        count = len(chunks)
        per_repetition = [[combine_cited([chunk[position] for chunk in per_chunk[r * count:(r + 1) * count]]) for r in range(repetitions)]
                          for position in range(len(statements))]
        return [(*majority_cited(given), given[0]) if repetitions > 1 else (given[0], None, given[0]) for given in per_repetition]

    async def _claims(self, row: AnswerInput, chunks: list[PassageChunk], state: _Row) -> list[CheckedClaim]:
        if not has_words(row.answer):
            return []
        found = await extract_claims(self.judge, row.answer, noun="answer")
        state.usage["claims"].add(found.usage)
        if found.error is not None:
            state.errors["claims"] = found.error
            return []
        order = claim_order(row, found.claims, chunks, self.method.order_check)
        shuffled = ([verify_passages_request(chunk, [found.claims[i] for i in order], self.examples) for chunk in chunks]
                    if order and state.order_room else [])
        verdicts, *shuffled_replies = await asyncio.gather(
            self._verify(chunks, found.claims, state.usage["claims"], repetitions=self.method.stability, examples=self.examples),
            *(self.judge.aask(r) for r in shuffled))
        for reply in shuffled_replies:  # paid for, whatever comes of them
            state.usage["claims"].add(reply.usage)
        if isinstance(verdicts, JudgeReply):
            state.errors["claims"] = RowError(stage="claim verification", error=verdicts.error)
            return []
        if order and not shuffled:
            state.order = not_asked("the judge's budget had room for this row's own requests only")
        elif shuffled:
            state.order = compare_cited_orders(shuffled_replies, chunks, order, [first.verdict for _, _, first in verdicts])
        return [CheckedClaim(claim=claim, duplicates=copies, agreement=agreement, **cited.model_dump())
                for claim, copies, (cited, agreement, _) in zip(found.claims, found.duplicates, verdicts)]

    async def _relevance(self, row: AnswerInput, state: _Row) -> AnswerRelevance | None:
        if not has_words(row.answer):
            return AnswerRelevance(relevance="no", reason=EMPTY_ANSWER)
        reply = await self.judge.aask(relevance_request(row.question, row.answer))
        state.usage["relevance"].add(reply.usage)
        if not reply.ok:
            state.errors["relevance"] = RowError(stage="relevance check", error=reply.error)
            return None
        return AnswerRelevance(relevance=reply.answer.relevance, reason=reply.answer.reason)

    async def _facts(self, row: AnswerInput, chunks: list[PassageChunk], state: _Row) -> list[FactCheck] | None:
        usage = state.usage["facts"]
        reply = await self.judge.aask(expected_facts_request(row.question, row.expected or ""))
        usage.add(reply.usage)
        if not reply.ok:
            state.errors["facts"] = RowError(stage="expected-fact extraction", error=reply.error)
            return None
        facts = distinct_statements(reply.answer.facts)[0]
        if has_words(row.answer):
            checks = await asyncio.gather(self._verify(chunks, facts, usage), self._verify([PassageChunk((1,), (row.answer,))], facts, usage))
        else:  # an empty answer states none of them: no call for it
            empty = Cited(verdict="idk", reason=EMPTY_ANSWER)
            checks = [await self._verify(chunks, facts, usage), [(empty, None, empty) for _ in facts]]
        in_passages, in_answer = checks
        for stage, found in (("expected-fact check against the passages", in_passages), ("expected-fact check against the answer", in_answer)):
            if isinstance(found, JudgeReply):
                state.errors["facts"] = RowError(stage=stage, error=found.error)
                return None
        return [FactCheck(fact=fact, in_passages=p, in_answer=a) for fact, (p, *_), (a, *_) in zip(facts, in_passages, in_answer)]
