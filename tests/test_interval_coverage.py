"""The bootstrap intervals of means and ratios are real intervals: at the smallest n the library reports one for
(``MIN_INTERVAL_ROWS``), by simulation with a known truth, the 95% interval covers the truth about 95% of the time
and has positive width; through ``judge_summaries`` a mean's and a ratio's interval lies strictly around the value.

A zero-width interval (value, value), or one much too narrow or too wide, fails these; the other interval tests
(``test_statistics.py``) check the interval's arithmetic, not that it means what it says."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.stats import MIN_INTERVAL_ROWS, MIN_RATIO_ROWS, RatioStatistic
from mlflow_genai_metrics.summarization.scoring import result_metrics
from mlflow_genai_metrics.testing import SummarizationJudgeScript

SIMULATIONS = 400  # Monte Carlo standard error of a coverage near 0.95: about 0.011
LOW, HIGH = 0.92, 0.975  # the coverage a correct 95% interval shows here (measured: 0.93 to 0.955 over seeds)


def _claim_counts(rng: np.random.Generator, n: int) -> RatioStatistic:
    """A mean (``richness``): claim counts, Poisson with mean 6; the truth is 6."""
    return RatioStatistic.mean_of(rng.poisson(6.0, n).astype(float))


def _supported_claims(rng: np.random.Generator, n: int) -> RatioStatistic:
    """A ratio (``claim_support_rate``): 1 + Poisson(4) claims per row, each row's share of supported claims drawn
    from Beta(8, 2) (mean 0.8, independent of the claim count): the truth, sum E[supported] / sum E[claims], is 0.8.
    Every row has a claim, so all n rows count."""
    claims = 1 + rng.poisson(4.0, n)
    return RatioStatistic(rng.binomial(claims, rng.beta(8.0, 2.0, n)).astype(float), claims.astype(float))


@pytest.mark.parametrize(("name", "draw", "truth", "method", "rows"), [
    ("richness", _claim_counts, 6.0, "bca", MIN_INTERVAL_ROWS),
    ("claim_support_rate", _supported_claims, 0.8, "logit delta", MIN_RATIO_ROWS),
])
def test_the_95_percent_interval_covers_the_truth_about_95_percent_of_the_time_at_the_fewest_rows(name, draw, truth, method, rows):
    # Through result_metrics, the one way from counted rows to a result's Estimates (judge_summaries, Spark).
    rng = np.random.default_rng(20240601)
    covered = 0
    for _ in range(SIMULATIONS):
        statistic = draw(rng, rows)
        estimate = result_metrics({name: statistic.histogram()}, None)[0][name]
        assert estimate.method == method and estimate.n == rows
        # Rows that vary always get an interval at this n, of positive width, around the value.
        assert estimate.ci_low < estimate.ci_high, (name, estimate)
        assert estimate.ci_low <= estimate.value <= estimate.ci_high, (name, estimate)
        covered += estimate.ci_low <= truth <= estimate.ci_high
    assert LOW <= covered / SIMULATIONS <= HIGH, f"{name}: coverage {covered / SIMULATIONS:.3f}"


ARTICLE = ("The council approved the budget. The mayor welcomed the decision. Critics objected to the cuts. "
           "The vote was close. Schools get more money.")
SENTENCES = ["The council approved the budget.", "The mayor welcomed the decision.", "Critics objected to the cuts.",
             "The vote was close.", "Schools get more money."]
UNSUPPORTED = ["Taxes will rise next year.", "The mayor resigned."]


def _varied_summaries(n: int) -> list[str]:
    """Summaries of 1 to 5 claims, some with a claim the article does not support: richness, support and coverage
    vary from row to row."""
    summaries = []
    for i in range(n):
        claims = SENTENCES[i % 5: i % 5 + 1 + i % 4] + UNSUPPORTED[: i % 3 == 0] + UNSUPPORTED[1:][: i % 7 == 1]
        summaries.append(" ".join(claims))
    return summaries


def test_a_judged_mean_and_ratio_have_an_interval_strictly_around_their_value(scripted_server):
    server = scripted_server()
    server.script = SummarizationJudgeScript()
    n = MIN_INTERVAL_ROWS + 4
    result = judge_summaries([ARTICLE] * n, _varied_summaries(n), judge=judge_for(server), grounding=False)
    assert (result.rows["error"] == "").all()
    for name, method in (("richness", "bca"), ("coverage", "bca"), ("claim_support_rate", "logit delta")):
        estimate = result.estimates[name]
        assert estimate.method == method and estimate.n == n, estimate
        assert estimate.ci_low < estimate.value < estimate.ci_high, estimate
        low, high = result.metrics[f"{name}_ci_low"], result.metrics[f"{name}_ci_high"]
        assert (low, result.metrics[name], high) == (estimate.ci_low, estimate.value, estimate.ci_high)
    assert result.rows["claim_count"].nunique() > 1 and result.rows["coverage"].nunique() > 1
