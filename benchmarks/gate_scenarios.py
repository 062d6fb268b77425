"""The gate as users call it, by simulation with known truth: how often it registers an equal or worse candidate.

Each replication draws a champion's and a candidate's per-row tables (the columns a run's ``mgm/rows.parquet`` has
for the metrics involved, with judge errors written as the judge writes them) and decides exactly as
``register_if_passing`` does once the runs are loaded: ``compare_results(..., allow_partial=True,
decision=True)`` over the beat metric and its not-worse companions, then
``summarization.decision.decide`` at the attempt's level (``attempt_level``). MLflow's loading and registering are
left out (``tests/test_gate_release.py`` runs them); nothing else is.

Scenarios (``GATE_SCENARIOS``): equal candidates (exchangeable with the champion), candidates worse once the rows
their outputs made unreadable count against them (20% and 40% unreadable), a candidate equal on
``claim_support_rate`` that is better on 97% of rows and writes a rare long, mostly unsupported summary (and one truly
worse), an equal candidate gated again every 10 rows from 20 to 100 pairs, ten equal candidates tried in turn against
one champion; and the power of better candidates at a stated effect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from mlflow_genai_metrics.stats import StatisticsOptions
from mlflow_genai_metrics.summarization.comparison import compare_results
from mlflow_genai_metrics.summarization.decision import attempt_level, decide, decision_metrics

ALPHA = 0.05
SIGNATURE = "judge:simulated|claims:v1-0000|verify:v1-0000|mgm:sim"
NO_CLAIMS = "claim extraction failed: no_claims: the judge listed no claim for a summary that has words, even when asked again"


@dataclass(frozen=True)
class Run:
    rows: pd.DataFrame
    signature: str = SIGNATURE


@dataclass(frozen=True)
class GateScenario:
    name: str
    beat_metric: str
    truth: str  # "equal", "worse" or "better": what registering it would be
    draw: Callable[[np.random.Generator, int], tuple[pd.DataFrame, pd.DataFrame]]
    attempts: tuple[int, ...] = ()  # re-gating: the pair counts of each attempt (the last is n); () = one attempt at n
    candidates: int = 1  # several candidates tried in turn against one champion, each on the same n rows


def _rows(ids: np.ndarray, strict: np.ndarray, claims: np.ndarray, supported: np.ndarray, unreadable: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({
        "id": [f"r{i}" for i in ids],
        "source_key": [f"s{i}" for i in ids],
        "strictly_aligned": np.where(unreadable, np.nan, strict).astype(float),
        "claim_count": np.where(unreadable, np.nan, claims).astype(float),
        "supported_claims": np.where(unreadable, np.nan, supported).astype(float),
        "error": np.where(unreadable, NO_CLAIMS, ""),
    })


def _latent_pairs(rng: np.random.Generator, n: int, rho: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    shared = rng.standard_normal(n)
    return (math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.standard_normal(n),
            math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.standard_normal(n))


def proportion_draw(champion_rate: float, candidate_rate: float, unreadable: float = 0.0, champion_unreadable: float = 0.0) -> Callable:
    """Strict alignment 0/1 by a Gaussian copula (latent correlation 0.5); the candidate's outputs unreadable on a
    share ``unreadable`` of rows (independently), strictly aligned at ``candidate_rate`` on the rest (the champion's
    on ``champion_unreadable``)."""
    def draw(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        za, zb = _latent_pairs(rng, n)
        ids = np.arange(n)
        a = (za < ndtri(champion_rate)).astype(float)
        b = (zb < ndtri(candidate_rate)).astype(float)
        lost = rng.random(n) < unreadable
        ones = np.ones(n)
        return _rows(ids, a, ones, a, rng.random(n) < champion_unreadable), _rows(ids, b, ones, b, lost)
    return draw


def skewed_ratio_draw(good_support: float, long_share: float = 0.03, long_claims: int = 20, long_support: float = 0.3,
                      champion_support: float = 0.9) -> Callable:
    """Claims 1 + Poisson(5) per row; the champion's supported ~ Binomial(claims, 0.9). The candidate is better on
    most rows (``good_support``) and on a rare share writes a long summary (``long_claims`` claims) mostly
    unsupported (``long_support``)."""
    def draw(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        ids = np.arange(n)
        claims_a = 1 + rng.poisson(5, n)
        supported_a = rng.binomial(claims_a, champion_support)
        long = rng.random(n) < long_share
        claims_b = np.where(long, long_claims, 1 + rng.poisson(5, n))
        supported_b = rng.binomial(claims_b, np.where(long, long_support, good_support))
        none = np.zeros(n, dtype=bool)
        return (_rows(ids, supported_a == claims_a, claims_a, supported_a, none),
                _rows(ids, supported_b == claims_b, claims_b, supported_b, none))
    return draw


def equal_good_support(long_share: float = 0.03, long_claims: int = 20, long_support: float = 0.3, champion: float = 0.9) -> float:
    """The good rows' support that makes the candidate's expected ratio of sums equal the champion's."""
    mean_claims = 6.0  # 1 + Poisson(5)
    total = (1 - long_share) * mean_claims + long_share * long_claims
    return (champion * total - long_share * long_claims * long_support) / ((1 - long_share) * mean_claims)


def gate_scenarios() -> list[GateScenario]:
    equal = equal_good_support()
    return [
        GateScenario("equal (exchangeable), strict alignment 0.8", "strict_alignment", "equal", proportion_draw(0.8, 0.8)),
        GateScenario("20% unreadable, worse by 0.034 counted (0.8 vs 0.766)", "strict_alignment", "worse",
                     proportion_draw(0.8, (0.8 - 0.034) / 0.8, unreadable=0.2)),
        GateScenario("40% unreadable, worse by 0.034 counted (0.6 vs 0.566)", "strict_alignment", "worse",
                     proportion_draw(0.6, (0.6 - 0.034) / 0.6, unreadable=0.4)),
        GateScenario(f"claim support equal (0.9): 97% of rows at {equal:.3f}, 3% long (20 claims) at 0.3", "claim_support_rate",
                     "equal", skewed_ratio_draw(equal)),
        GateScenario("claim support worse by 0.039: 97% of rows at 0.920, 3% long at 0.3", "claim_support_rate", "worse",
                     skewed_ratio_draw(0.920)),
        GateScenario("claim support equal (0.9), exchangeable rows", "claim_support_rate", "equal",
                     skewed_ratio_draw(0.9, long_share=0.0)),
        GateScenario("equal, gated again every 10 rows from 20 to 100 pairs", "strict_alignment", "equal",
                     proportion_draw(0.8, 0.8), attempts=(20, 30, 40, 50, 60, 70, 80, 90, 100)),
        GateScenario("ten equal candidates tried in turn against one champion", "strict_alignment", "equal",
                     proportion_draw(0.8, 0.8), candidates=10),
        GateScenario("power: strict alignment 0.7 -> 0.85", "strict_alignment", "better", proportion_draw(0.7, 0.85)),
        GateScenario("power: 10% unreadable on both sides, strict alignment 0.7 -> 0.85 on the rest", "strict_alignment",
                     "better", proportion_draw(0.7, 0.85, unreadable=0.1, champion_unreadable=0.1)),
        GateScenario("power: claim support 0.9 -> 0.95 on every row", "claim_support_rate", "better",
                     skewed_ratio_draw(0.95, long_share=0.0)),
    ]


def decided(champion: pd.DataFrame, candidate: pd.DataFrame, beat_metric: str, attempt: int, statistics: StatisticsOptions) -> bool:
    """Whether the gate registers ``candidate`` against ``champion`` at this attempt (``register_if_passing``'s
    decision once the runs are loaded)."""
    compared, alternatives = decision_metrics([beat_metric])
    comparison = compare_results(Run(champion), Run(candidate), statistics=statistics, metrics=compared, alternatives=alternatives,
                                 allow_partial=True, decision=True)
    judged = int((champion["error"] == "").sum() + (champion["error"] != "").sum())  # no infrastructure failure drawn
    outcomes = decide(comparison, [beat_metric], alias="champion", champion="champion", champion_judged=judged,
                      alpha=attempt_level(ALPHA, attempt), level=ALPHA)
    return all(o.passed for o in outcomes)


def registered(scenario: GateScenario, rng: np.random.Generator, n: int, statistics: StatisticsOptions) -> bool:
    """One replication: does any attempt register the candidate?"""
    if scenario.attempts:
        champion, candidate = scenario.draw(rng, max(scenario.attempts))
        return any(decided(champion.iloc[:size], candidate.iloc[:size], scenario.beat_metric, attempt, statistics)
                   for attempt, size in enumerate(scenario.attempts, start=1))
    if scenario.candidates > 1:
        champion, _ = scenario.draw(rng, n)
        for attempt in range(1, scenario.candidates + 1):
            _, candidate = scenario.draw(rng, n)  # a fresh candidate on the champion's rows (its own draw of outputs)
            if decided(champion, candidate, scenario.beat_metric, attempt, statistics):
                return True
        return False
    champion, candidate = scenario.draw(rng, n)
    return decided(champion, candidate, scenario.beat_metric, 1, statistics)


def simulate_gate(index: int, n: int, reps: int, seed: int, permutations: int = 999) -> tuple[int, int]:
    """(registered, reps) for scenario ``index`` at ``n`` pairs."""
    scenario = gate_scenarios()[index]
    rng = np.random.default_rng([seed, 4242, index, n])
    statistics = StatisticsOptions(resamples=1, seed=seed)
    del permutations  # the decision's sign-flip test uses the package default
    hits = sum(registered(scenario, rng, n, statistics) for _ in range(reps))
    return hits, reps
