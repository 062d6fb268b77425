"""The paired bootstrap on corpus statistics (BLEU, chrF, TER), as sacreBLEU's own paired test resamples them."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from mlflow_genai_metrics.stats import RatioStatistic, paired_bootstrap, paired_corpus_bootstrap
from mlflow_genai_metrics.traditional import paired_corpus_difference, traditional_metrics

WORDS = "the council approved budget mayor said city plan new school road tax vote week report police rail".split()


def _systems(rows: int = 40):
    """References; system A: unrelated words; system B: each reference with one word changed (clearly better)."""
    rng = random.Random(3)
    references = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(rows)]
    worse = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(rows)]
    better = [" ".join(["changed", *reference.split()[1:]]) for reference in references]
    return references, worse, better


@pytest.fixture(scope="module")
def scored():
    references, worse, better = _systems()
    a = traditional_metrics(worse, references, ter=True, n_jobs=1)
    b = traditional_metrics(better, references, ter=True, n_jobs=1)
    return references, worse, better, a, b


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
def test_identical_systems_differ_by_zero_with_p_one(scored, name):
    *_, a, _ = scored
    result = paired_corpus_difference(name, a.statistics[name], a.statistics[name])
    assert (result.difference, result.ci_low, result.ci_high, result.p_value) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("name", ["bleu", "chrf"])
def test_a_clearly_better_system_has_a_positive_difference_and_a_small_p(scored, name):
    *_, a, b = scored
    result = paired_corpus_difference(name, a.statistics[name], b.statistics[name])
    assert result.ci_low > 0 and result.p_value < 0.01


def test_a_clearly_better_system_has_a_lower_ter_and_a_small_p(scored):
    *_, a, b = scored
    result = paired_corpus_difference("ter", a.statistics["ter"], b.statistics["ter"])
    assert result.ci_high < 0 and result.p_value < 0.01  # TER: lower is better


@pytest.mark.parametrize("name, metric", [("bleu", BLEU), ("chrf", CHRF), ("ter", TER)])
def test_the_point_estimate_is_sacrebleus_corpus_score_difference(scored, name, metric):
    references, worse, better, a, b = scored
    result = paired_corpus_difference(name, a.statistics[name], b.statistics[name], resamples=10)
    expected_a = metric().corpus_score(worse, [references]).score
    expected_b = metric().corpus_score(better, [references]).score
    assert (result.a, result.b, result.difference) == (expected_a, expected_b, expected_b - expected_a)


def test_rows_are_resampled_together_as_paired_bootstrap_resamples_them():
    # A ratio of sums is a corpus score too: the same draws give the same distribution, interval and p-value.
    rng = np.random.default_rng(5)
    a = np.column_stack([rng.integers(0, 5, 30), rng.integers(1, 6, 30)]).astype(float)
    b = np.column_stack([a[:, 0] + rng.integers(0, 2, 30), a[:, 1]])
    corpus = paired_corpus_bootstrap(a, b, lambda summed: summed[0] / summed[1], resamples=300, seed=9)
    rows = paired_bootstrap(RatioStatistic(a[:, 0], a[:, 1]), RatioStatistic(b[:, 0], b[:, 1]), resamples=300, seed=9)
    assert corpus.p_value == rows.p_value < 1
    assert (corpus.difference, corpus.ci_low, corpus.ci_high) == pytest.approx((rows.difference, rows.ci_low, rows.ci_high), abs=1e-12)


def test_statistics_of_different_rows_are_refused():
    with pytest.raises(ValueError, match="same rows on both sides"):
        paired_corpus_bootstrap(np.ones((3, 2)), np.ones((4, 2)), lambda summed: float(summed[0]))
