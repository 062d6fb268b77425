"""Answer judgements -> per-row values, the claims and facts tables, and the reasoning people read.

The claim columns are a summary's (``summarization.scoring.rows_table``: ``claim_count``, ``aligned``,
``strictly_aligned``, the defect flags, ...), so the registry's aggregates, intervals, comparisons and decisions
read an answer's rows as they read a summary's; beside them the columns only answers have (the registry's "rag"
family): ``passages``, ``passages_cited``, ``context_utilisation``, ``quote_failures``, ``answer_relevance``,
``defect_irrelevant``, and with an expected answer ``expected_facts``, ``context_sufficiency``, ``answer_recall``.
A row the judge failed on gets none of them (empty, never 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..summarization.records import CheckedClaim
from ..summarization.scoring import CLAIM_COLUMNS, claims_table, rows_table
from .records import AnswerJudgement, Cited

RELEVANCE_VALUE = {"yes": 1.0, "partly": 0.5, "no": 0.0}
_VERDICT_ORDER = {"no": 0, "idk": 1, "yes": 2}
ANSWER_COLUMNS = ("passages", "passages_cited", "context_utilisation", "quote_failures", "answer_relevance", "defect_irrelevant",
                  "expected_facts", "context_sufficiency", "answer_recall")
INTEGER_COLUMNS = ("passages", "passages_cited", "quote_failures", "defect_irrelevant", "expected_facts")
ANSWER_CLAIM_COLUMNS = [*CLAIM_COLUMNS, "passage", "quote", "quote_found", "judge_verdict"]
FACT_COLUMNS = ["id", "fact_index", "fact", "in_passages", "passage", "quote", "quote_found", "passages_reason", "in_answer",
                "answer_reason"]


def _evidence(cited: CheckedClaim | Cited) -> str:
    if cited.quote_found is False:
        where = f"passage {cited.passage}" if cited.passage else "no passage"
        return f" (judged {cited.judge_verdict}, counted idk: the quote \"{cited.quote}\" is not in {where})"
    if cited.passage:
        return f" (passage {cited.passage}: \"{cited.quote}\")"
    return ""


def answer_reasoning(judgement: AnswerJudgement) -> str:
    """Every claim with its verdict, reason, passage and quote: contradicted first, then unverifiable (failed
    quotes first among them), then supported."""
    if judgement.error is not None:
        return f"Not judged: {judgement.error}"
    if not judgement.claims:
        return "The answer makes no claim (defect: empty)."
    ordered = sorted(enumerate(judgement.claims, start=1),
                     key=lambda item: (_VERDICT_ORDER[item[1].verdict], item[1].quote_found is not False, not item[1].suspect, item[0]))
    counts = {v: sum(c.verdict == v for c in judgement.claims) for v in ("no", "idk", "yes")}
    head = f"{len(judgement.claims)} claims: {counts['no']} contradicted, {counts['idk']} unverifiable, {counts['yes']} supported."
    failures = sum(c.quote_found is False for c in judgement.claims)
    if failures:
        head += f" {failures} quote{'s' if failures > 1 else ''} not found in the passage cited."
    suspects = sum(bool(c.suspect) for c in judgement.claims)
    if suspects:
        head += f" {suspects} suspect verdict{'s' if suspects > 1 else ''} (the model-free check disagrees)."
    failed = judgement.order_check.failed if judgement.order_check is not None else None  # the check only measures
    note = [f"Not in the order check (the verdicts stand): {failed}"] if failed else []
    return "\n".join([head, *(f"[{c.verdict}] claim {n}: {c.claim} -- {c.reason}{_evidence(c)}{_suspect(c)}" for n, c in ordered), *note])


def _suspect(claim: CheckedClaim) -> str:
    return f" (suspect: its best passage supports {claim.lexical_support:.2f} of it)" if claim.suspect else ""


def relevance_reasoning(judgement: AnswerJudgement) -> str | None:
    if judgement.error is not None or judgement.relevance is None:
        return None
    return f"Relevance {judgement.relevance.relevance}: {judgement.relevance.reason}"


def facts_reasoning(judgement: AnswerJudgement) -> str | None:
    if judgement.error is not None or judgement.facts is None:
        return None
    facts = judgement.facts
    head = (f"{len(facts)} facts expected: {sum(f.in_passages.verdict == 'yes' for f in facts)} supported by the passages, "
            f"{sum(f.in_answer.verdict == 'yes' for f in facts)} stated in the answer.")
    lines = [f"[passages {f.in_passages.verdict}, answer {f.in_answer.verdict}] {f.fact} -- {f.in_passages.reason}{_evidence(f.in_passages)}"
             for f in facts]
    return "\n".join([head, *lines])


def answer_values(judgement: AnswerJudgement) -> dict[str, float | int | None]:
    """The columns only answers have, for one row (all None for a row the judge failed on)."""
    if judgement.error is not None:
        return {name: None for name in ANSWER_COLUMNS} | {"passages": judgement.passage_count}
    cited = {c.passage for c in judgement.claims if c.quote_found and c.passage}
    count = judgement.passage_count
    relevance = RELEVANCE_VALUE[judgement.relevance.relevance] if judgement.relevance is not None else None
    facts = judgement.facts
    return {
        "passages": count,
        "passages_cited": len(cited),
        "context_utilisation": len(cited) / count if count else None,
        "quote_failures": sum(c.quote_found is False for c in judgement.claims),
        "answer_relevance": relevance,
        "defect_irrelevant": None if relevance is None else int(relevance == 0.0),
        "expected_facts": len(facts) if facts is not None else None,
        "context_sufficiency": sum(f.in_passages.verdict == "yes" for f in facts) / len(facts) if facts else None,
        "answer_recall": sum(f.in_answer.verdict == "yes" for f in facts) / len(facts) if facts else None,
    }


def answer_rows_table(judgements: Sequence[AnswerJudgement], *, suspect: bool = False, stability: bool = False,
                      order: bool = False) -> pd.DataFrame:
    """One row per answer, in input order: a summary's claim columns (with ``suspect_verdicts`` when the model-free
    check second-guessed the verdicts, ``unstable_claims`` when each verification was asked more than once, the
    order check's counts with ``order``), then the answer's own, the three reasoning columns (``reasoning`` with
    passages and quotes, ``relevance_reasoning``, ``facts_reasoning``), error and usage."""
    table = rows_table(judgements, coverage=False, judged=True, grounding=False, suspect=suspect, stability=stability, order=order)
    table["reasoning"] = [answer_reasoning(j) for j in judgements]
    values = pd.DataFrame.from_records([answer_values(j) for j in judgements], columns=list(ANSWER_COLUMNS))
    for name in ANSWER_COLUMNS:
        values[name] = values[name].astype("Int64" if name in INTEGER_COLUMNS else "float64")
    values["relevance_reasoning"] = [relevance_reasoning(j) for j in judgements]
    values["facts_reasoning"] = [facts_reasoning(j) for j in judgements]
    at = table.columns.get_loc("reasoning")
    return pd.concat([table.iloc[:, :at], values.drop(columns=["relevance_reasoning", "facts_reasoning"]), table[["reasoning"]],
                      values[["relevance_reasoning", "facts_reasoning"]], table.iloc[:, at + 1:]], axis=1)


def answer_claims_table(judgements: Sequence[AnswerJudgement]) -> pd.DataFrame:
    """One row per (answer, distinct claim): a summary's claim columns, then the passage cited, the quote, whether it
    was found there, and the judge's own verdict when a missing quote made it idk."""
    table = claims_table(judgements)
    records = [(c.passage, c.quote, c.quote_found, c.judge_verdict) for j in judgements for c in j.claims]
    extra = pd.DataFrame.from_records(records, columns=["passage", "quote", "quote_found", "judge_verdict"])
    extra["passage"] = extra["passage"].astype("Int64")
    extra["quote_found"] = extra["quote_found"].astype("boolean")
    return pd.concat([table, extra], axis=1)[ANSWER_CLAIM_COLUMNS]


def facts_table(judgements: Sequence[AnswerJudgement]) -> pd.DataFrame:
    """One row per (answer, fact of its expected answer): in the passages (verdict, passage, quote, found), in the answer."""
    records = [
        (j.id, number, f.fact, f.in_passages.verdict, f.in_passages.passage, f.in_passages.quote, f.in_passages.quote_found,
         f.in_passages.reason, f.in_answer.verdict, f.in_answer.reason)
        for j in judgements for number, f in enumerate(j.facts or [], start=1)
    ]
    table = pd.DataFrame.from_records(records, columns=FACT_COLUMNS)
    table["passage"] = table["passage"].astype("Int64")
    table["quote_found"] = table["quote_found"].astype("boolean")
    return table
