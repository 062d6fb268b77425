"""What judging will cost, said before any call: ``estimate_cost``.

It builds the prompts ``judge_summaries`` would send, pass by pass, and counts them as the package counts tokens
everywhere (``judge.tokens``: no tokenizer). The first round's prompts are exact (claim extraction per summary, key
points per source or chunk). The second round's depend on the judge's answers, so they are built from stand-ins:

- verification: the claims are taken to be the summary's sentences (claims restate the summary, one fact each);
- coverage: the key points are taken to be the source's first ``KEY_POINTS`` sentences.

Completion tokens are a stated allowance per pass (``Allowance``): the text an answer restates (the claims, the key
points) counted like the prompt, a short sentence of reason per verdict, and the JSON around them. Calls are those
of a run where every answer is valid the first time: a repair turn, a claim extraction asked again or a retry adds
calls, which the estimate leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..judge import MESSAGE_OVERHEAD_TOKENS, Judge, JudgeRequest, Prices, estimate_tokens
from ..text import split_sentences
from .chunking import split_source
from .judging import prepare_rows
from .method import Method, method_of
from .options import PROMPT_RESERVE_TOKENS, source_token_budget
from .order import in_sample
from .passes import check_coverage_request, extract_claims_request, extract_key_points_request, run_examples, verify_claims_request
from .pipeline import has_words
from .records import RowInput

KEY_POINTS = 5  # key points taken per source (the prompt asks for 3 to 10)


@dataclass(frozen=True)
class Allowance:
    """Completion tokens allowed per answer: ``json`` once per answer (braces, the list's key), ``item`` per listed
    item (quotes, commas, the number and verdict fields), ``reason`` per verdict's one-sentence reason."""

    json: int = 12
    item: int = 8
    reason: int = 24


@dataclass(frozen=True)
class PassEstimate:
    """One pass: its calls and the tokens they are expected to take."""

    name: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class CostEstimate:
    """The expected calls, tokens and cost of judging some rows (``estimate_cost``)."""

    rows: int
    passes: tuple[PassEstimate, ...]
    prices: Prices | None = None

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.passes)

    @property
    def prompt_tokens(self) -> int:
        return sum(p.prompt_tokens for p in self.passes)

    @property
    def completion_tokens(self) -> int:
        return sum(p.completion_tokens for p in self.passes)

    @property
    def cost_usd(self) -> float | None:
        """At ``prices`` (no prompt token taken as cached); None without prices."""
        return None if self.prices is None else self.prices.cost(self.prompt_tokens, self.completion_tokens)

    def format(self) -> str:
        """A plain-text table: one line per pass, then the total and the cost."""
        lines = [f"{'pass':<14} {'calls':>8} {'prompt tokens':>14} {'completion tokens':>18}"]
        for p in (*self.passes, PassEstimate("total", self.calls, self.prompt_tokens, self.completion_tokens)):
            lines.append(f"{p.name:<14} {p.calls:>8} {p.prompt_tokens:>14} {p.completion_tokens:>18}")
        cost = "no prices given" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        lines.append(f"expected cost for {self.rows} rows: {cost} (an estimate; no judge was called)")
        return "\n".join(lines)


class _Tally:
    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self.passes: dict[str, PassEstimate] = {}

    def add(self, name: str, request: JudgeRequest, completion_tokens: int, times: int = 1) -> None:
        prompt = sum(self.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in request.messages)
        p = self.passes.get(name, PassEstimate(name))
        self.passes[name] = PassEstimate(name, p.calls + times, p.prompt_tokens + times * prompt, p.completion_tokens + times * completion_tokens)


def estimate_cost(
    sources: Sequence[str],
    summaries: Sequence[str],
    *,
    judge: Judge | None = None,
    prices: Prices | dict[str, float] | tuple[float, ...] | None = None,
    coverage: bool = True,
    max_source_tokens: int | None = None,
    context_window: int | None = None,
    count_tokens: Callable[[str], int] = estimate_tokens,
    allowance: Allowance = Allowance(),
    method: Method | None = None,
    **keywords: Any,
) -> CostEstimate:
    """The calls, prompt and completion tokens and cost that ``judge_summaries(sources, summaries, ...)`` is expected
    to take, without calling the judge (see the module's docstring for the stand-ins and ``Allowance``).

    ``prices`` (default: ``judge.prices``) prices the tokens, at the batch price when ``judge`` is in batch mode. Sources are chunked as ``judge_summaries`` would:
    ``max_source_tokens``, else what ``judge.context_window`` (or ``context_window``) leaves room for.
    ``count_tokens`` counts a text's tokens (default: the package's estimate; an endpoint's own count to compare
    with its usage). ``method`` (or its fields as keywords: ``stability=3``): how claims are verified (each
    verification asked ``stability`` times, a sample asked again shuffled, ``examples`` shown). The inputs are checked
    as ``judge_summaries`` checks them.
    """
    method = method_of("estimate_cost", keywords, method)
    rows = prepare_rows(sources, summaries, None)
    if max_source_tokens is None:
        max_source_tokens = source_token_budget(judge)
    if max_source_tokens is None and context_window is not None:
        max_source_tokens = max(context_window - PROMPT_RESERVE_TOKENS, 256)
    prices = Prices.coerce(prices) if prices is not None else (judge.prices if judge is not None else None)
    if prices is not None and judge is not None and judge.settings.batch is not None:  # a batch's calls cost less
        prices = prices.batch()
    tally, count = _Tally(count_tokens), count_tokens
    chunks_of: dict[str, list[str]] = {}
    for row in rows:
        if row.source_key not in chunks_of:
            chunks_of[row.source_key] = split_source(row.source, max_source_tokens) if max_source_tokens else [row.source]
            if coverage:
                for chunk in chunks_of[row.source_key]:
                    points = _stand_in_key_points(chunk)
                    answer = allowance.json + sum(allowance.item + count(point) for point in points)
                    tally.add("keypoints", extract_key_points_request(chunk), answer)
    repetitions = method.stability  # each verification asked this many times
    examples = run_examples(method.examples, rows)

    def sampled(row: RowInput) -> bool:  # in the order check's sample: its lists asked again, shuffled
        return in_sample(row.source_key, row.summary, method.order_check)

    for row in rows:
        if not has_words(row.summary):
            continue  # an empty summary costs no call
        claims = split_sentences(row.summary) or [row.summary]
        tally.add("claims", extract_claims_request(row.summary), allowance.json + sum(allowance.item + count(c) for c in claims))
        for chunk in chunks_of[row.source_key]:
            tally.add("verify", verify_claims_request(chunk, claims, examples), allowance.json + len(claims) * (allowance.item + allowance.reason),
                      repetitions + (len(claims) >= 2 and sampled(row)))  # the order check asks once more, shuffled
        if coverage:
            points = [p for chunk in chunks_of[row.source_key] for p in _stand_in_key_points(chunk)]
            points = list(dict.fromkeys(points))
            tally.add("coverage", check_coverage_request(points, row.summary), allowance.json + len(points) * (allowance.item + allowance.reason),
                      1 + (len(points) >= 2 and sampled(row)))
    order = ("claims", "verify", "keypoints", "coverage")
    return CostEstimate(rows=len(rows), passes=tuple(tally.passes[name] for name in order if name in tally.passes), prices=prices)


def _stand_in_key_points(source: str) -> list[str]:
    return split_sentences(source)[:KEY_POINTS] or [source]
