"""Property-based tests (hypothesis) of the aggregation and statistics."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from mlflow_genai_metrics.judge import JudgeError, Usage
from mlflow_genai_metrics.stats import StatisticsOptions
from mlflow_genai_metrics.summarization.comparison import paired_table
from mlflow_genai_metrics.summarization.metrics import METRICS
from mlflow_genai_metrics.summarization.records import CheckedClaim, CoveredKeyPoint, RowError, RowJudgement
from mlflow_genai_metrics.summarization.scoring import aggregate_metrics, aggregate_names, rows_table

verdicts = st.lists(st.sampled_from(["yes", "no", "idk"]), max_size=8)
coverage_flags = st.lists(st.booleans(), min_size=1, max_size=5)
row = st.tuples(verdicts, coverage_flags, st.booleans())  # claims' verdicts, key points covered, judge failed
rows_strategy = st.lists(row, min_size=1, max_size=40)


def judgements(rows) -> list[RowJudgement]:
    out = []
    for index, (claim_verdicts, covered, failed) in enumerate(rows):
        if failed:
            out.append(RowJudgement(id=index, source_key="s", error=RowError(stage="claim extraction", error=JudgeError(kind="invalid_answer", message="x"))))
            continue
        out.append(
            RowJudgement(
                id=index,
                source_key="s",
                claims=[CheckedClaim(claim=f"c{k}", verdict=v, reason="r") for k, v in enumerate(claim_verdicts)],
                key_points=[CoveredKeyPoint(key_point=f"k{k}", covered=c, reason="r") for k, c in enumerate(covered)],
            )
        )
    return out


def metrics_of(rows, resamples=200):
    return aggregate_metrics(rows_table(judgements(rows)), Usage(), statistics=StatisticsOptions(resamples=resamples))


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_rates_stay_between_0_and_1_and_intervals_contain_the_estimate(rows):
    metrics = metrics_of(rows)
    judge_aggregates = [spec.name for spec in METRICS.aggregates("judge", "coverage") if spec.has_interval]
    assert set(judge_aggregates) <= set(metrics)
    for name in judge_aggregates:
        value = metrics[name]
        if math.isnan(value):
            continue
        if METRICS.aggregate(name).share:
            assert 0.0 <= value <= 1.0, name
        low, high = metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"]
        if not math.isnan(low):
            assert low - 1e-12 <= value <= high + 1e-12, name


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_alignment_and_the_contradiction_and_empty_defect_rates_sum_to_one(rows):
    metrics = metrics_of(rows, resamples=10)
    if any(not failed for _, _, failed in rows):
        total = metrics["alignment"] + metrics["defect_rate/contradiction"] + metrics["defect_rate/empty"]
        assert math.isclose(total, 1.0)
    assert math.isclose(metrics["judge_error_rate"], sum(failed for _, _, failed in rows) / len(rows))


@settings(max_examples=40, deadline=None)
@given(rows_strategy, st.randoms(use_true_random=False))
def test_aggregates_do_not_depend_on_row_order(rows, rnd):
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    a, b = metrics_of(rows, resamples=10), metrics_of(shuffled, resamples=10)
    for name in [n for n in aggregate_names() if n in a]:
        assert (math.isnan(a[name]) and math.isnan(b[name])) or math.isclose(a[name], b[name]), name


@settings(max_examples=40, deadline=None)
@given(rows_strategy)
def test_a_result_compared_with_itself_differs_by_exactly_zero(rows):
    table = rows_table(judgements(rows))
    paired = paired_table(table, table, statistics=StatisticsOptions(resamples=50))
    for _, record in paired.iterrows():
        if math.isnan(record["a"]):
            continue
        assert record["difference"] == 0.0 and record["informative"] == 0 and not record["significant"]
        assert math.isnan(record["p_value"]) and record["note"].startswith("too few pairs to test")  # no pair differs
        # Newcombe's interval of a share stays honest around 0; a mean's has nothing to resample (NaN)
        assert math.isnan(record["ci_low"]) or record["ci_low"] <= 0.0 <= record["ci_high"]


def test_the_property_strategies_cover_failed_empty_and_contradicted_rows():
    rows = [([], [True], False), (["no"], [False], False), (["yes"], [True], True)]
    metrics = metrics_of(rows, resamples=10)
    assert metrics["defect_rate/empty"] == 0.5 and metrics["defect_rate/contradiction"] == 0.5
    assert metrics["judge_error_rate"] == 1 / 3


statement = st.text(min_size=1).filter(lambda text: text.split())


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1).filter(str.strip), st.lists(statement, min_size=1, max_size=5))
def test_whatever_the_texts_the_verification_prompt_parses_back_to_the_source_and_exactly_its_claims(source, claims):
    from mlflow_genai_metrics.summarization.passes import verify_claims_request
    from mlflow_genai_metrics.testing import marked_sections
    from mlflow_genai_metrics.testing.summarization_judge import _numbered_items

    sections = marked_sections(verify_claims_request(source, claims).messages[0].content)
    assert sections["ARTICLE"] == source
    assert len(_numbered_items(sections["CLAIMS"])) == len(claims)
