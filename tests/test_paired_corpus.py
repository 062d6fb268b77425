"""Paired tests of corpus statistics (BLEU, chrF, TER): sacreBLEU's approximate randomization and paired bootstrap."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from mlflow_genai_metrics.paired import paired_corpus, paired_ratio
from mlflow_genai_metrics.reference import paired_corpus_difference, traditional_metrics
from mlflow_genai_metrics.stats import RatioStatistic, StatisticsOptions

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
def test_identical_systems_differ_by_zero_and_are_too_few_to_test(scored, name):
    *_, a, _ = scored
    result = paired_corpus_difference(name, a.statistics[name], a.statistics[name])
    assert result.difference == 0.0 and result.too_few and math.isnan(result.p_value)
    assert math.isnan(result.ci_low) and math.isnan(result.ci_high)  # nothing varies: no zero-width interval


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
    result = paired_corpus_difference(name, a.statistics[name], b.statistics[name], statistics=StatisticsOptions(resamples=10))
    expected_a = metric().corpus_score(worse, [references]).score
    expected_b = metric().corpus_score(better, [references]).score
    assert (result.a, result.b, result.difference) == (expected_a, expected_b, expected_b - expected_a)


def test_a_ratio_as_a_corpus_score_gets_the_same_test_as_the_ratio_test():
    # A ratio of sums is a corpus score too: the same swaps give the same p-value.
    rng = np.random.default_rng(5)
    a = np.column_stack([rng.integers(0, 5, 30), rng.integers(1, 6, 30)]).astype(float)
    b = np.column_stack([a[:, 0] + rng.integers(0, 2, 30), a[:, 1]])
    corpus = paired_corpus(a, b, lambda summed: summed[0] / summed[1], permutations=999, seed=9)
    rows = paired_ratio(RatioStatistic(a[:, 0], a[:, 1]), RatioStatistic(b[:, 0], b[:, 1]), permutations=999, seed=9)
    assert corpus.p_value == pytest.approx(rows.p_value) and corpus.p_value < 1
    assert corpus.difference == pytest.approx(rows.difference)


def test_one_differing_row_is_never_significant():
    # sacreBLEU's own test counts only trials more extreme than the observed one: 1 differing row gives p ~ 1e-4.
    a = np.tile([[5.0, 10.0]], (40, 1))
    b = a.copy()
    b[0] = [9.0, 10.0]
    result = paired_corpus(a, b, lambda summed: summed[0] / summed[1])
    assert result.too_few and math.isnan(result.p_value) and result.informative == 1


def test_statistics_of_different_rows_are_refused():
    with pytest.raises(ValueError, match="same rows on both sides"):
        paired_corpus(np.ones((3, 2)), np.ones((4, 2)), lambda summed: float(summed[0]))
