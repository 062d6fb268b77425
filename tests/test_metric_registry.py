"""The metric registry: a metric added through it alone reaches the per-row table, a real SQLite MLflow run, the
Spark result and the comparison, with no other change (issue 13)."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics import compare_results, judge_summaries
from mlflow_genai_metrics.summarization.metrics import METRICS, MetricSpec
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import summarization_metrics

# A row metric of the judge and its aggregate: a summary that makes more than one claim is "long".
LONG = MetricSpec(
    "long_summary", level="row", description="1 when the summary makes more than one claim", greater_is_better=False,
    row_value=lambda facts: None if facts.claim_count is None else int(facts.claim_count > 1), integer=True,
)
LONG_RATE = MetricSpec(
    "long_summary_rate", level="aggregate", description="share of judged rows with more than one claim",
    greater_is_better=False, kind="proportion", of="long_summary", share=True,
)


def _data() -> pd.DataFrame:
    articles = [f"Article {i}. The council approved budget {i}. The mayor welcomed budget {i}." for i in range(8)]
    short = [f"The council approved budget {i}." for i in range(8)]
    long = [f"The council approved budget {i}. The mayor welcomed budget {i}." for i in range(8)]
    return pd.DataFrame({"id": range(8), "source": articles, "short": short, "long": [s if i % 2 else l for i, (s, l) in enumerate(zip(short, long))]})


def test_a_registered_metric_is_in_the_per_row_table_and_the_aggregates(scripted_server):
    data, server = _data(), scripted_server(SummarizationJudgeScript())
    with METRICS.registered(LONG, LONG_RATE):
        result = judge_summaries(data["source"], data["long"], judge=judge_for(server), coverage=False)
    assert result.rows["long_summary"].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
    assert (result.metrics["long_summary_rate"], result.metrics["long_summary_rate_n"]) == (0.5, 8)
    assert result.metrics["long_summary_rate_ci_low"] < 0.5 < result.metrics["long_summary_rate_ci_high"]
    assert result.estimates["long_summary_rate"].method == "clopper-pearson"


def test_a_registered_metric_is_compared_pair_by_pair(scripted_server):
    data, server = _data(), scripted_server(SummarizationJudgeScript())
    with METRICS.registered(LONG, LONG_RATE):
        a = judge_summaries(data["source"], data["short"], judge=judge_for(server), coverage=False)
        b = judge_summaries(data["source"], data["long"], judge=judge_for(server), coverage=False)
        difference = compare_results(a, b).difference("long_summary_rate")
    assert (difference["a"], difference["b"], difference["difference"]) == (0.0, 0.5, 0.5)


def test_a_registered_metric_is_logged_to_a_real_mlflow_run(scripted_server, mlflow_store):
    data, server = _data(), scripted_server(SummarizationJudgeScript())
    with METRICS.registered(LONG, LONG_RATE):
        with mlflow.start_run() as run:
            evaluation = mlflow.models.evaluate(
                data=data, predictions="long", extra_metrics=summarization_metrics(judge_for(server), source_col="source", coverage=False, all_metrics=True)
            )
    logged = MlflowClient().get_run(run.info.run_id).data.metrics
    assert logged["long_summary_rate"] == 0.5 and logged["long_summary_rate_n"] == 8 and "long_summary_rate_ci_low" in logged
    assert evaluation.tables["eval_results_table"]["long_summary/score"].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]


def test_a_registered_metric_reaches_the_spark_result(spark, scripted_server):
    from mlflow_genai_metrics.spark import judge_summaries_spark

    data, server = _data(), scripted_server(SummarizationJudgeScript())
    with METRICS.registered(LONG, LONG_RATE):
        frame = spark.createDataFrame(data[["id", "source", "long"]])
        result = judge_summaries_spark(frame, judge=judge_for(server), summary_col="long", coverage=False)
        rows = result.rows.toPandas().sort_values("id")
        metrics = result.metrics
    assert rows["long_summary"].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
    assert (metrics["long_summary_rate"], metrics["long_summary_rate_n"]) == (0.5, 8)


def _reference_result(server, summaries, **options):
    data = _data()
    references = [f"The council approved budget {i}." for i in range(8)]
    return judge_summaries(data["source"], summaries, judge=judge_for(server), coverage=False, references=references, **options)


def test_corpus_bleu_and_chrf_are_compared_pair_by_pair_on_their_sacrebleu_statistics(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    data = _data()
    a = _reference_result(server, data["long"])
    b = _reference_result(server, data["short"])  # the short summaries are the references: a clear gain
    comparison = compare_results(a, b)
    for name in ("bleu", "chrf"):
        difference = comparison.difference(name)
        assert difference["a"] == pytest.approx(a.metrics[name]) and difference["b"] == pytest.approx(b.metrics[name])
        assert difference["difference"] > 0 and difference["test"].startswith("paired approximate randomization")
        # 4 of the 8 pairs differ: even 4 of 4 going B's way cannot reach 0.05 (tests/test_paired_corpus.py: 40 rows do)
        assert difference["note"] == "too few pairs to test (4 of 8 pairs differ)"


def test_ter_is_computed_on_request_and_signed(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = _reference_result(server, _data()["long"], ter=True)
    assert "ter" in result.rows and "ter" in result.metrics and "ter_stats" in result.rows
    assert "|ter:nrefs=1," in result.signature and "|bleu:nrefs=1," in result.signature
    assert "ter" not in _reference_result(server, _data()["long"]).metrics


def test_runs_whose_reference_metrics_were_computed_differently_are_compared_on_the_judge_metrics_only(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    a = _reference_result(server, _data()["long"])
    b = _reference_result(server, _data()["short"])
    changed = b.signature.replace("|bleu:nrefs=1,", "|bleu:nrefs=2,")
    b2 = type(b)(b.rows, b.claims, b.key_points, b.metrics, changed, b.judgements, b.usage)
    table = compare_results(a, b2).table
    assert "alignment" in set(table["metric"]) and not {"bleu", "chrf", "rougeL"} & set(table["metric"])
