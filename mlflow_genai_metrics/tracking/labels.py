"""People's labels on a random sample of a run's rows, and people's rate estimated from them.

    from mlflow_genai_metrics.tracking import label_sample, people_estimate
    sample = label_sample(run_id, 50)          # drawn at random, seeded, recorded on the run; print(sample.where)
    ...                                         # people answer the card's question on those traces in MLflow's UI
    report = people_estimate(run_id)            # logs people/strict_alignment, _ci_low, _ci_high, _n, _labelled

**The sample.** The estimate (``people.ppi_proportion``) holds only for rows drawn at random before anyone saw a
verdict, so the tool draws them: ``n`` of the run's evaluated traces (in the order of their rows' ids, so the draw depends on the
seed and the rows alone), without replacement, with ``numpy``'s generator seeded by ``seed`` (drawn from the OS when not given),
once per run: a second draw is refused, since drawing again until the figures look good is choosing the rows. The
run records the sample (tags ``mgm.label_sample.seed``, ``.n``, ``.card``, ``.queue``; the artifact
``mgm_label_sample.json`` with the traces and row ids), each drawn trace is tagged ``mgm.label_sample``, and the
traces go into an MLflow review queue whose question is the card's own (a label schema named after it: people
answer ``claim_alignment`` yes or no as the judge did), where the installed MLflow has review queues.

**The labels** are read as ``judge_agreement`` reads them (``summarization.verdicts``): per trace, the judge's latest
valid verdict under the card's name and the majority of people's (``HUMAN`` source) latest votes. Labels on traces
the tool did not draw are counted apart and never used; a drawn trace the judge failed on is left out of the
estimate with its row, and counted, as is one whose labels decide nothing (people tied, or not yes/no).

**The estimate** is people's rate of the card's question over the run's judged rows: PPI++ with an interval of
exact pieces (``people``), written with what was counted apart in ``mgm/people.json`` and logged as ``people/<metric>`` (``strict_alignment`` for ``claim_alignment`` and
``answer_faithfulness``, ``instruction_following`` for ``instruction_following``) with ``_ci_low``, ``_ci_high``,
``_n`` (rows judged), ``_labelled``; below ``people.MIN_LABELS`` labels only ``_n`` and ``_labelled`` are logged (no
figure a rule could pass on) and the run's ``mgm.people.<metric>`` tag says "too few labels", as a gate rule on it does.

**Grounding re-calibrated on the same labels**, where the run's traces carry the model-free ``grounding`` score:
``people.recalibrated_grounding`` on the labelled drawn rows (people's verdict on the card as "consistent"),
cross-validated there, logged as ``people/grounding`` (the mean re-calibrated score), ``people/grounded_rate`` (that
mean's share of the rows, those grounding ranks highest, called grounded), ``people/grounding_ece_before`` and ``_ece_after`` (calibration error on the labels,
after: out-of-fold) and ``people/grounding_labelled``, the calibration used named in the tag
``mgm.grounding.recalibrated_on`` and the line in ``mgm.people.grounding``; below ``people.MIN_RECALIBRATION_LABELS``
labels only ``_labelled``, the shipped calibration named and "too few labels" said instead of a number.

**Two runs' estimates compared**: ``people_difference(first, second)`` (``people.estimate_difference``: MOVER of the
two intervals), which ``compare_runs`` adds to its table where both runs have an estimate; it assumes
``people.DIFFERENCE_ASSUMES``.
"""

from __future__ import annotations

import math
import secrets
import time
from collections import Counter
from dataclasses import dataclass

import mlflow
import numpy as np
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracking import MlflowClient

from ..people import PeopleDifference, PeopleEstimate, estimate_difference
from ..people_labels import CARDS, PeopleReport, people_report
from ..summarization.verdicts import latest_feedback, trace_verdicts
from .feedback import application_card
from .pipeline import root_span
from .run_logging import ARTIFACT_DIR, set_note_section, set_tags, tag_value

SAMPLE_TAG = "mgm.label_sample"  # on each drawn trace (its draw position), and the prefix of the run's record
SAMPLE_ARTIFACT = "mgm_label_sample.json"
PEOPLE_REPORT = f"{ARTIFACT_DIR}/people.json"  # the latest estimate: its lines, figures and what was counted apart
PEOPLE_TAG = "mgm.people"
GROUNDING = "grounding"  # the model-free check's feedback name on a trace (a number in [0, 1])
RECALIBRATED_TAG = "mgm.grounding.recalibrated_on"  # beside run_logging's mgm.grounding.calibrated_on
@dataclass(frozen=True)
class LabelSample:
    """The rows drawn for people to label: the run, the seed, the card people answer, the traces (in draw order) and
    their row ids, the review queue (None: the installed MLflow has none; ``where`` says what to do instead)."""

    run_id: str
    seed: int
    card: str
    trace_ids: tuple[str, ...]
    row_ids: tuple[str, ...]
    evaluated: int
    queue: str | None
    where: str


def _evaluated_traces(run_id: str) -> list:
    """The run's evaluated traces (what its Traces tab shows of the evaluation), with their assessments, in the order
    of their rows' ids: a draw depends on the seed and the rows alone, not on the ids MLflow gave the traces. Refused
    where row ids repeat (the run holds two evaluations of the same rows, say): a row counted twice would weigh twice
    in the judge's rate and could be drawn twice."""
    run = MlflowClient().get_run(run_id)
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list")
    evaluated = sorted(((_row_id(t), t) for t in traces if TraceTagKey.EVAL_REQUEST_ID in t.info.tags), key=lambda p: (p[0], p[1].info.trace_id))
    repeated = sorted(row for row, times in Counter(row for row, _ in evaluated).items() if times > 1)
    if repeated:
        raise ValueError(f"run {run_id}'s evaluated traces repeat row ids ({', '.join(map(repr, repeated[:5]))}"
                         f"{', ...' if len(repeated) > 5 else ''}: {len(repeated)} in all): each row must be drawn from once; "
                         "the run holds more than one evaluation of them? evaluate into a new run")
    return [t for _, t in evaluated]


def _card_of(traces: list, card: str | None) -> str:
    found = {a.name for t in traces for a in t.info.assessments if a.name in CARDS}
    if card is not None:
        if card not in CARDS:
            raise ValueError(f"card {card!r}: people can answer {sorted(CARDS)}")
        if found and card not in found:  # the run's one sample, drawn for a card no judge gave: no estimate ever
            raise ValueError(f"card {card!r}: the run's traces carry {sorted(found)}, not it (a run with no judge's card, the "
                             "grounding check alone, takes any card people answer)")
        return card
    if len(found) != 1:
        raise ValueError(f"the run's traces carry {sorted(found) or 'none'} of the cards people answer ({sorted(CARDS)}): name one with card=")
    return found.pop()


def _row_id(trace) -> str:
    root = root_span(trace)
    inputs = root.inputs if root is not None and isinstance(root.inputs, dict) else {}
    return str(inputs.get("id", trace.info.trace_id))


def label_sample(run_id: str, n: int, *, seed: int | None = None, card: str | None = None) -> LabelSample:
    """Draw ``n`` of the run's evaluated rows for people to label, record the draw on the run and mark the traces
    (see the module's docstring). Refused before anything is written: ``n`` below 1 or above the rows there are, a
    run that has a sample already, a run whose traces carry no card people answer."""
    client = MlflowClient()
    run = client.get_run(run_id)
    if f"{SAMPLE_TAG}.seed" in run.data.tags:
        tags = run.data.tags
        raise ValueError(f"run {run_id} has a sample already ({tags.get(f'{SAMPLE_TAG}.n')} rows, seed {tags[f'{SAMPLE_TAG}.seed']}): "
                         "label those; drawing again would let the labelled rows be chosen")
    traces = _evaluated_traces(run_id)
    if not 1 <= n <= len(traces):
        raise ValueError(f"n={n}: run {run_id} has {len(traces)} evaluated rows; draw between 1 and {len(traces)}")
    chosen_card = _card_of(traces, card)
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    drawn = [traces[i] for i in np.random.default_rng(seed).choice(len(traces), size=n, replace=False)]
    trace_ids, row_ids = tuple(t.info.trace_id for t in drawn), tuple(_row_id(t) for t in drawn)
    # The draw is recorded first: whatever fails after, the run has its one sample and a second draw is refused.
    client.log_dict(run_id, {"seed": seed, "card": chosen_card, "evaluated": len(traces), "trace_ids": list(trace_ids),
                             "row_ids": list(row_ids)}, SAMPLE_ARTIFACT)
    set_tags(client, run_id, {f"{SAMPLE_TAG}.{key}": str(value) for key, value in {"n": n, "card": chosen_card, "seed": seed}.items()})
    for position, trace_id in enumerate(trace_ids, start=1):
        client.set_trace_tag(trace_id, SAMPLE_TAG, str(position))
    queue, where = _review_queue(run, chosen_card, list(trace_ids))
    client.set_tag(run_id, f"{SAMPLE_TAG}.queue", queue or "none")
    return LabelSample(run_id, seed, chosen_card, trace_ids, row_ids, len(traces), queue, where)


def _review_queue(run, card: str, trace_ids: list[str]) -> tuple[str | None, str]:
    """The drawn traces in a review queue asking the card's question, and where people find them."""
    experiment_id = run.info.experiment_id
    fallback = (f"in the MLflow UI, open run {run.info.run_id}'s Traces tab, search the traces tagged {SAMPLE_TAG}, and on each "
                f"add feedback named {card!r} (yes or no) as a person")
    try:
        from mlflow.genai import label_schemas, review_queues

        schemas = {s.name: s for s in label_schemas.list_label_schemas(experiment_id=experiment_id)}
        question = CARDS[card][0]
        found = schemas.get(card)
        if found is not None and (found.type != "feedback" or sorted(getattr(found.input, "options", None) or ()) != ["no", "yes"]):
            # the experiment's own schema under the card's name asks something else (a 1-5 rating: its 1 would read as yes)
            return None, (f"{fallback} (no review queue: the experiment's label schema {card!r} asks for {found.input}, not yes or "
                          "no, and people's answers under that name are read as the card's verdicts)")
        schema = found or label_schemas.create_label_schema(
            name=card, type="feedback", input=label_schemas.InputCategorical(options=["yes", "no"]), instruction=question,
            experiment_id=experiment_id)
        name = f"mgm sample of run {run.info.run_id}"
        queue = review_queues.create_review_queue(name, queue_type="custom", schema_ids=[schema.schema_id], experiment_id=experiment_id)
        review_queues.add_items_to_review_queue(queue.queue_id, item_ids=trace_ids)
    except (ImportError, MlflowException) as error:  # no review queues here: the tag still marks them
        return None, f"{fallback} (no review queue: {' '.join(str(error).split())[:200]})"
    return queue.queue_id, f"in the MLflow UI, experiment {experiment_id}: review queue {name!r} ({len(trace_ids)} traces), answering {card!r}"


def people_estimate(run_id: str, *, log: bool = True) -> PeopleReport:
    """People's rate on the run from the labels on its sample (``label_sample``), logged on the run with ``log``.
    Refused when the run has no sample."""
    client = MlflowClient()
    tags = client.get_run(run_id).data.tags
    if f"{SAMPLE_TAG}.seed" not in tags:
        raise ValueError(f"run {run_id} has no sample to estimate from: draw one first (label_sample, mgm label-sample), then label it")
    card = tags[f"{SAMPLE_TAG}.card"]
    metric = CARDS[card][1]
    traces = _evaluated_traces(run_id)
    verdicts = {t.info.trace_id: trace_verdicts(t.info.trace_id, t.info.assessments, card) for t in traces}
    # in draw order: the re-calibration's folds then depend on the seed and the labels alone
    drawn = [t.info.trace_id for t in sorted((t for t in traces if SAMPLE_TAG in t.info.tags), key=lambda t: int(t.info.tags[SAMPLE_TAG]))]
    report = people_report(metric, {t: v.judge for t, v in verdicts.items()}, {t: v.human for t, v in verdicts.items()}, drawn,
                           {t.info.trace_id: _grounding_of(t) for t in traces}, run_id=run_id,
                           undecided={t for t, v in verdicts.items() if v.people and v.human is None},
                           application={t.info.trace_id for t in traces if _application_failed(t, card)},
                           other_sources={t for t, v in verdicts.items() if v.other_sources and not v.people})
    if log:
        # below the labels an interval needs, no figure a rule could pass on (the tag says why); one an earlier
        # estimate logged is superseded by NaN
        logged = client.get_run(run_id).data.metrics
        figures = {**{name: value for name, value in report.superseded().items() if name in logged}, **report.metrics()}
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(name, float(value), now, 0) for name, value in figures.items()])
        client.set_tag(run_id, f"{PEOPLE_TAG}.{metric}", tag_value(report.sentence))
        if report.grounding is not None:
            client.set_tag(run_id, f"{PEOPLE_TAG}.{GROUNDING}", tag_value(report.grounding_sentence))
            client.set_tag(run_id, RECALIBRATED_TAG, report.grounding.calibration)
        set_note_section(client, run_id, "people's estimate", "\n\n".join(f"**{line[:1].upper()}{line[1:]}**" if k == 0 else line
                                                                          for k, line in enumerate(report.lines)))
        client.log_dict(run_id, {
            "card": card, "lines": report.lines, "metrics": {k: None if math.isnan(v) else v for k, v in report.metrics().items()}, "labelled": report.estimate.labelled, "rows": report.estimate.n,
            "outside_sample": report.outside_sample, "judge_failed": report.judge_failed,
            "application_failed": report.application_failed, "unlabelled": report.unlabelled,
            "undecided": report.undecided, "other_sources": report.other_sources, "calibration": None if report.grounding is None else report.grounding.calibration},
            PEOPLE_REPORT)
    return report


def _application_failed(trace, card: str) -> bool:
    """Whether the trace's judge card says its application raised (``APPLICATION_ERROR``: nothing was judged)."""
    return any(a.name == card and application_card(a) for a in trace.info.assessments)


def _grounding_of(trace) -> float | None:
    """The trace's latest valid ``grounding`` score (None: none, or not a number)."""
    found = [a for a in trace.info.assessments if a.name == GROUNDING and getattr(a, "feedback", None) is not None
             and a.valid is not False and a.error is None]
    value = latest_feedback(found).value if found else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def people_difference(first_run_id: str, second_run_id: str, metric: str | None = None) -> PeopleDifference:
    """The second run's people's estimate minus the first's (as logged by ``people_estimate``), with its interval
    (``people.estimate_difference``). Refused when either run has no estimate, or the two answer different questions."""
    client = MlflowClient()
    runs = [client.get_run(run_id) for run_id in (first_run_id, second_run_id)]
    cards = [run.data.tags.get(f"{SAMPLE_TAG}.card") for run in runs]
    if cards[0] != cards[1]:
        raise ValueError(f"runs {first_run_id} and {second_run_id} were labelled on different questions ({cards[0]} and {cards[1]}): "
                         "their people's estimates are not of the same rate")
    metric = metric or (CARDS[cards[0]][1] if cards[0] in CARDS else "strict_alignment")
    found = [PeopleEstimate.from_metrics(run.data.metrics, metric) for run in runs]
    for run, estimate in zip(runs, found):
        if estimate is None:
            raise ValueError(f"run {run.info.run_id} has no people/{metric}: draw a sample (mgm label-sample), label it, then mgm people")
    return estimate_difference(found[0], found[1])


def people_lines(run_id: str, *, log: bool = False) -> list[str]:
    """The people's estimate lines of a run that has a sample (none for a run without one): what ``mgm evaluate``
    and ``mgm agreement`` print after their figures."""
    if f"{SAMPLE_TAG}.seed" not in MlflowClient().get_run(run_id).data.tags:
        return []
    return people_estimate(run_id, log=log).lines
