"""The four judge passes: each a prompt, an answer schema and a builder of the ``JudgeRequest``.

- claim extraction: one call per summary (the summary only);
- verification: one call per summary for all its claims, against the whole source (or each chunk of it);
- key points: one call per distinct source text (or chunk), reused for every summary of that source;
- coverage: one call per summary, the key points before the summary.

Key points and verification read the source and open with the same preamble and source block (``SOURCE_PROMPTS``),
their task and what differs per call after it: an endpoint's prompt cache serves the source once per source (or
chunk), whichever pass and candidate's summary comes next.

The verification and coverage answers are lists whose length the schema fixes to the number of claims (key
points), numbered 1..n: a reply with another count or order fails validation, and the judge is asked again with
the error shown. With ``json_schema`` or llama.cpp's grammar the count is enforced while decoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Annotated, ClassVar, Literal, Protocol

from pydantic import AfterValidator, BaseModel, Field, create_model, model_validator

from ..judge import CorrectedVerdict, ExampleSet, JudgeRequest, text_key
from ..prompts import load_prompt, marker, neutralise, numbered_lines
from .statements import has_words

MAX_CLAIMS = 60
MAX_KEY_POINTS = 10
Verdict = Literal["yes", "no", "idk"]


def _not_blank(text: str) -> str:
    if not has_words(text):  # spaces, zero-width characters, "...", "-": no statement, as a summary of them is empty
        raise ValueError("an item is blank (no letter or digit): leave it out, or write the statement")
    return text


# A listed statement: with a letter or digit (a blank claim, or "...", would be verified, and counted, as a fact).
Statement = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]


class ExtractedClaims(BaseModel):
    claims: list[Statement] = Field(
        max_length=MAX_CLAIMS, description="the summary's claims, one fact each, in order"
    )


class ExtractedKeyPoints(BaseModel):
    key_points: list[Statement] = Field(
        min_length=1, max_length=MAX_KEY_POINTS, description="the article's key points, most important first"
    )


class ClaimCheck(BaseModel):
    claim: int = Field(description="the claim's number")
    reason: str = Field(description="one sentence: what the article says about the claim")
    verdict: Verdict


class KeyPointCheck(BaseModel):
    key_point: int = Field(description="the key point's number")
    reason: str = Field(description="one sentence: where the summary covers it, or that it does not")
    covered: Literal["yes", "no"]


class _NumberedAnswer(BaseModel):
    """Checks that item i is numbered i (1-based); the list's length is fixed by the schema itself."""

    items_field: ClassVar[str]
    number_field: ClassVar[str]

    @model_validator(mode="after")
    def _numbered_in_order(self) -> _NumberedAnswer:
        for position, item in enumerate(getattr(self, self.items_field), start=1):
            number = getattr(item, self.number_field)
            if number != position:
                raise ValueError(f"item {position} is numbered {number}: answer for every one, in order, numbered 1 to n")
        return self


def numbered_list_answer(name: str, items_field: str, item_type: type[BaseModel], number_field: str, count: int):
    model = create_model(
        name,
        __base__=_NumberedAnswer,
        **{items_field: (Annotated[list[item_type], Field(min_length=count, max_length=count)], ...)},
    )
    model.items_field, model.number_field = items_field, number_field
    return model


@cache
def verification_answer(claim_count: int) -> type[_NumberedAnswer]:
    """The answer type for verifying exactly ``claim_count`` claims."""
    return numbered_list_answer("ClaimVerdicts", "verdicts", ClaimCheck, "claim", claim_count)


@cache
def coverage_answer(key_point_count: int) -> type[_NumberedAnswer]:
    """The answer type for checking exactly ``key_point_count`` key points."""
    return numbered_list_answer("KeyPointCoverage", "covered", KeyPointCheck, "key_point", key_point_count)


def _user(text: str) -> list[dict[str, str]]:
    # One user message, no system message: Gemma's chat format drops system messages, and a single message
    # keeps instructions + source as one prefix that providers' prompt caches can reuse.
    return [{"role": "user", "content": text}]


def judge_request(prompt, text: str, answer_type: type[BaseModel], max_tokens: int) -> JudgeRequest:
    return JudgeRequest(
        messages=_user(text), answer_type=answer_type, prompt_version=prompt.tag, purpose=prompt.name, max_tokens=max_tokens
    )


def extract_claims_request(summary: str) -> JudgeRequest:
    prompt = load_prompt("claims")
    summary = neutralise(summary)
    text = prompt.render(summary=summary, summary_marker=marker("SUMMARY", summary))
    return judge_request(prompt, text, ExtractedClaims, 64 + 48 * MAX_CLAIMS // 2)


def extract_claims_retry_request(summary: str) -> JudgeRequest:
    """The claim extraction again, after an answer with no claim: that answer and a second turn saying so."""
    first = extract_claims_request(summary)
    retry = load_prompt("claims_retry")
    messages = [
        *first.messages,
        {"role": "assistant", "content": ExtractedClaims(claims=[]).model_dump_json()},
        {"role": "user", "content": retry.render()},
    ]
    return JudgeRequest(
        messages=messages, answer_type=ExtractedClaims, prompt_version=f"{first.prompt_version}+{retry.tag}",
        purpose=retry.name, max_tokens=first.max_tokens,
    )


def verify_claims_request(source: str, claims: list[str], examples: ExampleSet | None = None) -> JudgeRequest:
    """The claims checked against ``source``; with ``examples`` (people's corrected verdicts: the run's,
    ``run_examples``), under the examples prompt, which shows those most like these claims after the source."""
    chosen = examples.choose(claims) if examples is not None else []
    prompt = load_prompt("verify_examples" if chosen else "verify")
    listed = numbered_lines(claims)
    shown = {}
    if chosen:
        shown["examples"] = examples_text(chosen)
        shown["examples_marker"] = marker("EXAMPLES", source, shown["examples"])
    text = prompt.render(
        source=source,
        source_marker=marker("ARTICLE", source),
        claims=listed,
        claims_marker=marker("CLAIMS", source, listed),  # over the source too: the verbatim source cannot hold it
        claim_count=len(claims),
        **shown,
    )
    return judge_request(prompt, text, verification_answer(len(claims)), 64 + 80 * len(claims))


class _Judged(Protocol):
    @property
    def texts(self) -> tuple[str, ...]: ...


def run_examples(examples: ExampleSet | None, rows: Iterable[_Judged]) -> ExampleSet | None:
    """``examples`` (the method's) less those from the judged rows' ``texts`` (a summary's source and summary; an
    answer's passages and answer): what a run shows (None: none)."""
    if examples is None:
        return None
    return examples.without({text_key(text) for row in rows for text in row.texts})


def examples_text(examples: Sequence[CorrectedVerdict]) -> str:
    """Each example on three lines (excerpt, statement, verdict and reason), each line's text neutralised and
    flattened as a listed item is, so no example can forge a marker or a line of its own."""
    def line(text: str) -> str:
        return " ".join(neutralise(text).split())

    verdicts = {"yes": "yes (the article supports all of it)", "no": "no (some of it is contradicted or not in the article)"}
    return "\n\n".join(
        f"Example {n}. Article excerpt: {line(e.excerpt())}\nStatement: {line(e.statement)}\n"
        f"People's verdict: {verdicts[e.verdict]}." + (f" Their reason: {line(e.rationale)}" if e.rationale.strip() else "")
        for n, e in enumerate(examples, start=1)
    )


def extract_key_points_request(source: str) -> JudgeRequest:
    prompt = load_prompt("keypoints")
    text = prompt.render(source=source, source_marker=marker("ARTICLE", source))
    return judge_request(prompt, text, ExtractedKeyPoints, 64 + 64 * MAX_KEY_POINTS)


def check_coverage_request(key_points: list[str], summary: str) -> JudgeRequest:
    prompt = load_prompt("coverage")
    listed = numbered_lines(key_points)
    summary = neutralise(summary)
    text = prompt.render(
        key_points=listed,
        key_points_marker=marker("KEY POINTS", listed),
        summary=summary,
        summary_marker=marker("SUMMARY", summary),
        key_point_count=len(key_points),
    )
    return judge_request(prompt, text, coverage_answer(len(key_points)), 64 + 80 * len(key_points))
