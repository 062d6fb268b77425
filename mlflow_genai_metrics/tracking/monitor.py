"""Production monitoring without a server that runs custom scorers: score an experiment's traces not yet scored.

    from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, score_traces
    report = score_traces("my-summarizer-app", judges=[ClaimAlignment(judge), Grounding()])
    # also: mgm monitor --experiment my-summarizer-app

MLflow's own monitoring (``judge.register().start(...)``) runs registered judges on the tracking server, which an
open-source server does only with ``MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS=true`` (it executes the judge's stored
source). ``score_traces`` does the same from any process: each trace whose root span holds a source and a summary
gets one feedback per judge, as in an evaluation. It is resumable: traces that already carry a judge's feedback
are skipped, and the judge's cache answers again for rows judged before an interruption. The ``claim_alignment``
feedback is the same card as in an evaluation: "yes" only when the source supports every claim of the summary.
A pass whose judge verified almost nothing (idk for 80% of the claims judged or more, or none supported) says so
in ``MonitorReport.warnings``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
from mlflow.entities import AssessmentSourceType

from ..stats import StatisticsOptions
from ..summarization.warnings import RunWarning, verification_warning
from .feedback import application_card
from .genai import trace_rows
from .pipeline import application_failure, root_span


@dataclass(frozen=True)
class MonitorReport:
    """What one pass over an experiment's traces did: every trace seen lands in one of ``already_scored``,
    ``unusable``, ``scored`` and ``deferred``."""

    experiment_id: str
    traces_seen: int
    already_scored: int  # every judge's feedback was there already (an error card is not feedback: it is asked again)
    unusable: int  # the root span holds no source and summary, or no question, answer and passages (another app's trace), or the trace was deleted meanwhile
    scored: int  # traces that got feedback now
    judge_errors: int  # of those, rows the judge failed on (their feedback is the error)
    deferred: int = 0  # left for the next pass: by ``max_traces``, or still in progress (no output yet)
    retried: int = 0  # of those scored now, traces that carried an error card from an earlier pass (replaced now)
    warnings: tuple[RunWarning, ...] = ()  # over the claims judged now, e.g. the judge verified almost nothing
    application_errors: int = 0  # of those scored now, traces whose application failed (APPLICATION_ERROR cards, for good)


def _judges_feedback(trace: Any, names: set[str]) -> list[Any]:
    """The trace's feedback under the judges' names that is not a person's."""
    return [a for a in trace.info.assessments
            if a.name in names and getattr(a, "feedback", None) is not None and a.source.source_type != AssessmentSourceType.HUMAN]


def _other_judges(traces: Sequence[Any], judges: Sequence[Any]) -> RunWarning | None:
    """A warning when the experiment's traces carry cards under these judges' names from another judge (another
    model, another grounding model): a pass scores only the traces without a card, so the experiment then holds the
    verdicts of two judges side by side, and any figure over its traces mixes them (once said nowhere)."""
    mine = {judge.name: judge.source().source_id for judge in judges}
    others = sorted({f"{card.name} by {card.source.source_id}" for trace in traces for card in _judges_feedback(trace, set(mine))
                     if card.source.source_id != mine[card.name]})
    if not others:
        return None
    return RunWarning("other_judges", f"these traces also carry cards of another judge ({', '.join(others)}) than this "
                      f"pass's ({', '.join(f'{n} by {s}' for n, s in sorted(mine.items()))}): figures over the "
                      "experiment's traces mix the two; score them into an experiment of their own, or delete the "
                      "other judge's cards first")


def _retryable(card: Any) -> bool:
    """An error card a later pass may replace: the judge failed. An ``APPLICATION_ERROR`` card is final: the trace's
    application failed, and no pass can judge an output it never gave (once re-scored on every pass)."""
    return getattr(card, "error", None) is not None and not application_card(card)


def _ours(trace: Any, names: set[str]) -> set[str]:
    """The judges' names under which the trace already has a verdict: feedback that is not a person's and not an
    error card (a judge that failed on the trace, say in an outage, scored nothing: the next pass asks again)."""
    return {a.name for a in _judges_feedback(trace, names) if not _retryable(a)}


def _error_cards(trace: Any, names: set[str]) -> list[Any]:
    """The judges' error cards on the trace a later pass replaces (``_retryable``)."""
    return [a for a in _judges_feedback(trace, names) if _retryable(a)]


def _experiment_id(experiment: str | None) -> str:
    if experiment is None:
        from mlflow.tracking.fluent import _get_experiment_id

        return _get_experiment_id()
    found = mlflow.get_experiment_by_name(experiment) or (mlflow.get_experiment(experiment) if experiment.isdigit() else None)
    if found is None:
        raise ValueError(f"no experiment named (or with id) {experiment!r} in {mlflow.get_tracking_uri()}")
    return found.experiment_id


def score_traces(
    experiment: str | None = None,
    judges: Sequence[Any] | None = None,
    *,
    filter_string: str | None = None,
    max_traces: int | None = None,
) -> MonitorReport:
    """Attach each judge's feedback to the traces of ``experiment`` (name or id; default: the active one) that do
    not carry it yet; ``filter_string`` is ``mlflow.search_traces``'s, ``max_traces`` caps the traces scored now.
    ``judges`` as for ``evaluate_summaries`` (default: the three, the judge from the environment), or the answer
    judges of ``answer_scorers`` for a RAG application's traces (question and answer from the root span, passages
    from its RETRIEVER spans, as ``evaluate_answers`` reads them). The judge is
    checked before any trace (``JudgeConfigError`` in seconds for a wrong model, key or endpoint)."""
    from .evaluate import task_of
    from .judges import ClaimAlignment, Grounding, KeyPointCoverage, _TaskScorer

    if max_traces is not None and max_traces < 0:  # (-1 scored 5 of 6 traces and reported 7 deferred)
        raise ValueError(f"max_traces must be 0 or more (None: every trace), got {max_traces!r}")
    judges = list(judges) if judges is not None else [ClaimAlignment(), KeyPointCoverage(), Grounding()]
    try:
        if not judges or not all(isinstance(j, _TaskScorer) for j in judges):
            raise ValueError("not judges")
        task, judges = task_of(judges, "score_traces")
    except ValueError:
        raise ValueError("score_traces takes either summary judges (ClaimAlignment, KeyPointCoverage, Grounding) or answer "
                         "judges (AnswerFaithfulness, AnswerRelevance, ContextSufficiency), one task's at a time") from None
    pipeline = task.set_pipeline(judges, statistics=StatisticsOptions())
    experiment_id = _experiment_id(experiment)
    pipeline.check()
    mlflow.flush_trace_async_logging()  # this process's own traces, written in the background, are read whole
    traces = mlflow.search_traces(locations=[experiment_id], filter_string=filter_string, return_type="list")
    names = {j.name for j in judges}
    for trace in traces:  # an error card beside its judge's verdict: a pass stopped between writing the one and
        verdicts = _ours(trace, names)  # removing the other (one feedback per judge: the card is removed now)
        for card in _error_cards(trace, names):
            if card.name in verdicts:
                mlflow.delete_assessment(trace_id=trace.info.trace_id, assessment_id=card.assessment_id)
    todo = [t for t in traces if _ours(t, names) != names]
    running = [t for t in todo if str(getattr(t.info.state, "value", t.info.state)) == "IN_PROGRESS"]  # no output yet: next pass
    todo = [t for t in todo if t not in running]
    silent = [t for t in todo if (root := root_span(t)) is not None and root.outputs is None and application_failure(t) is None]
    todo = [t for t in todo if t not in silent]  # a root span that returned nothing holds no summary: never "no claim"
    rows, unusable = trace_rows(todo, pipeline)  # the pipeline, or the answer rows, reads each trace's root span
    unusable += [f"the row of trace {t.info.trace_id}: its root span has no output" for t in silent]
    deferred = max(len(rows) - max_traces, 0) if max_traces is not None else 0
    rows = rows[: len(rows) - deferred]
    done = {t.info.trace_id: _ours(t, names) for t in todo}
    judgements = pipeline.judge_all(rows) if rows else []
    roots = {t.info.trace_id: root_span(t) for t in todo}
    stale = {t.info.trace_id: _error_cards(t, names) for t in todo}
    failed, taken, crashed, gone = set(), 0, set(), set()  # traces that got an error card now; traces another pass scored meanwhile
    for parsed, judgement in zip(rows, judgements):
        # read again just before writing: another pass at once (a schedule that overran) gave every card twice
        current = mlflow.get_trace(parsed.trace_id)
        if current is None:  # deleted since it was listed (a bare AttributeError once stopped the pass here)
            gone.add(parsed.trace_id)
            continue
        done[parsed.trace_id] |= _ours(current, names)
        if done[parsed.trace_id] == names:
            taken += 1
            continue
        for judge in judges:
            if judge.name in done[parsed.trace_id]:
                continue
            feedback = judge.feedback(judgement)
            if feedback.error is not None and feedback.error.error_code == "JUDGE_ERROR":  # (not "no expected answer")
                failed.add(parsed.trace_id)
            if application_card(feedback):
                crashed.add(parsed.trace_id)
            feedback.span_id = roots[parsed.trace_id].span_id  # on the root span, where evaluations put theirs
            mlflow.log_assessment(trace_id=parsed.trace_id, assessment=feedback)
            for card in stale[parsed.trace_id]:  # the earlier pass's error card gives way to this pass's card
                if card.name == judge.name:
                    mlflow.delete_assessment(trace_id=parsed.trace_id, assessment_id=card.assessment_id)
    claims = [c.verdict for j in judgements if j.error is None for c in j.claims]
    found = [w for w in (verification_warning(len(claims), claims.count("yes"), claims.count("idk")), _other_judges(traces, judges)) if w]
    return MonitorReport(
        experiment_id=experiment_id, traces_seen=len(traces), unusable=len(unusable) + len(gone),
        already_scored=len(traces) - len(todo) - len(silent) - len(running) + taken,
        scored=len(rows) - taken - len(gone), judge_errors=len(failed), deferred=deferred + len(running),
        retried=sum(bool(stale[parsed.trace_id]) for parsed in rows if parsed.trace_id not in gone),
        warnings=tuple(found), application_errors=len(crashed),
    )
