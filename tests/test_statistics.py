"""Intervals of one aggregate and the paired tests of a comparison, on cases whose answers are known."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import judge_for
from scipy import stats as scipy_stats

from mlflow_genai_metrics import compare_results, judge_summaries
from mlflow_genai_metrics.paired import MIN_PAIRED_PROPORTION_ROWS, holm, paired_proportion, paired_ratio, tango_interval
from mlflow_genai_metrics.stats import (
    MIN_INTERVAL_ROWS,
    RatioHistogram,
    RatioStatistic,
    bca_interval,
    bootstrap_interval,
    proportion_interval,
    ratio_of_sums,
)
from mlflow_genai_metrics.summarization import SignatureMismatchError
from mlflow_genai_metrics.testing import SummarizationJudgeScript


def _proportion(successes: int, rows: int) -> RatioHistogram:
    return RatioStatistic.mean_of(np.array([1.0] * successes + [0.0] * (rows - successes))).histogram()


def test_a_proportion_where_every_row_agrees_keeps_an_honest_interval():
    # the guide's figures: 2 of 2 rows give [0.158, 1.0], 20 of 20 [0.832, 1.0]; never a zero width
    assert proportion_interval(_proportion(2, 2)) == pytest.approx((0.1581, 1.0), abs=1e-4)
    assert proportion_interval(_proportion(20, 20)) == pytest.approx((0.8316, 1.0), abs=1e-4)
    assert proportion_interval(_proportion(0, 10)) == pytest.approx((0.0, 0.3085), abs=1e-4)


def test_the_proportion_interval_is_clopper_pearson_from_the_beta_quantiles():
    successes, rows = 37, 50
    low, high = scipy_stats.beta.ppf(0.025, successes, rows - successes + 1), scipy_stats.beta.ppf(0.975, successes + 1, rows - successes)
    assert proportion_interval(_proportion(successes, rows)) == pytest.approx((low, high), abs=1e-9)


def test_each_clopper_pearson_bound_errs_at_most_its_share_at_every_rate():
    # exact: the chance that ci_low overstates the rate, summed over every outcome of n rows (Wilson's reached 6.8%)
    for rows in (5, 20, 60):
        lows = np.array([proportion_interval(_proportion(k, rows))[0] for k in range(rows + 1)])
        for rate in np.linspace(0.01, 0.99, 197):
            assert scipy_stats.binom.pmf(np.arange(rows + 1), rows, rate)[lows > rate].sum() <= 0.025 + 1e-12


def test_rows_that_do_not_count_are_not_trials():
    # Failed rows (denominator 0) are in no share: 3 of 3 judged rows aligned, 2 failed.
    histogram = RatioStatistic.mean_of(np.array([1.0, 1.0, 1.0, np.nan, np.nan])).histogram()
    assert histogram.counted_rows == 3 and proportion_interval(histogram) == proportion_interval(_proportion(3, 3))


def test_proportions_get_clopper_pearson_and_means_no_interval_below_the_rows_where_bca_holds(scripted_server):
    server = scripted_server()
    server.script = SummarizationJudgeScript()
    result = judge_summaries([ARTICLE] * 2, ["The council approved the budget."] * 2, judge=judge_for(server), coverage=False)
    m = result.metrics
    assert (m["alignment"], m["alignment_ci_low"], m["alignment_ci_high"], m["alignment_n"]) == pytest.approx((1.0, 0.1581, 1.0, 2), abs=1e-4)
    # Two rows that agree: a mean's bootstrap would be [1, 1]; below MIN_INTERVAL_ROWS there is no interval at all.
    assert math.isnan(m["richness_ci_low"]) and math.isnan(m["richness_ci_high"]) and m["richness_n"] == 2
    assert math.isnan(m["claim_support_rate_ci_low"]) and m["claim_support_rate_n"] == 2
    assert m["judge_error_rate_n"] == 2 and m["judge_error_rate_ci_high"] > 0.5


def test_a_constant_gets_no_interval_rather_than_a_zero_width_one():
    assert all(math.isnan(bound) for bound in bootstrap_interval(RatioStatistic.mean_of(np.full(50, 3.0))))


def test_one_row_gets_no_interval_of_any_kind():
    assert all(math.isnan(bound) for bound in proportion_interval(_proportion(1, 1)))
    assert all(math.isnan(bound) for bound in bootstrap_interval(RatioStatistic.mean_of(np.array([4.0])), min_rows=1))


def test_a_mean_gets_its_interval_from_min_interval_rows_on():
    values = np.random.default_rng(2).poisson(6, MIN_INTERVAL_ROWS).astype(float)
    low, high = bootstrap_interval(RatioStatistic.mean_of(values))
    assert low < values.mean() < high
    assert all(math.isnan(b) for b in bootstrap_interval(RatioStatistic.mean_of(values[:-1])))


def test_the_histogram_bca_is_scipys_bca_on_the_rows():
    # Without the small-sample expansion, the histogram's BCa is scipy.stats.bootstrap(method="BCa") on the rows
    # (the same statistic, other random draws: equal within Monte Carlo error).
    values = np.random.default_rng(8).geometric(0.3, 60).astype(float)
    histogram = RatioStatistic.mean_of(values).histogram()
    ours = bca_interval(np.column_stack([histogram.numerators, histogram.denominators]), histogram.counts, ratio_of_sums,
                        resamples=20000, expand=False)
    scipys = scipy_stats.bootstrap((values,), np.mean, method="BCa", n_resamples=20000, rng=np.random.default_rng(1))
    assert ours == pytest.approx((scipys.confidence_interval.low, scipys.confidence_interval.high), abs=0.06)


def test_the_expansion_widens_the_interval_at_small_n():
    values = np.random.default_rng(9).poisson(5, 25).astype(float)
    histogram = RatioStatistic.mean_of(values).histogram()
    args = (np.column_stack([histogram.numerators, histogram.denominators]), histogram.counts, ratio_of_sums)
    plain, expanded = bca_interval(*args, expand=False), bca_interval(*args)
    assert expanded[0] < plain[0] and expanded[1] > plain[1]


def test_the_interval_of_a_proportion_matches_the_normal_approximation():
    values = np.array([1.0, 0.0] * 500)
    low, high = bootstrap_interval(RatioStatistic.mean_of(values), resamples=2000)
    half_width = 1.96 * math.sqrt(0.25 / 1000)
    assert low == pytest.approx(0.5 - half_width, abs=0.01) and high == pytest.approx(0.5 + half_width, abs=0.01)


def test_the_same_seed_gives_the_same_interval_and_another_seed_another():
    statistic = RatioStatistic.mean_of(np.random.default_rng(0).random(200))
    assert bootstrap_interval(statistic, seed=1) == bootstrap_interval(statistic, seed=1)
    assert bootstrap_interval(statistic, seed=1) != bootstrap_interval(statistic, seed=2)


def test_a_ratio_statistic_is_the_micro_average_not_the_mean_of_row_rates():
    supported, claims = np.array([4.0, 0.0, 2.0]), np.array([4.0, 2.0, 2.0])
    assert RatioStatistic(supported, claims).value == 6 / 8  # the mean of the row rates would be 2/3


def test_a_ratio_statistic_resamples_rows_with_their_denominators():
    # Every row has all its claims supported: any resample of whole rows is 1, so nothing varies and there is no
    # interval; numerators and denominators drawn apart would vary and give one.
    claims = np.tile([1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 1.0, 4.0], 4)
    assert all(math.isnan(bound) for bound in bootstrap_interval(RatioStatistic(claims.copy(), claims)))


def test_the_histogram_bootstrap_is_the_row_bootstrap():
    # Claim counts and supported claims, as a judge produces them: a micro average with few distinct pairs.
    rng = np.random.default_rng(7)
    claims = rng.integers(0, 12, 400).astype(float)
    supported = np.floor(claims * rng.random(400))
    statistic = RatioStatistic(supported, claims)
    assert len(statistic.histogram().counts) < 100
    histogram = statistic.histogram()
    counted = histogram.denominators != 0
    ours = bca_interval(np.column_stack([histogram.numerators, histogram.denominators])[counted], histogram.counts[counted],
                        ratio_of_sums, resamples=20000, expand=False)
    rows = scipy_stats.bootstrap(
        (supported[claims > 0], claims[claims > 0]), lambda s, c, axis=-1: s.sum(axis) / c.sum(axis), paired=True, vectorized=True,
        n_resamples=20000, method="BCa", rng=np.random.default_rng(1),
    ).confidence_interval
    assert ours == pytest.approx((rows.low, rows.high), abs=0.004)


def test_histograms_of_parts_add_up_to_the_same_value_and_interval():
    rng = np.random.default_rng(3)
    statistic = RatioStatistic.mean_of(rng.integers(0, 2, 1000).astype(float), (rng.random(1000) > 0.1).astype(float))
    order = rng.permutation(1000)
    parts = [RatioStatistic(statistic.numerator[order[i::3]], statistic.denominator[order[i::3]]).histogram() for i in range(3)]
    merged = RatioHistogram.merge(parts)
    assert merged.rows == 1000 and merged.value == statistic.value
    assert bootstrap_interval(merged) == bootstrap_interval(statistic)


def test_rows_without_a_value_do_not_count():
    statistic = RatioStatistic.mean_of(np.array([1.0, np.nan, 0.0]), np.array([1.0, 1.0, 0.0]))
    assert statistic.value == 1.0


def test_identical_inputs_differ_by_nothing_and_are_too_few_to_test():
    statistic = RatioStatistic.mean_of(np.random.default_rng(3).integers(0, 2, 300).astype(float))
    paired = paired_ratio(statistic, statistic, kind="mean")
    assert paired.difference == 0.0 and paired.informative == 0 and paired.too_few and math.isnan(paired.p_value)
    assert "too few pairs to test (0 of 300 pairs differ)" in paired.note


def test_a_large_constant_shift_is_significant():
    base = np.random.default_rng(4).random(300)
    paired = paired_ratio(RatioStatistic.mean_of(base), RatioStatistic.mean_of(base + 0.3), kind="mean")
    assert paired.difference == pytest.approx(0.3)
    assert paired.ci_low == pytest.approx(0.3) and paired.ci_high == pytest.approx(0.3)
    assert paired.p_value < 0.01


def test_two_pairs_both_better_are_too_few_to_test():
    a, b = RatioStatistic.mean_of(np.zeros(2)), RatioStatistic.mean_of(np.ones(2))
    for paired in (paired_proportion(a, b), paired_ratio(a, b, kind="mean"), paired_ratio(a, b)):
        assert paired.too_few and math.isnan(paired.p_value) and paired.note.startswith("too few pairs to test")
    assert math.isnan(paired_proportion(a, b).ci_low)  # and no interval that would promise what 2 pairs cannot


def test_five_pairs_with_three_discordant_are_too_few_for_an_exact_test():
    a, b = RatioStatistic.mean_of(np.array([0, 0, 0, 1, 1.0])), RatioStatistic.mean_of(np.ones(5))
    assert paired_proportion(a, b).too_few and paired_proportion(a, b, alternative="greater").too_few


def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_pairs():
    a = RatioStatistic.mean_of(np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1.0]))
    b = RatioStatistic.mean_of(np.array([1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1.0]))
    paired = paired_proportion(a, b)
    assert (paired.informative, paired.n) == (8, 12)
    assert paired.p_value == pytest.approx(scipy_stats.binomtest(7, 8, 0.5).pvalue)
    assert paired_proportion(a, b, alternative="greater").p_value == pytest.approx(scipy_stats.binomtest(7, 8, 0.5, alternative="greater").pvalue)


def test_the_sign_flip_test_is_exact_on_few_pairs():
    # 6 pairs, every one B better by a different amount: 1 of 64 sign assignments is as extreme, one-sided.
    a = RatioStatistic.mean_of(np.zeros(6))
    b = RatioStatistic.mean_of(np.arange(1, 7, dtype=float))
    assert paired_ratio(a, b, kind="mean", alternative="greater").p_value == pytest.approx(1 / 64)
    assert paired_ratio(a, b, kind="mean").p_value == pytest.approx(2 / 64)


def test_the_ratio_test_swaps_numerator_and_denominator_together():
    # B supports every claim of its rows, A none; swapping a pair exchanges both counts, so the exact p is 2/2^8.
    claims = np.array([1, 2, 3, 4, 5, 6, 7, 8.0])
    a, b = RatioStatistic(np.zeros(8), claims), RatioStatistic(claims, claims)
    assert paired_ratio(a, b).p_value == pytest.approx(2 / 256)


def test_tango_mirrors_when_the_runs_swap_and_never_collapses():
    low, high = tango_interval(5, 4, 55)
    assert low < (4 - 5) / 55 < high
    assert tango_interval(4, 5, 55) == pytest.approx((-high, -low))
    # no discordant pair: the score equation solves in closed form, d = z^2 / (n + z^2), a positive width
    z2 = scipy_stats.norm.ppf(0.975) ** 2
    assert tango_interval(0, 0, 10) == pytest.approx((-z2 / (10 + z2), z2 / (10 + z2)), abs=1e-9)
    assert tango_interval(0, 2, 2)[1] == 1.0 and all(math.isnan(b) for b in tango_interval(0, 1, 1))


def test_tango_bounds_are_where_the_score_test_with_the_constrained_likelihood_meets_the_quantile():
    # the bounds found again without the closed-form root: the constrained MLE by numerical maximisation
    from scipy import optimize

    b, c, n, z = 7, 16, 161, scipy_stats.norm.ppf(0.975)

    def score(d: float) -> float:
        def minus_log_likelihood(q: float) -> float:  # cells: A alone q, B alone q + d, the rest 1 - 2q - d
            cells = np.array([q, q + d, 1 - 2 * q - d])
            return -float(np.array([b, c, n - b - c]) @ np.log(np.clip(cells, 1e-300, None)))
        q = optimize.minimize_scalar(minus_log_likelihood, bounds=(max(0.0, -d) + 1e-12, (1 - d) / 2 - 1e-12), method="bounded",
                                     options={"xatol": 1e-13}).x
        return (c - b - n * d) / math.sqrt(n * (2 * q + d * (1 - d)))

    low, high = tango_interval(b, c, n)
    assert score(low) == pytest.approx(z, abs=1e-4) and score(high) == pytest.approx(-z, abs=1e-4)


def test_a_paired_proportion_interval_needs_its_pairs():
    # 2 pairs, both better: Newcombe's [0.07, 1.00] covered a true 0 half the time; no interval below the measured n
    two = paired_proportion(RatioStatistic.mean_of(np.zeros(2)), RatioStatistic.mean_of(np.ones(2)))
    assert math.isnan(two.ci_low) and math.isnan(two.ci_high) and two.too_few
    enough = paired_proportion(RatioStatistic.mean_of(np.zeros(MIN_PAIRED_PROPORTION_ROWS)),
                               RatioStatistic.mean_of(np.ones(MIN_PAIRED_PROPORTION_ROWS)))
    assert 0 < enough.ci_low < enough.ci_high == 1.0


def test_holm_adjusts_the_smallest_p_most_and_keeps_the_order():
    assert holm([0.01, 0.04, float("nan"), 0.03]) == pytest.approx([0.03, 0.06, float("nan"), 0.06], nan_ok=True)
    assert holm([0.5]) == [0.5]


def test_noise_without_a_shift_is_significant_no_more_often_than_the_level_says():
    # 200 pairs of samples with no true difference: at the 5% level, at most about 10 may look significant.
    significant = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        a, b = rng.integers(0, 2, 200).astype(float), rng.integers(0, 2, 200).astype(float)
        significant += paired_proportion(RatioStatistic.mean_of(a), RatioStatistic.mean_of(b)).p_value < 0.05
    assert significant <= 20


ARTICLE = "The council approved the budget. The mayor welcomed the decision. Critics objected to the cuts."


def _judge_two_models(server, judge=None, **options):
    good = ["The council approved the budget."] * 30
    bad = ["The council rejected the budget."] * 30
    script_verdicts = {"The council approved the budget.": "yes", "The council rejected the budget.": "no"}
    server.script = SummarizationJudgeScript(verdicts=script_verdicts)
    ids = [f"r{i}" for i in range(30)]
    judge = judge or judge_for(server)
    a = judge_summaries([ARTICLE] * 30, bad, judge=judge, ids=ids, coverage=False, **options)
    b = judge_summaries([ARTICLE] * 30, good, judge=judge, ids=ids, coverage=False, **options)
    return a, b


def test_compare_results_reports_b_minus_a_with_its_test_interval_and_holm_p_value(scripted_server):
    a, b = _judge_two_models(scripted_server())
    alignment = compare_results(a, b).difference("alignment")
    # A judged every row misaligned, B every row aligned: 30 discordant pairs, all for B.
    assert (alignment["a"], alignment["b"], alignment["difference"]) == (0.0, 1.0, 1.0)
    assert (alignment["kind"], alignment["test"], alignment["direction"], alignment["better"]) == ("proportion", "exact McNemar", "higher", "B")
    assert 0.75 < alignment["ci_low"] < 1.0 and alignment["ci_high"] == 1.0  # Tango's interval, never [1, 1]
    assert alignment["p_value"] == pytest.approx(2 * 0.5**30)
    assert alignment["p_value"] <= alignment["p_holm"] < 0.01 and alignment["significant"]


def test_a_result_compared_with_itself_differs_by_nothing(scripted_server):
    a, _ = _judge_two_models(scripted_server())
    same = compare_results(a, a).difference("alignment")
    assert same["difference"] == 0.0 and math.isnan(same["p_value"]) and same["note"].startswith("too few pairs to test")
    assert not same["significant"] and same["better"] == ""


def test_compare_results_pairs_rows_by_id_whatever_their_order(scripted_server):
    a, b = _judge_two_models(scripted_server())
    shuffled = b.rows.sample(frac=1.0, random_state=1).reset_index(drop=True)
    b_shuffled = type(b)(shuffled, b.claims, b.key_points, b.metrics, b.signature, b.judgements, b.usage)
    assert compare_results(a, b_shuffled).table.equals(compare_results(a, b).table)


def test_results_from_different_judges_are_not_compared_unless_asked(scripted_server):
    server = scripted_server()
    a, _ = _judge_two_models(server)
    _, b = _judge_two_models(server, judge=judge_for(server, temperature=0.7))
    with pytest.raises(SignatureMismatchError, match="temp: 0 != 0.7"):
        compare_results(a, b)
    forced = compare_results(a, b, allow_signature_mismatch=True)
    assert not forced.signatures_match
    assert forced.label.startswith("NOT COMPARABLE AS IS: signatures differ (temp: 0 != 0.7)")


def test_the_signature_pins_judge_prompts_settings_and_version(scripted_server):
    from mlflow_genai_metrics.grounding import model_tag
    from mlflow_genai_metrics.prompts import load_prompt
    from mlflow_genai_metrics.signature import Signature

    a, _ = _judge_two_models(scripted_server())
    fields = a.signature.split("|")
    assert fields[:4] == ["judge:scripted-judge", "base:localhost", "mode:json_schema", "max_tokens:default"]
    assert [f.split(":")[0] for f in fields[4:]] == [
        "claims", "claims_retry", "verify", "temp", "seed", "grounding", "resamples", "confidence", "bootstrap_seed", "mgm"
    ]
    assert fields[4:7] == [load_prompt("claims").tag, load_prompt("claims_retry").tag, load_prompt("verify").tag]
    assert fields[9] == "grounding:" + model_tag().removeprefix("grounding:")  # the grounding model file, pinned too
    assert Signature.parse(a.signature).format() == a.signature


def test_the_signature_pins_the_response_mode_the_replies_came_in(scripted_server):
    server = scripted_server(reject_response_formats=("json_schema",))  # as llama-cpp-python's server does
    a, _ = _judge_two_models(server)
    assert "|mode:json_object|" in a.signature


def test_a_difference_in_one_part_names_the_field_that_differs():
    from mlflow_genai_metrics.signature import Signature, signature_differences

    a = "judge:m|base:localhost|mode:json_schema|max_tokens:default|verify:v2-aaaa|temp:0|seed:none|mgm:0.1.0"
    b = a.replace("mode:json_schema", "mode:text").replace("verify:v2-aaaa", "verify:v3-bbbb")
    assert signature_differences(a, b) == ["mode: json_schema != text", "verify: v2-aaaa != v3-bbbb"]
    assert Signature.parse(a).differences(Signature.parse(b), ("reference",)) == []


def test_a_prompt_edit_changes_its_tag():
    from mlflow_genai_metrics.prompts import Prompt

    original = Prompt("verify", "v1", "Check the claims.", "# verify v1\nCheck the claims.")
    edited = Prompt("verify", "v1", "Check the claims!", "# verify v1\nCheck the claims!")
    assert original.tag != edited.tag and original.tag.startswith("verify:v1-")


def test_the_core_does_not_import_mlflow():
    import subprocess
    import sys

    code = "import sys, mlflow_genai_metrics, mlflow_genai_metrics.summarization, mlflow_genai_metrics.reference; print('mlflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_docs_show_every_prompt_as_it_is_in_the_package():
    """The summaries' prompts in docs/metrics.md, the answers' own in docs/rag.md, the rewrites' in docs/rewrites.md,
    the make_judge claim judge's instructions in docs/judges.md, each byte for byte."""
    from pathlib import Path

    from mlflow_genai_metrics.prompts import ANSWER_PROMPTS, MLFLOW_PROMPTS, PROMPT_NAMES, REWRITE_PROMPTS, SUMMARY_PROMPTS

    root = Path(__file__).resolve().parents[1]
    assert set(PROMPT_NAMES) == {*SUMMARY_PROMPTS, *ANSWER_PROMPTS, *REWRITE_PROMPTS, *MLFLOW_PROMPTS}
    pages = (("metrics.md", SUMMARY_PROMPTS), ("rag.md", ANSWER_PROMPTS), ("rewrites.md", REWRITE_PROMPTS), ("judges.md", MLFLOW_PROMPTS))
    for page, names in pages:
        doc = (root / "docs" / page).read_text()
        for name in names:
            assert (root / "mlflow_genai_metrics" / "prompts" / f"{name}.txt").read_text() in doc, f"docs/{page} is out of date for the {name} prompt"


def test_agreement_figures_have_no_zero_width_interval_and_say_why_one_is_missing():
    from mlflow_genai_metrics.cli.common import figure
    from mlflow_genai_metrics.meta_evaluation import binary_agreement_metrics

    perfect = binary_agreement_metrics([[2, 0], [0, 1]])  # mgm align once printed 1.000 [1.000, 1.000] n=3
    # 3 pairs that agree show little: an exact interval that says so, never [1, 1]
    assert perfect["cohen_kappa"] == 1.0 and perfect["cohen_kappa_ci_low"] < 0 and perfect["cohen_kappa_ci_high"] == 1.0
    assert figure("cohen_kappa", perfect).endswith("1.000  [-0.901, 1.000]  n=3")
    one_class = binary_agreement_metrics([[0, 0], [2, 5]])  # people said "consistent" every time: once nan [nan, nan] n=7
    assert math.isnan(one_class["balanced_accuracy"])
    assert figure("balanced_accuracy", one_class).endswith("undefined  n=7: people's labels or the judge's verdicts are all of one class, so it is undefined")


def _balanced_accuracy_coverage(consistent: int, inconsistent: int, recalls: np.ndarray, interval) -> np.ndarray:
    """The exact coverage of ``interval(tp, tn)`` for every pair of true recalls (on people's consistent and
    inconsistent classes) in ``recalls``: every outcome weighted by its two binomial probabilities."""
    x, y = np.arange(consistent + 1), np.arange(inconsistent + 1)
    bounds = np.array([[interval(int(a), int(b)) for b in y] for a in x])  # (x, y, 2)
    p_x = scipy_stats.binom.pmf(x[None, :], consistent, recalls[:, None])  # (rate, x)
    p_y = scipy_stats.binom.pmf(y[None, :], inconsistent, recalls[:, None])
    truth = (recalls[:, None] + recalls[None, :]) / 2  # (sensitivity, specificity)
    inside = (bounds[None, None, :, :, 0] <= truth[:, :, None, None] + 1e-12) & (truth[:, :, None, None] <= bounds[None, None, :, :, 1] + 1e-12)
    return np.einsum("sx,py,spxy->sp", p_x, p_y, inside)


def test_balanced_accuracy_s_interval_holds_its_coverage_at_every_class_size_exactly():
    from mlflow_genai_metrics.meta_evaluation import binary_agreement
    from mlflow_genai_metrics.stats import mean_of_two_proportions_interval

    recalls = np.linspace(0.01, 0.99, 50)
    for consistent, inconsistent in ((1, 1), (1, 6), (2, 2), (3, 3), (4, 4), (5, 8), (8, 8), (12, 3), (20, 20)):
        coverage = _balanced_accuracy_coverage(consistent, inconsistent, recalls,
                                               lambda tp, tn: mean_of_two_proportions_interval((tp, tn), (consistent, inconsistent)))
        assert coverage.min() >= 0.95 - 1e-9, (consistent, inconsistent, coverage.min())  # Bonferroni: never below the level
    # the hostile look's case, through the figure a run logs: 36 consistent and 4 inconsistent pairs, a judge right on
    # 95% of each class; the percentile bootstrap covered 0.72 here, most misses with the truth below its lower bound
    def logged(tp: int, tn: int) -> tuple[float, float]:
        found = binary_agreement([[tn, 4 - tn], [36 - tp, tp]])["balanced_accuracy"]
        return (found.ci_low, found.ci_high) if not math.isnan(found.ci_low) else (math.inf, -math.inf)

    assert _balanced_accuracy_coverage(36, 4, np.array([0.95]), logged)[0, 0] >= 0.95
    assert binary_agreement([[4, 0], [0, 36]])["balanced_accuracy"].ci_low == pytest.approx(0.6099, abs=1e-4)  # docs/metrics.md


@pytest.mark.parametrize("cells", [(0.05, 0.05, 0.05, 0.85), (0.12, 0.08, 0.08, 0.72), (0.45, 0.05, 0.05, 0.45)])
def test_kappa_s_interval_holds_its_coverage_exactly_in_small_and_skewed_cells(cells):
    """Every table of 10 pairs, weighted by its multinomial probability, through the figure a run logs: the truth is
    inside kappa's interval at least 95% of the time where one is given (the percentile bootstrap it replaced
    covered 0.72 of the first mix, people's "no" a tenth of the pairs, and 0.85 of the second)."""
    from mlflow_genai_metrics.meta_evaluation import binary_agreement

    tn, fp, fn, tp = cells
    chance = (tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)
    truth = (tn + tp - chance) / (1 - chance)
    covered = given = 0.0
    for table in itertools.product(range(11), repeat=3):
        if sum(table) > 10:
            continue
        counts = [*table, 10 - sum(table)]
        kappa = binary_agreement([counts[:2], counts[2:]])["cohen_kappa"]
        if math.isnan(kappa.ci_low):
            assert math.isnan(kappa.value)  # no interval only where kappa itself is undefined (one class only)
            continue
        chance_of = scipy_stats.multinomial.pmf(counts, 10, cells)
        given += chance_of
        covered += chance_of * (kappa.ci_low <= truth <= kappa.ci_high)
    assert covered / given >= 0.95, covered / given


def test_a_perfect_claim_support_rate_gets_the_exact_bound_so_a_ci_low_rule_can_pass_it():
    from mlflow_genai_metrics.stats import MIN_RATIO_ROWS, ratio_interval

    claims = np.full(MIN_RATIO_ROWS, 3.0)  # 10 rows, 30 claims, every one supported
    low, high = ratio_interval(RatioStatistic(claims.copy(), claims).histogram())
    assert (low, high) == pytest.approx((0.025 ** (1 / 10), 1.0))  # once no interval: a _ci_low rule failed it
    many = np.full(40, 3.0)
    assert ratio_interval(RatioStatistic(many.copy(), many).histogram())[0] > 0.9  # 40 rows wholly supported: > 0.9
    none = ratio_interval(RatioStatistic(np.zeros(MIN_RATIO_ROWS), claims).histogram())
    assert none == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))
    assert all(math.isnan(b) for b in ratio_interval(RatioStatistic(claims[:-1].copy(), claims[:-1]).histogram()))  # 9 rows


def test_the_ratio_interval_is_the_logit_delta_method_with_t_quantiles():
    from scipy.special import expit, logit

    from mlflow_genai_metrics.stats import ratio_interval

    supported, claims = np.array([2.0, 3, 1, 4, 0, 5, 2, 3, 1, 2]), np.array([3.0, 3, 2, 5, 1, 6, 2, 4, 3, 2])
    value = supported.sum() / claims.sum()
    residuals = (supported - value * claims) / claims.mean()
    se = math.sqrt((residuals**2).sum() / (10 * 9)) / (value * (1 - value))
    t = scipy_stats.t.ppf(0.975, 9)
    assert ratio_interval(RatioStatistic(supported, claims).histogram()) == pytest.approx(
        (expit(logit(value) - t * se), expit(logit(value) + t * se)))


def test_the_mover_fieller_difference_of_ratios_contains_its_estimate_and_mirrors():
    from mlflow_genai_metrics.paired import fieller_interval, mover_ratio_interval

    rng = np.random.default_rng(4)
    claims_a, claims_b = 1 + rng.poisson(5, 40), 1 + rng.poisson(5, 40)
    a = np.column_stack([rng.binomial(claims_a, 0.8), claims_a]).astype(float)
    b = np.column_stack([rng.binomial(claims_b, 0.9), claims_b]).astype(float)
    low, high = mover_ratio_interval(a, b)
    difference = b[:, 0].sum() / b[:, 1].sum() - a[:, 0].sum() / a[:, 1].sum()
    assert low < difference < high
    assert mover_ratio_interval(b, a) == pytest.approx((-high, -low))
    # Fieller's bounds solve (mean y - r mean n)^2 = t^2 var(mean y - r mean n)
    y, n = a[:, 0], a[:, 1]
    for r in fieller_interval(y, n):
        variance = np.var(y - r * n, ddof=1) / len(y)
        assert (y.mean() - r * n.mean()) ** 2 == pytest.approx(scipy_stats.t.ppf(0.975, len(y) - 1) ** 2 * variance)


def test_the_decision_s_t_is_the_plain_paired_t_when_the_differences_are_symmetric_and_corrects_for_skew():
    from mlflow_genai_metrics.paired import paired_skew_corrected_t

    a = RatioStatistic.mean_of(np.zeros(8))
    symmetric = RatioStatistic.mean_of(np.array([1.0, 2, 3, 4, 4, 5, 6, 7]))  # differences with no skew
    plain = scipy_stats.ttest_1samp(symmetric.numerator, 0.0, alternative="greater").pvalue
    assert paired_skew_corrected_t(a, symmetric, kind="mean").p_value == pytest.approx(plain)
    # many small gains and one large loss (left-skewed): the corrected test asks more than the plain t does
    skewed = RatioStatistic.mean_of(np.array([1.0] * 19 + [-12.0]))
    zero = RatioStatistic.mean_of(np.zeros(20))
    plain = scipy_stats.ttest_1samp(skewed.numerator, 0.0, alternative="greater").pvalue
    corrected = paired_skew_corrected_t(zero, skewed, kind="mean")
    assert corrected.p_value > plain and corrected.test == "paired t, skewness-corrected (Johnson)"
    assert paired_skew_corrected_t(skewed, zero, kind="mean", alternative="less").p_value == pytest.approx(corrected.p_value)


def test_the_decision_s_t_never_reads_a_clearly_worse_candidate_as_better():
    """Johnson's statistic turns back for a large t against the skew: a B worse on 140 of 150 pairs (by about one
    claim; better by 4 on 5) read as better at p = 3.5e-5. A difference on the null's side is no evidence against it."""
    from mlflow_genai_metrics.paired import paired_skew_corrected_t

    rng = np.random.default_rng(0)
    a = rng.poisson(9, 150).astype(float) + 1
    differences = np.round(rng.normal(-1, 0.3, 150))
    differences[:5] = 4
    worse, champion = RatioStatistic.mean_of(a + differences), RatioStatistic.mean_of(a)
    assert paired_skew_corrected_t(champion, worse, kind="mean", alternative="greater").p_value >= 0.5
    assert paired_skew_corrected_t(worse, champion, kind="mean", alternative="less").p_value >= 0.5
    for first, second in ((champion, worse), (worse, champion)):  # two-sided: never below what the one-sided allow
        two = paired_skew_corrected_t(first, second, kind="mean", alternative="two-sided").p_value
        assert two == pytest.approx(min(1.0, 2 * min(paired_skew_corrected_t(first, second, kind="mean", alternative=side).p_value
                                                      for side in ("greater", "less"))))


def test_the_claim_support_interval_holds_its_coverage_when_claims_stand_or_fall_by_row():
    """Claims taken as independent trials when every one was supported ([0.977, 1] from 20 rows of 8 claims): a run
    95% of whose rows are wholly supported and 5% half supported (a rate of 0.975) was covered 61% of the time at 20
    rows. Seeded: 2,000 runs each of 10, 20 and 30 rows."""
    from mlflow_genai_metrics.stats import ratio_interval

    rng = np.random.default_rng(7)
    for rows in (10, 20, 30):
        covered = 0
        for _ in range(2000):
            claims = np.full(rows, 8.0)
            supported = np.where(rng.random(rows) < 0.05, 4.0, 8.0)
            low, high = ratio_interval(RatioStatistic(supported, claims).histogram())
            covered += low <= 0.975 <= high
        assert covered / 2000 >= 0.93, (rows, covered / 2000)
