"""People's labels on a random sample of judged rows, and the report of people's rate from them, whether the rows
are a result in hand (``judge_summaries``, ``judge_answers``, ``judge_rewrites``: this module, no MLflow) or an MLflow
run's traces (``tracking.labels``, which reads the labels from people's feedback and reports with ``people_report``).

    from mlflow_genai_metrics.people_labels import draw_sample, people_from_table
    sample = draw_sample(result, 50, seed=7)     # the rows to label, drawn at random; keep it: sample.save("sample.json")
    sample.sheet().to_csv("to_label.csv")         # id, the card's question, an empty label column
    ...                                           # people answer the question on those rows (join the texts by id)
    report = people_from_table(result, sample, pd.read_csv("labelled.csv"))
    print(report.sentence)                        # people's strict_alignment, its interval, what was counted apart

**The draw** (``draw_sample``): ``n`` of the result's rows, without replacement, by ``numpy``'s generator seeded
with ``seed`` (drawn from the OS when not given, and recorded), over the rows in the order of their canonical ids,
so the draw depends on the seed and the rows alone (not on the order they were judged in). The estimate holds only
for rows drawn so, before anyone saw a verdict: keep the sample (``save``, ``TableSample.load``) beside the result
and draw once. Unlike a run, a result in hand has nowhere to record that a sample was drawn, so nothing can refuse a
second draw here: drawing again until the figures look good is choosing the rows.

**The labels**: a table with an id column and a label column (``yes``/``no``, ``true``/``false``, ``1``/``0`` or
booleans; empty: not labelled), people's answer to the card's question (``CARDS``). Labels on rows the sample did
not draw are counted apart and never used; a drawn row the judge failed on is left out, and counted. Refused, naming
the rows: a label that is not a verdict, an id labelled twice, an id the result has no row for, a sample drawn from
other rows than the result's.

**The report** (``people_report``, the one both routes use): ``people.ppi_proportion`` over the judged rows and the
labelled drawn ones, and, where the rows carry the model-free ``grounding`` score, ``people.recalibrated_grounding``
on the labelled drawn rows (in draw order, so its folds depend on the seed and the labels alone).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections import Counter
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .people import PeopleEstimate, Recalibration, ppi_proportion, recalibrated_grounding
from .summarization.gating import RECALIBRATED
from .summarization.ids import canonical_id
from .summarization.verdicts import normalise_verdict

# A card people answer, the question they are asked, the run figure it estimates, and the rows' column holding the
# judge's 0/1 answer to it.
CARDS = {
    "claim_alignment": ("Is every claim of the summary supported by the source? yes or no", "strict_alignment", "strictly_aligned"),
    "answer_faithfulness": ("Is every claim of the answer supported by the passages? yes or no", "strict_alignment", "strictly_aligned"),
    "instruction_following": ("Does the rewrite do what its instruction asks? yes or no", "instruction_following", "instruction_followed"),
}


@dataclass(frozen=True)
class PeopleReport:
    """People's rate estimated on judged rows (``estimate``, of ``people/<metric>``), and what was counted apart:
    labels on rows not drawn (never used), drawn rows the judge failed on, drawn rows not labelled yet, drawn rows
    whose labels decide nothing (people tied, or a value that is not yes/no); ``run_id`` where the rows are an MLflow
    run's."""

    metric: str
    estimate: PeopleEstimate
    outside_sample: int
    judge_failed: int
    unlabelled: int
    grounding: Recalibration | None = None  # None: the rows carry no grounding score
    run_id: str | None = None
    undecided: int = 0
    application_failed: int = 0  # of the drawn rows with no verdict, those whose application raised (no output to judge)
    other_sources: int = 0  # drawn rows with no person's label but feedback under the card from another source (CODE): not used

    @property
    def sentence(self) -> str:
        e = self.estimate
        head = (f"people's {self.metric}: {e.estimate:.3g}" + (f" [{e.ci_low:.3g}, {e.ci_high:.3g}]" if e.too_few is None else f" ({e.too_few})")
                + f" from {e.labelled} labels of {e.n} judged rows (PPI++, the judge's own rate {e.judge_rate:.3g})")
        apart = [f"{_count(self.outside_sample, 'label')} on rows not drawn (not used)"] * bool(self.outside_sample)
        judge_failed = self.judge_failed - self.application_failed
        apart += [f"{_count(judge_failed, 'drawn row')} the judge failed on (left out)"] * bool(judge_failed)
        apart += [f"{_count(self.application_failed, 'drawn row')} the application failed on (no output; left out here, "
                  "a gate counts such rows as failures)"] * bool(self.application_failed)
        apart += [f"{_count(self.unlabelled, 'drawn row')} not labelled yet"] * bool(self.unlabelled)
        apart += [f"{_count(self.other_sources, 'drawn row')} labelled by a source that is not a person (not used: a person's label "
                  "needs source=AssessmentSource(source_type='HUMAN', ...); mlflow.log_feedback's default is CODE)"] * bool(self.other_sources)
        apart += [f"{_count(self.undecided, 'drawn row')} whose labels decide nothing (people tied, or not yes/no; not used)"] * bool(self.undecided)
        return head + ("; " + "; ".join(apart) if apart else "")

    @property
    def grounding_sentence(self) -> str | None:
        """The re-calibrated grounding's line, naming the calibration (None without grounding scores)."""
        g = self.grounding
        if g is None:
            return None
        if g.too_few:
            return f"grounding re-calibrated on people's labels: {g.too_few}; the calibration used: {g.calibration}"
        return (f"grounding re-calibrated on people's labels: mean {g.mean:.3g}, grounded {g.grounded_rate:.3g}; calibration "
                f"error {g.ece_before:.3g} before, {g.ece_after:.3g} after (out-of-fold, {g.labelled} labels); the calibration used: {g.calibration}")

    @property
    def lines(self) -> list[str]:
        """What ``mgm people``, ``mgm agreement`` and ``mgm evaluate`` print: the estimate, and grounding's line."""
        return [self.sentence, *([self.grounding_sentence] if self.grounding is not None else [])]

    def metrics(self) -> dict[str, float]:
        """``people/<metric>`` with ``_ci_low``, ``_ci_high``, ``_n``, ``_labelled`` (below ``people.MIN_LABELS``
        labels only the last two: no figure a rule could pass on), and grounding's (``grounding_metrics``)."""
        figures = self.estimate.as_metrics(self.metric)
        if self.estimate.too_few is not None:
            figures = {k: v for k, v in figures.items() if k.endswith(("_n", "_labelled"))}
        return {**figures, **self.grounding_metrics()}

    def superseded(self) -> dict[str, float]:
        """NaN for every figure an estimate of this kind can log that this one does not (``metrics`` leaves them out
        below the labels they need): logged with it where an earlier estimate logged them, so a figure of that one (3
        labels, since tied down to 1) is no longer the run's latest, which a gate rule once passed on."""
        names, given = [*self.estimate.as_metrics(self.metric), *(RECALIBRATED if self.grounding is not None else ())], self.metrics()
        return {name: math.nan for name in names if name not in given}

    def grounding_metrics(self) -> dict[str, float]:
        """``people/grounding``, ``people/grounded_rate``, ``_ece_before``, ``_ece_after``, ``_labelled`` (only the
        last below the labels re-calibration needs)."""
        g = self.grounding
        if g is None:
            return {}
        return {name: float(getattr(g, field)) for name, field in RECALIBRATED.items() if not g.too_few or field == "labelled"}


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'s' if number != 1 else ''}"


def people_report(
    metric: str, judge: Mapping[Hashable, bool | None], people: Mapping[Hashable, bool | None], drawn: Sequence[Hashable],
    grounding: Mapping[Hashable, float | None] | None = None, *, run_id: str | None = None, undecided: Collection[Hashable] = (),
    application: Collection[Hashable] = (), other_sources: Collection[Hashable] = (),
) -> PeopleReport:
    """People's rate of ``metric`` from every row's judge verdict (``judge``: row -> True/False, None where the judge
    failed), people's verdicts (``people``: row -> True/False, None or absent where unlabelled), the drawn rows in
    draw order (``drawn``) and, where the rows have one, each row's grounding score (None: none). ``undecided``: rows
    with labels that decide no verdict (counted apart from those not labelled); ``application``: rows whose
    application raised (no verdict: counted apart from those the judge failed on); ``other_sources``: rows whose only
    feedback beside the judge's is from a source that is not a person (counted apart from those not labelled)."""
    drawn_set = set(drawn)
    pairs = [(judge[row], people[row]) for row in drawn if judge.get(row) is not None and people.get(row) is not None]
    scores = grounding or {}
    labelled = [row for row in drawn if people.get(row) is not None and scores.get(row) is not None]
    recalibration = None if all(v is None for v in scores.values()) else recalibrated_grounding(
        [np.nan if v is None else v for v in scores.values()], [scores[row] for row in labelled], [people[row] for row in labelled])
    return PeopleReport(
        metric,
        ppi_proportion([v for v in judge.values() if v is not None], [j for j, _ in pairs], [h for _, h in pairs]),
        outside_sample=sum(v is not None for row, v in people.items() if row not in drawn_set),
        judge_failed=sum(judge.get(row) is None for row in drawn),
        unlabelled=sum(judge.get(row) is not None and people.get(row) is None and row not in undecided and row not in other_sources for row in drawn),
        grounding=recalibration,
        run_id=run_id,
        undecided=sum(judge.get(row) is not None and people.get(row) is None and row in undecided for row in drawn),
        application_failed=sum(judge.get(row) is None and row in application for row in drawn),
        other_sources=sum(judge.get(row) is not None and people.get(row) is None and row not in undecided and row in other_sources for row in drawn),
    )


@dataclass(frozen=True)
class TableSample:
    """The rows of a result drawn for people to label: the seed, the card people answer, the drawn ids (canonical
    text, in draw order), how many rows they were drawn from, and a fingerprint of those rows' ids (a sample is
    refused for a result of other rows)."""

    seed: int
    card: str
    ids: tuple[str, ...]
    rows: int
    fingerprint: str

    def sheet(self) -> pd.DataFrame:
        """What people fill in: ``position`` (draw order), ``id``, ``question`` (the card's) and an empty ``label``."""
        return pd.DataFrame({"position": range(1, len(self.ids) + 1), "id": list(self.ids), "question": CARDS[self.card][0],
                             "label": pd.Series([None] * len(self.ids), dtype=object)})

    def save(self, path: str | Path) -> None:
        """The draw as JSON, to keep beside the result (``load`` reads it back)."""
        Path(path).write_text(json.dumps({"seed": self.seed, "card": self.card, "ids": list(self.ids), "rows": self.rows,
                                          "fingerprint": self.fingerprint}, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> TableSample:
        record = json.loads(Path(path).read_text())
        return cls(int(record["seed"]), record["card"], tuple(record["ids"]), int(record["rows"]), record["fingerprint"])


def _rows_of(result: Any) -> pd.DataFrame:
    rows = getattr(result, "rows", result)
    if not isinstance(rows, pd.DataFrame) or "id" not in rows:
        raise TypeError(f"expected a result of judged rows (judge_summaries, judge_answers, judge_rewrites) or its rows table, got {type(result).__name__}")
    return rows


def _card_of(result: Any, rows: pd.DataFrame, card: str | None) -> str:
    if card is not None:
        if card not in CARDS:
            raise ValueError(f"card {card!r}: people can answer {sorted(CARDS)}")
        if CARDS[card][2] not in rows:
            raise ValueError(f"card {card!r}: the rows have no {CARDS[card][2]!r} column (the judge's answer to its question)")
        return card
    if "instruction_followed" in rows:
        raise ValueError("these rewrites answer two questions people can label (claim_alignment, instruction_following): name one with card=")
    if rows is result:
        raise ValueError(f"a rows table does not say which task it is: name the card people answer with card= ({sorted(CARDS)})")
    return "answer_faithfulness" if "facts" in getattr(result, "TABLE_NAMES", ()) else "claim_alignment"


def _ids(rows: pd.DataFrame) -> list[str]:
    ids = [canonical_id(v) for v in rows["id"]]
    repeated = sorted(i for i, times in Counter(ids).items() if times > 1)
    if repeated:
        raise ValueError(f"the rows' ids repeat ({', '.join(map(repr, repeated[:5]))}): each row needs its own id to be labelled")
    return ids


def _fingerprint(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def draw_sample(result: Any, n: int, *, seed: int | None = None, card: str | None = None) -> TableSample:
    """Draw ``n`` of the result's rows for people to label (see the module). ``result``: what ``judge_summaries``,
    ``judge_answers`` or ``judge_rewrites`` returned (``card`` is then known, but for rewrites), or its ``rows``
    table with ``card``. Refused: ``n`` below 1 or above the rows there are, ids that repeat."""
    rows = _rows_of(result)
    chosen = _card_of(result, rows, card)
    ids = sorted(_ids(rows))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n={n!r}: the number of rows to draw is a whole number (between 1 and {len(ids)})")
    if not 1 <= n <= len(ids):
        raise ValueError(f"n={n}: the result has {len(ids)} rows; draw between 1 and {len(ids)}")
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    drawn = tuple(ids[i] for i in np.random.default_rng(seed).choice(len(ids), size=n, replace=False))
    return TableSample(seed, chosen, drawn, len(ids), _fingerprint(ids))


def people_from_table(result: Any, sample: TableSample, labels: pd.DataFrame, *, label_col: str = "label", id_col: str = "id") -> PeopleReport:
    """People's rate of the sample's card on the result's rows, from ``labels`` (a table with ``id_col`` and
    ``label_col``; see the module for what a label is and what is refused)."""
    rows = _rows_of(result)
    ids = _ids(rows)
    if _fingerprint(ids) != sample.fingerprint or len(ids) != sample.rows:
        raise ValueError(f"the sample (seed {sample.seed}) was drawn from {sample.rows} other rows than the result's {len(ids)}: "
                         "draw the sample from the result it estimates")
    _, metric, column = CARDS[sample.card]
    if column not in rows:
        raise ValueError(f"the rows have no {column!r} column: the judge's answer to the {sample.card} question")
    people = _read_labels(labels, label_col, id_col, set(ids))
    judge = {row: (None if pd.isna(v) else bool(v)) for row, v in zip(ids, rows[column])}  # empty where the judge failed
    grounding = None
    if "grounding" in rows:
        grounding = {row: (None if pd.isna(v) else float(v)) for row, v in zip(ids, rows["grounding"])}
    return people_report(metric, judge, people, list(sample.ids), grounding)


def _read_as_number(raw_id: Any, known: set[str], id_col: str) -> str:
    """Where a table read a text id as a number (``pd.read_csv`` reads the sheet's ``"007"`` as 7): the result's id it
    was, and how to read the table so."""
    if isinstance(raw_id, str):
        return ""
    alike = sorted(k for k in known if _number(k) == _number(raw_id))
    return (f" (the result has {', '.join(map(repr, alike[:3]))}: the table's ids were read as numbers; read it with "
            f"pd.read_csv(..., dtype={{{id_col!r}: str}}))") * bool(alike)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _read_labels(labels: pd.DataFrame, label_col: str, id_col: str, known: set[str]) -> dict[str, bool]:
    for column in (id_col, label_col):
        if column not in labels:
            raise ValueError(f"the labels table has no {column!r} column (it has {list(labels.columns)}): name it with "
                             f"{'id_col' if column == id_col else 'label_col'}=")
    found: dict[str, bool] = {}
    where: dict[str, int] = {}
    problems: list[str] = []
    for position, (raw_id, raw) in enumerate(zip(labels[id_col], labels[label_col])):
        value = raw.item() if isinstance(raw, np.generic) else raw
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or (isinstance(value, str) and not value.strip()):
            continue  # not labelled
        try:
            row = canonical_id(raw_id.item() if isinstance(raw_id, np.generic) else raw_id)
        except (TypeError, ValueError) as error:
            problems.append(f"table row {position}: the id {raw_id!r} cannot be read ({error})")
            continue
        verdict = normalise_verdict(value)
        if verdict is None:
            problems.append(f"id {row!r} (table row {position}): label {value!r} is not a verdict (yes/no, true/false, 1/0)")
        elif row not in known:
            problems.append(f"id {row!r} (table row {position}): the result has no row with this id{_read_as_number(raw_id, known, id_col)}")
        elif row in found:
            problems.append(f"id {row!r} is labelled twice (table rows {where[row]} and {position})")
        else:
            found[row], where[row] = verdict, position
    if problems:
        raise ValueError(f"{len(problems)} labels cannot be used: " + "; ".join(problems[:10]) + ("; ..." if len(problems) > 10 else ""))
    return found
