"""The judging and statistics options: two objects passed whole (``JudgingOptions``, ``StatisticsOptions``), or their
fields as keywords, merged in one place (``summarization.options.resolve``), and what they set reaches the numbers."""

from __future__ import annotations

import math

import pytest
from helpers import judge_for, same_metrics

from mlflow_genai_metrics.paired import MIN_DIFFERENCE_ROWS
from mlflow_genai_metrics.signature import Signature
from mlflow_genai_metrics.stats import MIN_INTERVAL_ROWS, StatisticsOptions
from mlflow_genai_metrics.summarization import JudgingOptions, compare_results, grounding_metrics, judge_summaries
from mlflow_genai_metrics.summarization.options import resolve
from mlflow_genai_metrics.testing import SummarizationJudgeScript

ARTICLE = (
    "The council approved the budget on Monday. The mayor welcomed the decision. Critics objected to the cuts. "
    "The vote was seven to two. A new school will open next year."
)
SENTENCES = [
    "The council approved the budget.", "The mayor welcomed the decision.", "Critics objected to the cuts.",
    "The vote was seven to two.", "A new school will open next year.",
]
ROWS = MIN_INTERVAL_ROWS + 4


def _summaries(shift: int = 0, rows: int = ROWS) -> list[str]:
    """1 to 4 claims each, some the article does not say: the per-row values vary, so means have an interval."""
    return [" ".join(SENTENCES[(i + shift) % 5: (i + shift) % 5 + 1 + i % 4] + ["Taxes will rise."][: i % 3 == shift % 3]) for i in range(rows)]


def _width(metrics: dict[str, float], name: str) -> float:
    return metrics[f"{name}_ci_high"] - metrics[f"{name}_ci_low"]


@pytest.mark.parametrize("keyword", ["resample", "coverge", "alpha"])
def test_an_unknown_keyword_is_a_type_error_naming_it_before_any_call(scripted_server, keyword):
    server = scripted_server(SummarizationJudgeScript())
    with pytest.raises(TypeError, match=rf"judge_summaries\(\) got an unexpected keyword argument '{keyword}'"):
        judge_summaries([ARTICLE], ["The council approved the budget."], judge=judge_for(server), **{keyword: 1})
    assert server.request_count == 0


def test_an_unknown_keyword_says_what_it_may_have_meant():
    with pytest.raises(TypeError, match=r"'resample' \(did you mean 'resamples'\?\)"):
        resolve("judge_summaries", {"resample": 10})


def test_a_door_that_takes_only_statistics_refuses_a_judging_field():
    result = judge_summaries([ARTICLE] * 2, _summaries()[:2], judge=None)
    with pytest.raises(TypeError, match=r"compare_results\(\) got an unexpected keyword argument 'coverage'"):
        compare_results(result, result, coverage=False)
    with pytest.raises(TypeError, match=r"grounding_metrics\(\) got an unexpected keyword argument 'ter'"):
        grounding_metrics([ARTICLE], ["The council approved the budget."], ter=True)


def test_a_field_given_in_the_object_and_as_a_keyword_is_refused():
    with pytest.raises(ValueError, match=r"resamples given as a keyword and in statistics="):
        judge_summaries([ARTICLE], ["x"], judge=None, statistics=StatisticsOptions(resamples=50), resamples=50)
    with pytest.raises(ValueError, match=r"coverage given as a keyword and in options="):
        judge_summaries([ARTICLE], ["x"], judge=None, options=JudgingOptions(), coverage=False)


def test_an_option_object_of_the_wrong_kind_is_refused():
    with pytest.raises(TypeError, match=r"statistics= must be a StatisticsOptions, not dict"):
        judge_summaries([ARTICLE], ["x"], judge=None, statistics={"resamples": 50})
    with pytest.raises(TypeError, match=r"options= must be a JudgingOptions, not StatisticsOptions"):
        judge_summaries([ARTICLE], ["x"], judge=None, options=StatisticsOptions())


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"resamples": 0}, "resamples must be an integer >= 1"),
        ({"resamples": 2.5}, "resamples must be an integer >= 1"),
        ({"resamples": True}, "resamples must be an integer >= 1"),
        ({"confidence": 0.0}, "confidence must be a number strictly between 0 and 1"),
        ({"confidence": 95}, "confidence must be a number strictly between 0 and 1"),
        ({"confidence": math.nan}, "confidence must be a number strictly between 0 and 1"),
        ({"seed": -1}, "seed must be an integer >= 0"),
    ],
)
def test_a_bad_statistics_options_is_refused(fields, expected):
    with pytest.raises(ValueError, match=expected):
        StatisticsOptions(**fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"coverage": "no"}, "coverage must be True or False"),
        ({"ter": 1}, "ter must be True or False"),
        ({"max_source_tokens": 10}, "max_source_tokens must be None or an integer >= 32"),
    ],
)
def test_a_bad_judging_options_is_refused(fields, expected):
    with pytest.raises(ValueError, match=expected):
        JudgingOptions(**fields)


def test_the_objects_and_the_keywords_give_the_same_result(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    whole = judge_summaries(
        [ARTICLE] * ROWS, _summaries(), judge=judge, options=JudgingOptions(coverage=False, grounding=False),
        statistics=StatisticsOptions(resamples=200, seed=3, confidence=0.9),
    )
    flat = judge_summaries([ARTICLE] * ROWS, _summaries(), judge=judge, coverage=False, grounding=False, resamples=200, seed=3, confidence=0.9)
    assert same_metrics(whole.metrics, flat.metrics) and whole.signature == flat.signature
    assert whole.rows.drop(columns="judge_latency_s").equals(flat.rows.drop(columns="judge_latency_s"))
    assert "coverage" not in whole.rows and "grounding" not in whole.rows  # the options were applied, not defaulted


def test_statistics_given_to_judge_summaries_reach_its_intervals_and_signature(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    default = judge_summaries([ARTICLE] * ROWS, _summaries(), judge=judge, grounding=False)
    narrow = judge_summaries([ARTICLE] * ROWS, _summaries(), judge=judge, grounding=False, statistics=StatisticsOptions(confidence=0.5))
    assert narrow.metrics["richness"] == default.metrics["richness"]
    for name in ("richness", "claim_support_rate", "alignment"):  # BCa means and ratios, and a Wilson share
        assert 0 < _width(narrow.metrics, name) < _width(default.metrics, name), name
    other_seed = judge_summaries([ARTICLE] * ROWS, _summaries(), judge=judge, grounding=False, seed=1, resamples=300)
    assert _width(other_seed.metrics, "richness") != _width(default.metrics, "richness")
    assert Signature.parse(narrow.signature).confidence == 0.5
    assert (Signature.parse(other_seed.signature).bootstrap_seed, Signature.parse(other_seed.signature).resamples) == (1, 300)


def test_statistics_given_to_compare_results_reach_its_intervals_and_level():
    rows = MIN_DIFFERENCE_ROWS  # the fewest pairs a difference of means gets an interval from
    a = judge_summaries([ARTICLE] * rows, _summaries(rows=rows), judge=None, ids=list(range(rows)))
    b = judge_summaries([ARTICLE] * rows, _summaries(shift=2, rows=rows), judge=None, ids=list(range(rows)))
    default = compare_results(a, b).table.set_index("metric")
    narrow = compare_results(a, b, statistics=StatisticsOptions(confidence=0.5)).table.set_index("metric")
    flat = compare_results(a, b, confidence=0.5).table.set_index("metric")
    assert narrow.equals(flat)
    assert narrow.loc["grounding", "difference"] == default.loc["grounding", "difference"] != 0
    for name in ("grounding", "grounded_rate"):  # a BCa interval of a difference of means, Newcombe's of shares
        row, wide = narrow.loc[name], default.loc[name]
        assert 0 < row["ci_high"] - row["ci_low"] < wide["ci_high"] - wide["ci_low"], name
    # the level too: significant below 1 - confidence
    assert (narrow["significant"] == (narrow["p_holm"] < 0.5)).all()


def _mlflow_doors():
    """Each public function that takes option keywords beside MLflow or Spark, called so that nothing but the
    keywords could fail: the keywords are resolved first."""
    from mlflow_genai_metrics.tracking import compare_runs, evaluate_summaries, register_if_passing, summarization_metrics

    doors = {
        "summarization_metrics": lambda **k: summarization_metrics(None, **k),
        "evaluate_summaries": lambda **k: evaluate_summaries([], **k),
        "compare_runs": lambda **k: compare_runs([], **k),
        "register_if_passing": lambda **k: register_if_passing("models:/m/1", "m", run_id="r", rules={}, **k),
    }
    try:
        from mlflow_genai_metrics.spark import judge_summaries_spark
    except ImportError:  # pragma: no cover - pyspark is a test dependency
        return doors
    doors["judge_summaries_spark"] = lambda **k: judge_summaries_spark(None, judge=None, **k)
    return doors


def test_every_door_refuses_an_unknown_keyword_naming_it():
    for door, call in _mlflow_doors().items():
        with pytest.raises(TypeError, match=rf"{door}\(\) got an unexpected keyword argument 'resample'"):
            call(resample=10)
        with pytest.raises(ValueError, match="confidence must be a number strictly between 0 and 1"):
            call(confidence=2)


@pytest.mark.parametrize("path", ["evaluate_summaries", "summarization_metrics"])
def test_statistics_given_to_an_mlflow_path_reach_the_runs_signature(mlflow_store, path):
    import mlflow
    from mlflow.tracking import MlflowClient
    from mlflow_helpers import ARTICLES, first_sentence, frame

    from mlflow_genai_metrics.tracking import Grounding, evaluate_summaries, summarization_metrics

    if path == "evaluate_summaries":
        data = [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]
        run_id = evaluate_summaries(data, judges=[Grounding()], statistics=StatisticsOptions(resamples=200, confidence=0.9)).run_id
    else:
        with mlflow.start_run() as run:
            metrics = summarization_metrics(None, source_col="text", id_col="id", resamples=200, confidence=0.9)
            mlflow.models.evaluate(data=frame(), predictions="summary", targets="reference", extra_metrics=metrics)
        run_id = run.info.run_id
    signature = Signature.parse(MlflowClient().get_run(run_id).data.tags["mgm.signature"])
    assert (signature.resamples, signature.confidence, signature.bootstrap_seed) == (200, 0.9, 12345)
