"""B against A, paired row by row: the one place that decides which rows may be compared.

Rows pair when they share an id (in its stored text form, ``ids.canonical_id``) *and* the same source text (its
fingerprint, ``source_key``); a shared id whose sources differ is an error naming it. A pair where either row has a
judge error leaves the comparison and is counted, never scored. Fewer usable pairs than half of the smaller run is
refused unless ``allow_partial=True``, and then the comparison says so. ``compare_runs`` and the registry gate load
MLflow runs into ``compare_results``; they do not pair rows themselves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from ..signature import FAMILY_PARTS, Signature
from ..stats import DEFAULT_RESAMPLES, DEFAULT_SEED, PairedDifference, paired_bootstrap
from ..traditional import paired_corpus_difference, statistics_column
from .ids import canonical_id
from .metrics import METRICS
from .scoring import rate_statistics

__all__ = [
    "Comparable",
    "Comparison",
    "InsufficientPairsError",
    "Pairing",
    "SignatureMismatchError",
    "SourceMismatchError",
    "compare_results",
    "pair_rows",
    "paired_table",
    "rows_note",
]



class SignatureMismatchError(ValueError):
    """Two results were produced by different judges or prompts; their numbers are not comparable."""


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

    @property
    def pairs_used(self) -> int:
        return len(self.rows_a)

    @property
    def partial(self) -> bool:
        """Fewer usable pairs than half of the smaller run."""
        return 2 * self.pairs_used < min(self.rows_in_a, self.rows_in_b)

    def describe(self) -> str:
        return rows_note(self.pairs_used, self.pairs_dropped_for_errors, self.only_in_a, self.only_in_b)


def rows_note(pairs_used: int, dropped_for_errors: int, only_in_a: int, only_in_b: int) -> str:
    """What a comparison stands on, in one line (tables, plots and the gate's tags say the same)."""
    return (
        f"{pairs_used} pairs used, {dropped_for_errors} dropped for judge errors, "
        f"{only_in_a} rows only in A, {only_in_b} only in B"
    )


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
    keyed = rows.copy()
    keyed.index = pd.Index(keys, name="row_key")
    return keyed


def _failed(rows: pd.DataFrame) -> pd.Series:
    return rows["error"].fillna("").astype(str) != ""


def pair_rows(a: pd.DataFrame, b: pd.DataFrame, *, allow_partial: bool = False) -> Pairing:
    """Pair two per-row tables by id and source; see the module's docstring for the rules."""
    keyed_a, keyed_b = _keyed(a, "A"), _keyed(b, "B")
    shared = [key for key in keyed_a.index if key in keyed_b.index]
    if shared:
        differ = keyed_a.loc[shared, "source_key"].astype(str) != keyed_b.loc[shared, "source_key"].astype(str)
        mismatched = differ[differ].index.tolist()
        if mismatched:
            shown = ", ".join(repr(key) for key in mismatched[:10])
            more = f" and {len(mismatched) - 10} more" if len(mismatched) > 10 else ""
            raise SourceMismatchError(
                f"{len(mismatched)} row id(s) name different source texts in the two runs: {shown}{more}. Pairing "
                "them would compare summaries of different articles; give each article the same id in every run "
                "(e.g. an id column) and evaluate again."
            )
    failed_a, failed_b = _failed(keyed_a), _failed(keyed_b)
    usable = [key for key in shared if not failed_a[key] and not failed_b[key]]
    pairing = Pairing(
        rows_a=keyed_a.loc[usable].reset_index(drop=True),
        rows_b=keyed_b.loc[usable].reset_index(drop=True),
        rows_in_a=len(keyed_a),
        rows_in_b=len(keyed_b),
        pairs_dropped_for_errors=len(shared) - len(usable),
        only_in_a=len(keyed_a) - len(shared),
        only_in_b=len(keyed_b) - len(shared),
    )
    if pairing.pairs_used == 0:
        raise InsufficientPairsError(f"no usable pair of rows: nothing to compare ({pairing.describe()})")
    if pairing.partial and not allow_partial:
        raise InsufficientPairsError(
            f"only {pairing.pairs_used} usable pairs, fewer than half of the smaller run "
            f"({min(pairing.rows_in_a, pairing.rows_in_b)} rows): {pairing.describe()}. A comparison on so few rows "
            "does not speak for the runs; pass allow_partial=True to compare them anyway (the comparison is then "
            "labelled partial)."
        )
    return pairing


def paired_table(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    left_out: set[str] = frozenset(),
) -> pd.DataFrame:
    """B minus A for every registered aggregate both row tables support (but those of the families ``left_out``);
    row i of each table is the same pair."""
    stats_a, stats_b = rate_statistics(rows_a), rate_statistics(rows_b)
    records = []
    for name in stats_a:
        if name not in stats_b or name == "judge_error_rate":  # errored pairs are out: the rate is 0 on both sides
            continue
        if METRICS.aggregate(name).family in left_out:
            continue
        paired = paired_bootstrap(stats_a[name], stats_b[name], resamples=resamples, seed=seed, confidence=confidence)
        records.append(_record(name, paired, confidence))
    for spec in METRICS.aggregates("reference"):
        column = statistics_column(spec.name)
        if spec.kind != "corpus" or spec.family in left_out or column not in rows_a or column not in rows_b:
            continue
        # Corpus BLEU, chrF, TER: the pairs resampled together, their sacreBLEU statistics summed, as sacreBLEU does.
        statistics_a, statistics_b = ([list(map(float, cell)) for cell in rows[column]] for rows in (rows_a, rows_b))
        paired = paired_corpus_difference(spec.name, statistics_a, statistics_b, resamples=resamples, seed=seed, confidence=confidence)
        records.append(_record(spec.name, paired, confidence))
    return pd.DataFrame.from_records(records)


def _record(name: str, paired: PairedDifference, confidence: float) -> dict:
    significant = bool(np.isfinite(paired.p_value) and paired.p_value < 1 - confidence)
    return {"metric": name, **asdict(paired), "significant": significant}


@dataclass(frozen=True)
class Comparison:
    """B minus A for every aggregate, over the usable pairs.

    ``table`` columns: ``metric``, ``a``, ``b``, ``difference`` (b - a), ``ci_low``, ``ci_high`` (the paired
    bootstrap interval of the difference), ``p_value`` (two-sided), ``significant`` (p < 1 - confidence).
    ``pairs_used``, ``pairs_dropped_for_errors``, ``only_in_a`` and ``only_in_b`` say which rows it stands on.
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

    @property
    def shared_rows(self) -> int:
        """The pairs the numbers stand on (``pairs_used``)."""
        return self.pairs_used

    @property
    def signatures_match(self) -> bool:
        return not self.signature_differences

    @property
    def rows_note(self) -> str:
        return rows_note(self.pairs_used, self.pairs_dropped_for_errors, self.only_in_a, self.only_in_b)

    @property
    def label(self) -> str:
        parts = [f"paired comparison: {self.rows_note}"]
        if self.partial:
            parts.insert(0, "PARTIAL: fewer usable pairs than half of the smaller run, compared on request")
        if not self.signatures_match:
            parts.insert(0, f"NOT COMPARABLE AS IS: signatures differ ({'; '.join(self.signature_differences)}); compared on request")
        return "; ".join(parts)

    def difference(self, metric: str) -> pd.Series:
        return self.table.set_index("metric").loc[metric]


def compare_results(
    a: Comparable,
    b: Comparable,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    allow_signature_mismatch: bool = False,
    allow_partial: bool = False,
) -> Comparison:
    """Compare B with A by the paired bootstrap over the usable pairs of rows.

    Refuses (``SignatureMismatchError``) when the signatures differ, unless ``allow_signature_mismatch=True``;
    (``SourceMismatchError``) when a shared id names different sources; (``InsufficientPairsError``) when fewer
    usable pairs than half of the smaller run remain once rows with a judge error on either side are left out,
    unless ``allow_partial=True``. A comparison made on request says so in its ``label``.
    """
    signature_a, signature_b = Signature.parse(a.signature), Signature.parse(b.signature)
    # Compared per metric: a family is left out when the parts its numbers depend on differ.
    differing = {family: signature_a.differences(signature_b, parts) for family, parts in FAMILY_PARTS.items()}
    differing = {family: found for family, found in differing.items() if found}
    differences = signature_a.differences(signature_b, ("judge", "reference", "grounding"))
    if {"judge", "coverage"} & differing.keys() and not allow_signature_mismatch:
        raise SignatureMismatchError(
            "these results come from different judge settings or prompts and are not comparable: "
            + "; ".join(differing.get("judge") or differing["coverage"])
            + ". Rejudge both with the same judge, or pass allow_signature_mismatch=True to compare anyway."
        )
    left_out = set() if allow_signature_mismatch else set(differing)
    pairing = pair_rows(a.rows, b.rows, allow_partial=allow_partial)
    table = paired_table(pairing.rows_a, pairing.rows_b, resamples=resamples, seed=seed, confidence=confidence, left_out=left_out)
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
    )
