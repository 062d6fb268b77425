"""A trace's verdicts under one feedback name: the judge's and the people's, and the count the trace lands in (the
rules are ``tracking.agreement``'s docstring). Reads MLflow's assessments by their fields alone (``name``,
``source.source_type`` and ``source_id``, ``value``, ``error``, ``valid``, the update and creation times), so no
MLflow import is needed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

JUDGE_SOURCE, HUMAN_SOURCE = "LLM_JUDGE", "HUMAN"  # MLflow's AssessmentSourceType values
OUTCOMES = ("pairs_used", "judge_only", "human_only", "judge_error", "application_error", "unusable_values", "human_ties", "unlabelled")
COMBINE_RULE = "majority of each person's latest verdict; ties left out"
_YES, _NO = frozenset({"yes", "true", "1"}), frozenset({"no", "false", "0"})


def normalise_verdict(value: Any) -> bool | None:
    """True for yes/true/1, False for no/false/0 (strings in any case, booleans, numbers); None for anything else."""
    if isinstance(value, Enum):  # MLflow's CategoricalRating
        value = value.value
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return {1: True, 0: False}.get(value) if value in (0, 1) else None
    if isinstance(value, str):
        text = value.strip().lower()
        return True if text in _YES else False if text in _NO else None
    return None


@dataclass(frozen=True)
class TraceVerdicts:
    """One trace's verdicts under a feedback name and the count it lands in (one of ``OUTCOMES``)."""

    trace_id: str
    judge: bool | None
    people: dict[str, bool | None]  # person -> their latest value, normalised (None: not a verdict)
    human: bool | None  # the people's majority
    outcome: str
    judge_source: str | None = None  # the source id of the judge's verdict (None: no verdict)
    other_sources: tuple[str, ...] = ()  # feedback under the name from neither a judge nor a person (CODE: not used)


def latest_feedback(feedback: list[Any]) -> Any:
    # Two feedback logged in the same millisecond: the store's order (creation order) decides.
    return max(enumerate(feedback), key=lambda p: (p[1].last_update_time_ms or 0, p[1].create_time_ms or 0, p[0]))[1]


def trace_verdicts(trace_id: str, assessments: list, name: str, judge_source_id: str | None = None, *,
                   application_card: Callable[[Any], bool] | None = None) -> TraceVerdicts:
    """Sort a trace's assessments under ``name`` into the judge's verdict and the people's (rules in the module doc).
    ``application_card``: whether a judge's error card says the row's application failed (nothing was judged): a
    labelled trace with such a card and no verdict is ``application_error``, not the judge's error."""
    # The judge's feedback counts also when overridden: MLflow marks a card a person overrode ``valid=False``, and
    # leaving it out left out exactly the rows where people corrected the judge (the override is that person's vote).
    # A person's overridden feedback is no longer their vote (they, or another person, replaced it).
    feedback = [a for a in assessments if getattr(a, "feedback", None) is not None and a.name == name
                and (a.valid is not False or a.source.source_type == JUDGE_SOURCE)]
    judged = [f for f in feedback if f.source.source_type == JUDGE_SOURCE and judge_source_id in (None, f.source.source_id)]
    labelled = [f for f in feedback if f.source.source_type == HUMAN_SOURCE and f.error is None]
    verdicts = [f for f in judged if f.error is None]
    judge = normalise_verdict(latest_feedback(verdicts).value) if verdicts else None
    judge_source = latest_feedback(verdicts).source.source_id if verdicts else None
    others = tuple(sorted({f"{f.source.source_type}:{f.source.source_id}" for f in feedback
                           if f.source.source_type not in (JUDGE_SOURCE, HUMAN_SOURCE)}))
    people = {}
    for person in dict.fromkeys(f.source.source_id for f in labelled):
        people[person] = normalise_verdict(latest_feedback([f for f in labelled if f.source.source_id == person]).value)
    votes = Counter(v for v in people.values() if v is not None)
    human = None if votes[True] == votes[False] else votes[True] > votes[False]
    if not judged and not labelled:
        outcome = "unlabelled"
    elif not judged:
        outcome = "human_only"
    elif not labelled:
        outcome = "judge_only"
    elif not verdicts:
        outcome = "application_error" if application_card is not None and any(application_card(f) for f in judged) else "judge_error"
    elif judge is None or not votes:
        outcome = "unusable_values"
    elif human is None:
        outcome = "human_ties"
    else:
        outcome = "pairs_used"
    return TraceVerdicts(trace_id, judge, people, human, outcome, judge_source, others)
