"""A Spark run whose judge verified almost nothing carries the same warning as one process's, from three sums."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="the Spark path needs pyspark (pip install -e '.[spark]')")

import mlflow  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from test_spark import corpus, loopback_judge  # noqa: E402
from test_verdict_card import _Unsure  # noqa: E402

from mlflow_genai_metrics import judge_summaries  # noqa: E402
from mlflow_genai_metrics.spark import judge_summaries_spark  # noqa: E402
from mlflow_genai_metrics.testing import SummarizationJudgeScript  # noqa: E402
from mlflow_genai_metrics.tracking import log_spark_result  # noqa: E402


def test_a_spark_run_of_an_idk_judge_warns_as_one_process_does_and_logs_the_tag(spark, scripted_server, mlflow_store):
    data = corpus(12).drop(columns=["reference"])
    server = scripted_server(SummarizationJudgeScript(verdicts=_Unsure()))
    result = judge_summaries_spark(spark.createDataFrame(data), judge=loopback_judge(server), coverage=False)
    single = judge_summaries(data["source"], data["summary"], judge=loopback_judge(server), ids=data["id"], coverage=False, progress=False)
    assert result.warnings == single.warnings and [w.kind for w in result.warnings] == ["low_verification"]
    assert "idk for 100% of" in result.warnings[0].message
    with mlflow.start_run() as run:
        log_spark_result(result)
    assert MlflowClient().get_run(run.info.run_id).data.tags["mgm.warning.low_verification"] == result.warnings[0].message
    result.unpersist()


def test_a_spark_run_of_a_judge_that_supports_claims_has_no_warning(spark, scripted_server):
    data = corpus(12).drop(columns=["reference"])
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries_spark(spark.createDataFrame(data), judge=loopback_judge(server), coverage=False)
    assert result.warnings == [] and result.report()["warnings"] == {}
    result.unpersist()
