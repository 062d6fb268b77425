"""B against A, paired row by row: the one place that decides which rows may be compared, and how.

Rows pair when they share an id (in its stored text form, ``ids.canonical_id``) *and* the same source text (its
fingerprint, ``source_key``); a shared id whose sources differ is an error naming it. A pair where either row has a
judge error leaves the comparison and is counted, never scored. Fewer usable pairs than half of either run is
refused unless ``allow_partial=True``, and then the comparison says so. A metric that reads another input pairs
only the rows where that input is the same on both sides too: the reference (ROUGE, BLEU, chrF, TER:
``reference_key``) and the source's key points (coverage: ``key_points_key``); the other pairs leave that metric
alone, and the table says how many and why.

Each metric is tested as its kind says (``paired``: exact McNemar, sign-flip permutation, approximate
randomization), with "too few pairs to test" where the pairs could not reach the level, and a Holm-adjusted
p-value beside each raw one. ``compare_runs`` and the registry gate load MLflow runs into ``compare_results``;
they do not pair rows or test differences themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..paired import Alternative, PairedTest, holm, paired_proportion, paired_ratio, paired_skew_corrected_t
from ..reference import paired_corpus_difference, statistics_column
from ..signature import FAMILY_PARTS, Signature, SignatureMismatchError, check_same_task
from ..stats import StatisticsOptions
from .ids import canonical_id
from .metrics import METRICS, MetricSpec
from .options import resolve
from .scoring import rate_statistics
from .unreadable import content_failed, counted_against, infrastructure_failed

# The inputs beside the source that a metric family's values depend on: their fingerprints must match for a pair
# to count in that family's comparison (the column, and what the table says when they differ).
INPUT_KEYS: dict[str, tuple[str, str]] = {
    "reference": ("reference_key", "references differ"),
    "coverage": ("key_points_key", "key points differ"),
}


class SourceMismatchError(ValueError):
    """Two runs use the same row id for different source texts: pairing them would compare different articles."""


class InsufficientPairsError(ValueError):
    """Too few usable pairs (shared, same source, judged on both sides) for a comparison to speak for the runs."""


class Comparable(Protocol):
    """What a comparison reads of a run: its per-row table (``id``, ``source_key``, ``error``, the per-row values)
    and its signature. ``SummarizationResult`` and ``tracking.EvaluatedRun`` both are."""

    @property
    def rows(self) -> pd.DataFrame: ...

    @property
    def signature(self) -> str: ...


@dataclass(frozen=True)
class Pairing:
    """The usable pairs of two row tables, in A's order, and what was left out of them."""

    rows_a: pd.DataFrame
    rows_b: pd.DataFrame
    rows_in_a: int
    rows_in_b: int
    pairs_dropped_for_errors: int
    only_in_a: int
    only_in_b: int
    pairs_unreadable: int = 0  # pairs kept with a content failure on a side, counted against it (a decision)
    dropped_unreadable: int = 0  # of the pairs dropped (not a decision), those a side's own output made unjudgeable

    @property
    def pairs_used(self) -> int:
        return len(self.rows_a)

    @property
    def partial(self) -> bool:
        """Fewer usable pairs than half of either run (a handful of one run's rows does not speak for it)."""
        return 2 * self.pairs_used < max(self.rows_in_a, self.rows_in_b)

    def describe(self) -> str:
        return rows_note(self.pairs_used, self.pairs_dropped_for_errors, self.only_in_a, self.only_in_b, self.pairs_unreadable,
                         self.dropped_unreadable)


def rows_note(pairs_used: int, dropped_for_errors: int, only_in_a: int, only_in_b: int, unreadable: int = 0,
              dropped_unreadable: int = 0) -> str:
    """What a comparison stands on, in one line (tables, plots and the gate's tags say the same); pairs dropped for a
    side's own output (``content_failed``: a decision counts those against the side) said apart."""
    counted = f" ({unreadable} with an output the judge could not read, counted as a failure of its side)" if unreadable else ""
    theirs = (f" ({dropped_unreadable} of them for an output of a side that could not be judged, which a decision would count "
              "against that side)") if dropped_unreadable else ""
    return (f"{pairs_used} pairs used{counted}, {dropped_for_errors} dropped for judge errors{theirs}, "
            f"{only_in_a} rows only in A, {only_in_b} only in B")


def _keyed(rows: pd.DataFrame, side: str) -> pd.DataFrame:
    if "source_key" not in rows.columns:
        raise SourceMismatchError(
            f"run {side}'s rows carry no source fingerprint (source_key): it was logged by an older version of "
            "mlflow_genai_metrics, so its rows cannot be paired safely. Evaluate it again (the judge's cache makes "
            "that free)."
        )
    keys = rows["id"].map(canonical_id)
    repeated = keys[keys.duplicated()].unique().tolist()
    if repeated:
        raise ValueError(f"run {side} has repeated row ids {repeated[:10]}: rows cannot be paired")
    return rows.set_axis(pd.Index(keys, name="row_key"))


def _failed(rows: pd.DataFrame, decision: bool = False) -> pd.Series:
    """The rows whose pairs leave: every judge failure, or (a decision) the infrastructure's only."""
    return infrastructure_failed(rows) if decision else rows["error"].fillna("").astype(str) != ""


def pair_rows(a: pd.DataFrame, b: pd.DataFrame, *, allow_partial: bool = False, decision: bool = False) -> Pairing:
    """Pair two per-row tables by id and source; see the module's docstring for the rules. With
    ``decision=True`` a pair whose only failures are content failures stays, to be counted against
    the side that wrote it (``paired_table``); only infrastructure failures leave the pair."""
    keyed_a, keyed_b = _keyed(a, "A"), _keyed(b, "B")
    shared = [key for key in keyed_a.index if key in keyed_b.index]
    if shared:
        differ = keyed_a.loc[shared, "source_key"].astype(str) != keyed_b.loc[shared, "source_key"].astype(str)
        mismatched = differ[differ].index.tolist()
        if mismatched:
            shown = ", ".join(repr(key) for key in mismatched[:10])
            more = f" and {len(mismatched) - 10} more" if len(mismatched) > 10 else ""
            fix = ("judge both runs' rewrites under the same instruction for each input, each input and instruction under one id, the same"
                   if "instruction_followed" in a and "instruction_followed" in b else "give each article the same id")  # ids: no fix there
            raise SourceMismatchError(
                f"{len(mismatched)} row id(s) name different source texts in the two runs (for rewrites: inputs or "
                f"instructions; for answers: questions or passages): {shown}{more}. Pairing them would compare outputs "
                f"of different tasks; {fix} in every run (e.g. an id column) and evaluate again."
            )
    failed_a, failed_b = _failed(keyed_a, decision), _failed(keyed_b, decision)
    usable = [key for key in shared if not failed_a[key] and not failed_b[key]]
    unreadable_a, unreadable_b = content_failed(keyed_a), content_failed(keyed_b)
    pairing = Pairing(
        rows_a=keyed_a.loc[usable].reset_index(drop=True),
        rows_b=keyed_b.loc[usable].reset_index(drop=True),
        rows_in_a=len(keyed_a),
        rows_in_b=len(keyed_b),
        pairs_dropped_for_errors=len(shared) - len(usable),
        only_in_a=len(keyed_a) - len(shared),
        only_in_b=len(keyed_b) - len(shared),
        pairs_unreadable=sum(1 for key in usable if unreadable_a[key] or unreadable_b[key]),
        dropped_unreadable=sum(1 for key in shared if key not in usable and (unreadable_a[key] or unreadable_b[key])),
    )
    if pairing.pairs_used == 0:
        raise InsufficientPairsError(f"no usable pair of rows: nothing to compare ({pairing.describe()})")
    if pairing.partial and not allow_partial:
        larger = "A" if pairing.rows_in_a >= pairing.rows_in_b else "B"
        raise InsufficientPairsError(
            f"only {pairing.pairs_used} usable pairs, fewer than half of run {larger}'s "
            f"{max(pairing.rows_in_a, pairing.rows_in_b)} rows: {pairing.describe()}. A comparison on so few rows "
            "does not speak for the runs (a handful of chosen rows can say anything); pass allow_partial=True to "
            "compare them anyway (the comparison is then labelled partial)."
        )
    return pairing


def direction(name: str) -> str:
    """"higher" or "lower": which way the aggregate ``name`` is better, from the metric registry."""
    spec = METRICS.aggregate(name)
    if spec is None:
        raise ValueError(f"no aggregate metric named {name!r}")
    return "higher" if spec.greater_is_better else "lower"


def _same_input(rows_a: pd.DataFrame, rows_b: pd.DataFrame, family: str) -> tuple[np.ndarray, str]:
    """Which pairs share the inputs beside the source that ``family``'s values read (all, for most families),
    and what to say of the others."""
    if family not in INPUT_KEYS:
        return np.ones(len(rows_a), dtype=bool), ""
    column, why = INPUT_KEYS[family]
    if column not in rows_a or column not in rows_b:  # logged before fingerprints were kept: nothing can be checked
        return np.zeros(len(rows_a), dtype=bool), f"no {column} in a run's rows (logged by an older version)"
    keys_a, keys_b = rows_a[column].astype("string"), rows_b[column].astype("string")
    same = (keys_a == keys_b).fillna(False).to_numpy(dtype=bool)
    return same, why


def _subset(statistic, mask: np.ndarray):
    return type(statistic)(statistic.numerator[mask], statistic.denominator[mask])


def _test(spec: MetricSpec, a, b, *, alternative: Alternative, statistics: StatisticsOptions, decision: bool = False) -> PairedTest:
    if spec.kind == "proportion":
        return paired_proportion(a, b, alternative=alternative, confidence=statistics.confidence)
    if decision:  # a decision asks whether B's aggregate is larger, not whether the pairs are exchangeable
        return paired_skew_corrected_t(a, b, kind=spec.kind, alternative=alternative, confidence=statistics.confidence)
    return paired_ratio(a, b, kind=spec.kind, alternative=alternative, resamples=statistics.resamples, seed=statistics.seed,
                        confidence=statistics.confidence)


def paired_table(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    *,
    statistics: StatisticsOptions = StatisticsOptions(),
    left_out: set[str] = frozenset(),
    metrics: list[str] | None = None,
    alternatives: dict[str, Alternative] | None = None,
    decision: bool = False,
) -> pd.DataFrame:
    """B minus A for every registered aggregate both row tables support (but those of the families ``left_out``,
    and only ``metrics`` when given); row i of each table is the same pair. Each metric's test is two-sided unless
    ``alternatives`` names it ("greater": B - A > 0). Holm's adjustment runs over the metrics of the table. With
    ``decision`` (a decision: ``pair_rows`` kept the pairs with content failures) each metric is read as
    ``counted_against`` says, the judge error rate is compared too, and a mean or ratio is tested with
    ``paired_skew_corrected_t`` (is B's aggregate larger?) instead of the sign-flip test (are the pairs exchangeable?)."""
    stats_a, stats_b = rate_statistics(rows_a), rate_statistics(rows_b)
    wanted = set(metrics) if metrics is not None else None
    records = []
    for spec in METRICS.aggregates():
        if spec.family in left_out or (wanted is not None and spec.name not in wanted):
            continue
        if spec.name == "judge_error_rate" and not decision:
            continue  # errored pairs are out of a plain comparison: the error rate is 0 on both sides
        alternative = (alternatives or {}).get(spec.name, "two-sided")
        same, why = _same_input(rows_a, rows_b, spec.family)
        options = dict(alternative=alternative, statistics=statistics)
        if spec.kind == "corpus":
            column = statistics_column(spec.name)
            if column not in rows_a or column not in rows_b:
                continue
            # Corpus BLEU, chrF, TER: each pair's sacreBLEU statistics under A and under B.
            statistics_a, statistics_b = ([list(map(float, cell)) for cell in rows[column][same]] for rows in (rows_a, rows_b))
            paired = paired_corpus_difference(spec.name, statistics_a, statistics_b, **options)
        elif spec.name in stats_a and spec.name in stats_b:
            a, b = stats_a[spec.name], stats_b[spec.name]
            if decision:
                a, b = counted_against(spec, a, b, rows_a, rows_b)
            paired = _test(spec, _subset(a, same), _subset(b, same), decision=decision, **options)
        else:
            continue
        # pairs the metric has no value for on a side (an empty or unreadable summary's grounding): they left the
        # test unsaid ("12 pairs used" over 8), and they were the weaker run's worst rows
        valueless = max(int(same.sum()) - paired.n, 0) if spec.kind != "corpus" else 0
        records.append(_record(spec, paired, int((~same).sum()), why, valueless))
    return with_holm(pd.DataFrame.from_records(records, columns=TABLE_COLUMNS), statistics.confidence)


TABLE_COLUMNS = [
    "metric", "kind", "test", "direction", "a", "b", "difference", "ci_low", "ci_high", "p_value", "p_holm",
    "significant", "better", "n", "informative", "left_out", "note",
]


def _record(spec: MetricSpec, paired: PairedTest, left_out: int, why: str, valueless: int = 0) -> dict:
    notes = [paired.note] if paired.note else []
    if left_out:
        notes.append(f"{left_out} pairs left out: {why}")
    if valueless:
        notes.append(f"{valueless} pairs left out: no value on a side (a row {spec.name} does not score, e.g. an empty summary)")
    higher = spec.greater_is_better
    better = ""
    if np.isfinite(paired.difference) and paired.difference != 0:
        better = "B" if (paired.difference > 0) == higher else "A"
    return {
        "metric": spec.name, "kind": spec.kind, "test": paired.test, "direction": "higher" if higher else "lower",
        "a": paired.a, "b": paired.b, "difference": paired.difference, "ci_low": paired.ci_low, "ci_high": paired.ci_high,
        "p_value": paired.p_value, "p_holm": np.nan, "significant": False, "better": better, "n": paired.n,
        "informative": paired.informative, "left_out": left_out + valueless, "note": "; ".join(notes),
    }


def with_holm(table: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """``table`` with ``p_holm`` (Holm's adjustment over its rows' p-values; NaN where untested) and
    ``significant`` (the adjusted p-value below 1 - ``confidence``) recomputed: call it again on a subset of
    metrics, since the adjustment depends on which are shown."""
    table = table.copy()
    table["p_holm"] = holm(table["p_value"].tolist()) if len(table) else []
    table["significant"] = (table["p_holm"] < 1 - confidence).fillna(False).astype(bool)
    return table


@dataclass(frozen=True)
class Comparison:
    """B minus A for every aggregate, over the usable pairs.

    ``table`` columns: ``metric``, ``kind`` (proportion, mean, ratio, corpus), ``test`` (the test its kind takes),
    ``direction`` (which way is better: "higher" or "lower"), ``a``, ``b``, ``difference`` (b - a), ``ci_low``,
    ``ci_high`` (the interval of the difference; NaN below the n where it holds its coverage), ``p_value``
    (two-sided; NaN with "too few pairs to test" in ``note`` when the pairs could not reach the level),
    ``p_holm`` (Holm-adjusted over the table's metrics), ``significant`` (``p_holm`` < 1 - confidence),
    ``better`` ("B", "A" or "" by the difference's sign and the direction), ``n`` (the pairs the metric stands
    on), ``informative`` (the pairs that differ), ``left_out`` (pairs left out because an input the metric reads
    differs, or because a side has no value for it) and ``note`` (saying which). ``pairs_used``, ``pairs_dropped_for_errors``, ``only_in_a`` and ``only_in_b`` say which
    rows it stands on.
    """

    table: pd.DataFrame
    pairs_used: int
    pairs_dropped_for_errors: int
    only_in_a: int
    only_in_b: int
    partial: bool
    signature_a: str
    signature_b: str
    signature_differences: list[str]
    pairs_unreadable: int = 0
    dropped_unreadable: int = 0  # of the pairs dropped, those a side's own output made unjudgeable (``rows_note``)
    on_request: bool = False  # compared although the signatures differ (``allow_signature_mismatch``)
    families_left_out: tuple[str, ...] = ()  # metric families not compared: the signature parts they read differ

    shared_rows = property(lambda self: self.pairs_used, doc="The pairs the numbers stand on (``pairs_used``).")

    @property
    def signatures_match(self) -> bool:
        return not self.signature_differences

    @property
    def rows_note(self) -> str:
        return rows_note(self.pairs_used, self.pairs_dropped_for_errors, self.only_in_a, self.only_in_b, self.pairs_unreadable,
                         self.dropped_unreadable)

    @property
    def label(self) -> str:
        parts = [f"paired comparison: {self.rows_note}"]
        if self.partial:
            parts.insert(0, "PARTIAL: fewer usable pairs than half of either run, compared on request")
        if not self.signatures_match:
            parts.insert(0, f"NOT COMPARABLE AS IS: signatures differ ({'; '.join(self.signature_differences)}); compared on request"
                         if self.on_request else f"signatures differ ({'; '.join(self.signature_differences)}): {self.left_out_note}")
        return "; ".join(parts)

    @property
    def left_out_note(self) -> str:
        """Which metric families the comparison left out, since what their numbers depend on differs."""
        return f"{', '.join(self.families_left_out)} metrics left out" if self.families_left_out else "nothing left out"

    def difference(self, metric: str) -> pd.Series:
        return self.table.set_index("metric").loc[metric]


def compare_results(
    a: Comparable,
    b: Comparable,
    *,
    statistics: StatisticsOptions | None = None,
    allow_signature_mismatch: bool = False,
    allow_partial: bool = False,
    metrics: list[str] | None = None,
    alternatives: dict[str, Alternative] | None = None,
    decision: bool = False,
    **keywords: Any,
) -> Comparison:
    """Compare B with A over the usable pairs of rows, each metric with the test of its kind (``paired_table``).

    Refuses (``SignatureMismatchError``) when the signatures differ, unless ``allow_signature_mismatch=True``;
    (``SourceMismatchError``) when a shared id names different sources; (``InsufficientPairsError``) when fewer
    usable pairs than half of either run remain once rows with a judge error on either side are left out,
    unless ``allow_partial=True``. A comparison made on request says so in its ``label``. ``metrics`` limits the
    table (and Holm's adjustment) to those aggregates; ``alternatives`` makes a metric's test one-sided
    (``{"strict_alignment": "greater"}``: B - A > 0), as a decision does; ``decision=True`` (the gate)
    keeps the pairs where a side's output made the judge fail and counts them against that side (``counted_against``),
    leaving out only infrastructure failures. ``statistics`` (a
    ``stats.StatisticsOptions``, or its fields as keywords: ``resamples=200``) sets the intervals and the level.
    """
    statistics = resolve("compare_results", keywords, statistics=statistics, judging=False).statistics
    signature_a, signature_b = Signature.parse(a.signature), Signature.parse(b.signature)
    check_same_task(signature_a, signature_b)  # refused even with allow_signature_mismatch: no judge makes them alike
    # Compared per metric: a family is left out when the parts its numbers depend on differ.
    differing = {family: signature_a.differences(signature_b, parts) for family, parts in FAMILY_PARTS.items()}
    differing = {family: found for family, found in differing.items() if found}
    differences = signature_a.differences(signature_b, ("judge", "coverage", "reference", "grounding"))
    # key-point prompts only one run asked leave its coverage metrics out (the other has none); other ones refuse
    coverage_on_both = signature_a.part_fields("coverage") and signature_b.part_fields("coverage")
    if ("judge" in differing or coverage_on_both and "coverage" in differing) and not allow_signature_mismatch:
        raise SignatureMismatchError(
            "these results come from different judge settings or prompts and are not comparable: "
            + "; ".join(differing.get("judge") or differing["coverage"])
            + ". Rejudge both with the same judge, or pass allow_signature_mismatch=True to compare anyway."
        )
    left_out = set() if allow_signature_mismatch else set(differing)
    pairing = pair_rows(a.rows, b.rows, allow_partial=allow_partial, decision=decision)
    table = paired_table(
        pairing.rows_a, pairing.rows_b, statistics=statistics, left_out=left_out,
        metrics=metrics, alternatives=alternatives, decision=decision,
    )
    return Comparison(
        table=table,
        pairs_used=pairing.pairs_used,
        pairs_dropped_for_errors=pairing.pairs_dropped_for_errors,
        only_in_a=pairing.only_in_a,
        only_in_b=pairing.only_in_b,
        partial=pairing.partial,
        signature_a=a.signature,
        signature_b=b.signature,
        signature_differences=differences,
        pairs_unreadable=pairing.pairs_unreadable,
        dropped_unreadable=pairing.dropped_unreadable,
        on_request=allow_signature_mismatch,
        families_left_out=tuple(sorted(left_out)),
    )
