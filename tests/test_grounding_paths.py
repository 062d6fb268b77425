"""The grounding check on every path: part of ``judge_summaries`` results (rows, claims, aggregates, signature), a
second opinion on each judge verdict (``lexical_support``, ``suspect``), alone with no judge, cached, and the same
numbers through ``grounding_metrics``, both MLflow paths and the comparison. (Spark: ``test_spark``.)"""

from __future__ import annotations

import json
import math
import sqlite3
import time

import mlflow
import numpy as np
import pandas as pd
import pytest
from helpers import judge_for, same_number

from mlflow_genai_metrics import JudgeConfigError, compare_results, grounding_metrics, judge_summaries
from mlflow_genai_metrics.grounding import support_thresholds
from mlflow_genai_metrics.grounding.model import calibrated_on
from mlflow_genai_metrics.testing import Fault, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import log_results, summarization_metrics, summarization_scorers

SOURCE = (
    "The city council approved the new budget on Monday after a long debate. "
    "Mayor Anna Berg said the plan would fund 12 new schools by 2026. "
    "Critics argued that the budget cuts public transport spending."
)
FAITHFUL = "The city council approved the new budget on Monday after a long debate. Mayor Anna Berg said the plan would fund 12 new schools by 2026."
INVENTED_CLAIM = "Police arrested three Swedish footballers at Heathrow airport."
WITH_INVENTION = f"The city council approved the new budget on Monday. {INVENTED_CLAIM}"
GROUNDING_AGGREGATES = ["grounding", "grounding_ci_low", "grounding_ci_high", "grounding_n",
                        "grounded_rate", "grounded_rate_ci_low", "grounded_rate_ci_high", "grounded_rate_n"]


def yes_to_everything() -> SummarizationJudgeScript:
    """A credulous judge: it says yes to every claim, the invented one included."""
    return SummarizationJudgeScript(verdicts={INVENTED_CLAIM: "yes"})


def test_judge_summaries_rows_carry_grounding_beside_the_judge_s_values(scripted_server):
    server = scripted_server(yes_to_everything())
    result = judge_summaries([SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION], judge=judge_for(server), ids=["faithful", "invented"])
    rows = result.rows.set_index("id")
    assert {"grounding", "grounded", "grounding_reasoning", "suspect_verdicts"} <= set(rows.columns)
    assert rows.loc["faithful", "grounding"] > rows.loc["invented", "grounding"]
    assert rows.loc["faithful", "grounded"] == 1 and rows.loc["invented", "grounded"] == 0
    assert "Heathrow" in rows.loc["invented", "grounding_reasoning"]
    for name in GROUNDING_AGGREGATES:
        assert name in result.metrics, name
    assert result.metrics["grounded_rate"] == 0.5 and result.metrics["grounding_n"] == 2
    assert "|grounding:v2-" in result.signature and "grounding:grounding" not in result.signature


def test_a_yes_on_an_invented_claim_is_marked_suspect_in_claims_rows_and_reasoning(scripted_server):
    server = scripted_server(yes_to_everything())
    result = judge_summaries([SOURCE], [WITH_INVENTION], judge=judge_for(server), ids=["invented"])
    claims = result.claims.set_index("claim")
    low, _ = support_thresholds()
    assert claims.loc[INVENTED_CLAIM, "verdict"] == "yes"
    assert claims.loc[INVENTED_CLAIM, "lexical_support"] < low
    assert bool(claims.loc[INVENTED_CLAIM, "suspect"]) is True
    supported = claims.drop(index=INVENTED_CLAIM)
    assert not supported["suspect"].any() and (supported["lexical_support"] > low).all()
    row = result.rows.iloc[0]
    assert row["suspect_verdicts"] == 1
    assert result.metrics["judge/suspect_rate"] == pytest.approx(1 / len(claims))
    lines = row["reasoning"].splitlines()
    assert "1 suspect verdict" in lines[0]
    assert lines[1].startswith("[yes, suspect: source support") and INVENTED_CLAIM in lines[1]  # a reviewer starts there


def test_a_row_the_judge_failed_on_keeps_its_grounding_but_no_suspect_count(scripted_server):
    def fail_second_summary(request, kind):
        return Fault.server_error(500) if kind == "claims" and "Heathrow" in request.messages[0]["content"] else None

    server = scripted_server(SummarizationJudgeScript(fault=fail_second_summary))
    result = judge_summaries([SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION], judge=judge_for(server, max_retries=0), ids=["ok", "failed"])
    rows = result.rows.set_index("id")
    assert rows.loc["failed", "error"] != "" and pd.isna(rows.loc["failed", "claim_count"])
    assert not math.isnan(rows.loc["failed", "grounding"]) and rows.loc["failed", "grounded"] == 0
    assert pd.isna(rows.loc["failed", "suspect_verdicts"]) and rows.loc["ok", "suspect_verdicts"] == 0
    assert result.metrics["grounding_n"] == 2 and result.metrics["alignment_n"] == 1


def test_no_judge_gives_the_grounding_check_alone_with_the_numbers_of_grounding_metrics():
    result = judge_summaries([SOURCE, SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION, "..."], judge=None, ids=["a", "b", "empty"])
    assert not {"claim_count", "aligned", "reasoning", "suspect_verdicts"} & set(result.rows.columns)
    assert {"grounding", "grounded", "grounding_reasoning", "error"} <= set(result.rows.columns)
    assert not any(name.startswith("judge") or name.startswith("alignment") for name in result.metrics)
    assert result.signature.startswith("grounding:") and "judge:" not in result.signature
    alone = grounding_metrics([SOURCE, SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION, "..."], ids=["a", "b", "empty"], cache=False)
    for name in GROUNDING_AGGREGATES:
        assert same_number(result.metrics[name], alone.metrics[name]), name
    pd.testing.assert_series_equal(result.rows["grounding"], alone.rows["grounding"])
    assert result.claims.empty and result.judgements[0].judged is False


def test_grounding_off_leaves_no_grounding_column_metric_or_signature_part(scripted_server):
    server = scripted_server(yes_to_everything())
    result = judge_summaries([SOURCE], [WITH_INVENTION], judge=judge_for(server), grounding=False)
    assert not {"grounding", "grounded", "grounding_reasoning", "suspect_verdicts"} & set(result.rows.columns)
    assert not any(name.startswith("ground") or name.startswith("judge/suspect") for name in result.metrics)
    assert "grounding:" not in result.signature
    assert result.claims["lexical_support"].isna().all() and result.claims["suspect"].isna().all()


def test_a_rerun_reads_the_grounding_and_the_claim_supports_from_the_cache(scripted_server, tmp_path, monkeypatch):
    server = scripted_server(yes_to_everything())
    judge = judge_for(server, cache_dir=tmp_path / "cache")
    first = judge_summaries([SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION], judge=judge)

    def recomputed(*args, **kwargs):
        raise AssertionError("a rerun recomputed what the cache holds")

    monkeypatch.setattr("mlflow_genai_metrics.grounding.cache.score_pairs", recomputed)
    monkeypatch.setattr("mlflow_genai_metrics.grounding.cache.lexical_supports", recomputed)
    again = judge_summaries([SOURCE, SOURCE], [FAITHFUL, WITH_INVENTION], judge=judge)
    columns = ["grounding", "grounded", "grounding_reasoning", "suspect_verdicts"]
    pd.testing.assert_frame_equal(again.rows[columns], first.rows[columns])
    pd.testing.assert_frame_equal(again.claims, first.claims)


def test_a_judge_without_a_cache_keeps_no_grounding_cache_either(scripted_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "default-cache"))
    server = scripted_server(yes_to_everything())
    judge_summaries([SOURCE], [FAITHFUL], judge=judge_for(server, cache_dir=None))
    assert not (tmp_path / "default-cache").exists()


def test_the_same_rows_give_the_same_grounding_on_every_path(scripted_server, mlflow_store):
    server = scripted_server(yes_to_everything())
    sources = [SOURCE, SOURCE, SOURCE]
    summaries = [FAITHFUL, WITH_INVENTION, "The council approved the budget on Monday."]
    ids = ["a", "b", "c"]
    api = judge_summaries(sources, summaries, judge=judge_for(server), ids=ids)
    alone = grounding_metrics(sources, summaries, ids=ids)
    data = pd.DataFrame({"id": ids, "text": sources, "summary": summaries})
    with mlflow.start_run():
        classic = mlflow.models.evaluate(
            data=data, predictions="summary", extra_metrics=summarization_metrics(judge_for(server), source_col="text", id_col="id", all_metrics=True)
        )
    records = [{"inputs": {"text": t, "id": i}, "outputs": s} for i, t, s in zip(ids, sources, summaries)]
    scorers = summarization_scorers(judge_for(server))
    genai = mlflow.genai.evaluate(data=records, scorers=scorers)
    log_results(genai.run_id, scorers)  # the full report of the plain run
    # judge/suspect_rate is beyond the run metrics' default budget: the genai run's report holds it
    genai_metrics = json.loads(mlflow.artifacts.load_text(f"runs:/{genai.run_id}/mgm/report.json"))["metrics"]
    for name in [*GROUNDING_AGGREGATES, "judge/suspect_rate"]:
        assert same_number(classic.metrics.get(name), api.metrics[name]), name
        assert same_number(genai_metrics.get(name), api.metrics[name]), name
        if name in alone.metrics:
            assert same_number(alone.metrics[name], api.metrics[name]), name
    table = classic.tables["eval_results_table"].set_index("id")
    np.testing.assert_allclose(table["grounding/score"].to_numpy(float), api.rows.set_index("id")["grounding"].to_numpy(float))
    # the classic path's justification names what the number holds on, as the card does
    assert table.loc["b", "grounding/justification"] == (f"{api.rows.set_index('id').loc['b', 'grounding_reasoning']}\n"
                                                         f"Calibrated on {calibrated_on()}: a score for comparing systems on the "
                                                         "same data, not a probability that holds on data unlike these.")
    traces = mlflow.search_traces(run_id=genai.run_id, return_type="list")
    values = sorted(a.value for t in traces for a in t.info.assessments if a.name == "grounding")
    assert values == [float(f"{v:.3g}") for v in sorted(api.rows["grounding"])]  # a card shows 3 significant digits


def test_the_comparison_pairs_grounding_like_every_other_metric(scripted_server):
    server = scripted_server(yes_to_everything())
    sources = [SOURCE] * 4
    a = judge_summaries(sources, [FAITHFUL] * 4, judge=judge_for(server), ids=[1, 2, 3, 4])
    b = judge_summaries(sources, [FAITHFUL, WITH_INVENTION, WITH_INVENTION, WITH_INVENTION], judge=judge_for(server), ids=[1, 2, 3, 4])
    table = compare_results(a, b).table.set_index("metric")
    assert table.loc["grounded_rate", "difference"] == pytest.approx(-0.75)
    assert table.loc["grounding", "difference"] < 0


def test_the_check_runs_while_the_judge_waits(scripted_server, tmp_path):
    """Before the judge's last answer is sent, every row's grounding and every claim's support are already stored:
    the check ran while the judge's requests were in flight, not after them."""
    rows = 6
    sources = [f"Article {i}: the council approved budget {i} on Monday. The mayor welcomed budget {i}." for i in range(rows)]
    summaries = [f"The council approved budget {i}. The mayor welcomed it." for i in range(rows)]
    judge_script, seen = SummarizationJudgeScript(), {}

    def stored() -> tuple[int, int]:
        path = tmp_path / "cache" / "grounding-cache.sqlite3"
        if not path.exists():
            return 0, 0
        with sqlite3.connect(path) as db:
            keys = [k for (k,) in db.execute("SELECT key FROM grounding")]
        return sum("|claim:" not in k for k in keys), sum("|claim:" in k for k in keys)

    def script(request):
        if request.index == 2 * rows - 1:  # the last verification: claims then verdicts for each row, no coverage
            deadline = time.monotonic() + 20
            while stored()[0] < rows and time.monotonic() < deadline:
                time.sleep(0.05)  # the server's thread waits; the check runs on the client's loop
            seen["rows"], seen["claims"] = stored()
        return judge_script(request)

    server = scripted_server(script)
    judge = judge_for(server, cache_dir=tmp_path / "cache", max_concurrency=2)
    result = judge_summaries(sources, summaries, judge=judge, coverage=False)
    assert server.request_count == 2 * rows and (result.rows["error"] == "").all()
    assert seen["rows"] == rows
    assert seen["claims"] > 0  # claims checked as they came, before their verdicts (the last rows' may still wait)
    assert result.rows["grounding"].notna().all()


def test_a_configuration_error_stops_the_check_beside_the_judge_too(scripted_server, tmp_path):
    """A run the judge cannot make (403 on the first request) raises at once: the check running beside the judge is
    cancelled with it, not left to score every remaining row first."""
    rows = 1500
    sources = [f"Article {i}: the council approved budget {i} on Monday. The mayor welcomed budget {i}." for i in range(rows)]
    summaries = [f"The council approved budget {i}. The mayor welcomed it." for i in range(rows)]
    server = scripted_server(lambda request: Fault.http(403, "Project does not have access to model"))
    judge = judge_for(server, cache_dir=tmp_path / "cache")
    with pytest.raises(JudgeConfigError, match="refused access"):
        judge_summaries(sources, summaries, judge=judge, coverage=False)
    path = tmp_path / "cache" / "grounding-cache.sqlite3"
    with sqlite3.connect(path) as db:
        (scored,) = db.execute("SELECT count(*) FROM grounding").fetchone()
    assert scored < rows / 2, f"{scored} of {rows} rows were scored after the judge had failed"
