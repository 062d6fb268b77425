"""Answers from retrieved passages on Spark (``judge_answers_spark``, ``local[2]``) against ``judge_answers`` in one
process, on one scripted judge: the same rows, claims (passage, quote, found), facts and aggregates; bad rows named
before any call; a failing row kept with its error; the budget split over partitions; the run logged as one
process's is."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="the Spark path needs pyspark (pip install -e '.[spark]')")

from helpers import judge_for  # noqa: E402

from mlflow_genai_metrics.rag import judge_answers  # noqa: E402
from mlflow_genai_metrics.spark import judge_answers_spark  # noqa: E402
from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply  # noqa: E402

TOWER = "The Eiffel Tower is 330 metres tall. It stands in Paris beside the Seine."
CAPITAL = "Paris is the capital of France and its largest city."
HAMLET = "Shakespeare wrote Hamlet around 1600. It is set in Denmark."


def answers(rows: int = 24) -> pd.DataFrame:
    """Supported, invented and off-topic answers, expected answers on some rows, an empty answer, a row with no
    passage, and one row (the only one asking about Verona) whose relevance reply is not JSON."""
    records = []
    for i in range(rows):
        passages = [[TOWER, CAPITAL], [HAMLET, TOWER], [CAPITAL]][i % 3]
        answer = ["The Eiffel Tower is 330 metres tall.", "Shakespeare wrote Hamlet.", "Paris is the capital of France."][i % 3]
        if i % 4 == 1:
            answer += f" Row {i} has a tower of gold."  # in no passage: idk
        question = f"Question {i}: what do the passages say?"
        records.append({"id": f"q{i}", "question": question, "passages": passages, "answer": answer,
                        "expected": answer.split(".")[0] + "." if i % 2 == 0 else None, "model": "ab"[i % 2]})
    records[5]["answer"] = ""
    records[7]["passages"] = []
    records[9]["question"] = "What is in Verona?"
    return pd.DataFrame.from_records(records)


def verona_relevance_fails(request, kind):
    return Reply("not JSON") if kind == "relevance" and "Verona" in request.messages[0]["content"] else None


def plain(series: pd.Series) -> list:
    return series.astype(object).where(series.notna(), None).tolist()


def test_spark_and_one_process_give_the_same_rows_claims_facts_and_aggregates(spark, scripted_server):
    data = answers()
    server = scripted_server(AnswersJudgeScript(fault=verona_relevance_fails))
    judge = judge_for(server, max_concurrency=8, cache_dir=None, prices={"input": 0.15, "output": 0.6})
    single = judge_answers(data["question"], data["passages"], data["answer"], judge=judge, ids=data["id"], expected=data["expected"], progress=False)
    single_calls = server.request_count

    result = judge_answers_spark(spark.createDataFrame(data), judge=judge, expected_col="expected", carry_cols=["model"], partitions=3)
    ours = result.rows.toPandas().set_index("id").sort_index()
    assert server.request_count - single_calls == single_calls  # every call once, as in one process

    theirs = single.rows.set_index("id").sort_index()
    assert list(ours.index) == list(theirs.index) and plain(ours["model"]) == plain(data.set_index("id").sort_index()["model"])
    assert set(theirs.columns) <= set(ours.columns) and {"suspect_verdicts", "context_sufficiency", "quote_failures"} <= set(theirs.columns)
    for column in theirs.columns:
        if column == "judge_latency_s":
            continue
        if column == "judge_cost_usd":
            np.testing.assert_allclose(ours[column].to_numpy(float), theirs[column].to_numpy(float), rtol=1e-9)
            continue
        assert plain(ours[column]) == plain(theirs[column]), column
    assert ours.loc["q9", "error"].startswith("relevance check") and ours.loc["q5", "claim_count"] == 0
    assert ours["defect_unverifiable"].sum() > 0 and ours["context_sufficiency"].notna().sum() > 0

    for name in ("claims", "facts"):
        left = getattr(result, name).toPandas().sort_values(["id", name[:-1] + "_index"]).reset_index(drop=True)
        right = getattr(single, name).sort_values(["id", name[:-1] + "_index"]).reset_index(drop=True)
        assert list(left.columns) == list(right.columns) and len(left) == len(right) > 0, name
        for column in right.columns:
            assert plain(left[column]) == plain(right[column]), (name, column)

    assert set(result.metrics) == set(single.metrics)
    for name, value in single.metrics.items():
        if name == "judge/cost_usd":
            assert result.metrics[name] == pytest.approx(value, rel=1e-12)
        else:
            assert result.metrics[name] == value or (np.isnan(value) and np.isnan(result.metrics[name])), name
    assert result.signature == single.signature
    report, expected = result.report(), json.loads(json.dumps(single.report()))
    assert report.pop("metrics").keys() == expected.pop("metrics").keys() and report == expected


def test_bad_rows_are_named_before_any_call(spark, scripted_server):
    data = answers(12)
    data.loc[1, "question"] = "\n\t "
    data.at[2, "passages"] = [TOWER, "\u3000\n"]  # whitespace a Python strip() removes, and Spark's trim did not
    data.at[3, "passages"] = None
    data.loc[4, "id"] = "q0"
    server = scripted_server(AnswersJudgeScript())
    with pytest.raises(ValueError, match="cannot judge these rows") as raised:
        judge_answers_spark(spark.createDataFrame(data), judge=judge_for(server))
    message = str(raised.value)
    for problem in ("id 'q1': the question is empty", "id 'q2': a passage is missing or empty", "id 'q3': the passages are missing",
                    "id 'q0': the id appears 2 times"):
        assert problem in message
    with pytest.raises(TypeError, match="'passages' is string, not array<string>"):
        judge_answers_spark(spark.createDataFrame(answers(12).assign(passages=TOWER)), judge=judge_for(server))
    with pytest.raises(ValueError, match="no column"):
        judge_answers_spark(spark.createDataFrame(answers(12)), judge=judge_for(server), expected_col="reference")
    with pytest.raises(ValueError, match="overwrite"):
        judge_answers_spark(spark.createDataFrame(answers(12).assign(answer_relevance=1.0)), judge=judge_for(server),
                            carry_cols=["answer_relevance"])
    assert server.request_count == 0


def test_max_calls_is_split_over_the_partitions_and_spent_on_whole_rows(spark, scripted_server):
    data = answers(24)
    server = scripted_server(AnswersJudgeScript())
    judge = judge_for(server, max_calls=30)
    result = judge_answers_spark(spark.createDataFrame(data), judge=judge, partitions=4)
    rows = result.rows.toPandas()
    assert server.request_count <= 30 and result.usage.calls == server.request_count
    started = rows.loc[rows["error"].str.contains("budget"), "judge_calls"]
    assert (rows["error"] == "").sum() > 0 and len(started) > 0 and (started == 0).all()  # a row is judged whole or not begun


def test_a_spark_answers_run_is_logged_and_compared_like_a_single_process_one(spark, scripted_server, mlflow_store):
    import mlflow
    from mlflow.tracking import MlflowClient

    from mlflow_genai_metrics.tracking import compare_runs, load_run, log_result, log_spark_result

    data = answers(12)
    judge = judge_for(scripted_server(AnswersJudgeScript()))
    single = judge_answers(data["question"], data["passages"], data["answer"], judge=judge, ids=data["id"], expected=data["expected"], progress=False)
    with mlflow.start_run(run_name="single") as run:
        log_result(single, log_metrics=True)
    with mlflow.start_run(run_name="spark") as spark_run:
        log_spark_result(judge_answers_spark(spark.createDataFrame(data), judge=judge, expected_col="expected"))

    client = MlflowClient()
    a, b = client.get_run(run.info.run_id).data, client.get_run(spark_run.info.run_id).data
    assert set(a.metrics) == set(b.metrics) and {"answer_relevance", "context_sufficiency_n", "quote_failure_rate"} <= set(b.metrics)
    assert all(a.metrics[name] == b.metrics[name] for name in a.metrics if not name.startswith("judge/"))
    assert a.tags["mgm.signature"] == b.tags["mgm.signature"]
    top = {f.path for f in client.list_artifacts(spark_run.info.run_id)}
    assert {"mgm_rows.json", "mgm_claims.json", "mgm_facts.json", "mgm_plot_verdicts.png"} <= top
    assert sorted(load_run(spark_run.info.run_id).rows["id"]) == sorted(data["id"])
    differences = compare_runs([run.info.run_id, spark_run.info.run_id], log=False)["difference_vs_first"].dropna()
    assert len(differences) > 0 and (differences == 0).all()
