"""The method's options live in the engine, not on the LLM client (issue 46): ``stability``, ``order_check`` and
``examples`` are ``summarization.method.Method``'s, which every door takes alike (keywords or one ``Method``), the
MLflow judges carry (and their registrable form keeps), a set of judges shares, and the command line reads from its
own flags. ``Judge`` refuses them (tests/test_judge_declared_once.py)."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics import JudgingOptions, evaluate_summaries, judge_summaries
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.judge import CorrectedVerdict, ExampleSet
from mlflow_genai_metrics.signature import Signature, parse_signature
from mlflow_genai_metrics.summarization.method import Method
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, summarization_scorers
from mlflow_genai_metrics.tracking.judges import rebuilt
from mlflow_genai_metrics.tracking.rejudge import _options

SOURCES = [f"Article {k}. The club {k} won the cup. The striker {k} scored twice." for k in range(6)]
SUMMARIES = [f"The club {k} won the cup. The striker {k} scored twice." for k in range(6)]
EXAMPLES = ExampleSet(examples=(CorrectedVerdict(source="The prize went to Ada.", statement="Ada won the prize.", verdict="yes"),))


def test_a_door_takes_the_method_as_keywords_or_whole_and_refuses_both_at_once(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    by_keyword = judge_summaries(SOURCES, SUMMARIES, judge=judge, stability=3, coverage=False, grounding=False, progress=False)
    whole = judge_summaries(SOURCES, SUMMARIES, judge=judge, progress=False,
                            options=JudgingOptions(coverage=False, grounding=False, method=Method(stability=3)))
    assert by_keyword.signature == whole.signature and parse_signature(whole.signature)["stability"] == "3"
    assert by_keyword.metrics["judge/flip_rate"] == whole.metrics["judge/flip_rate"] == 0.0
    with pytest.raises(ValueError, match="stability given as a keyword and in options="):
        judge_summaries(SOURCES, SUMMARIES, judge=judge, stability=3, options=JudgingOptions())
    with pytest.raises(TypeError, match="stabilty"):
        judge_summaries(SOURCES, SUMMARIES, judge=judge, stabilty=3)
    with pytest.raises(ValueError):  # pydantic's own words: stability must be at least 1
        judge_summaries(SOURCES, SUMMARIES, judge=judge, stability=0)


def test_the_mlflow_judges_carry_the_method_and_their_registrable_form_keeps_it(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    aligned = ClaimAlignment(judge, stability=3, order_check=0.5, examples=EXAMPLES.write(tmp_path / "examples.json"))
    assert aligned.method() == Method(stability=3, order_check=0.5, examples=EXAMPLES)
    again = rebuilt(json.loads(json.dumps(aligned.settings())))  # as MLflow stores it: JSON
    assert again.method() == aligned.method() and type(again) is ClaimAlignment
    with pytest.raises(ValueError, match="stability"):
        ClaimAlignment(judge, stability=0)
    with pytest.raises(ValueError, match="order_check"):
        KeyPointCoverage(judge, order_check=2)
    assert Grounding().method() == Method()  # asks no model: nothing verified


def test_a_set_of_judges_shares_one_method(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    rows = [{"inputs": {"text": s, "id": k}, "outputs": t} for k, (s, t) in enumerate(zip(SOURCES, SUMMARIES))]
    with pytest.raises(ValueError, match="one method"):
        evaluate_summaries(rows, [ClaimAlignment(judge, stability=3), KeyPointCoverage(judge), Grounding()])
    evaluation = evaluate_summaries(rows, summarization_scorers(judge, stability=3))
    assert parse_signature(evaluation.result.signature)["stability"] == "3" and evaluation.result.metrics["judge/flip_rate"] == 0.0
    logged = MlflowClient().get_run(evaluation.run_id).data.params
    assert logged["mgm.stability"] == "3"


def test_mgm_evaluate_reads_the_method_s_flags(scripted_server, mlflow_store, tmp_path, monkeypatch, capsys):
    server = scripted_server(SummarizationJudgeScript())
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "rows.csv"
    pd.DataFrame({"id": range(6), "text": SOURCES, "summary": SUMMARIES}).to_csv(data, index=False)
    flags = ["--judge-model", server.models[0], "--judge-base-url", server.base_url, "--tracking-uri", mlflow_store]
    assert mgm(["evaluate", str(data), "--id-col", "id", "--stability", "2", "--run-name", "twice", *flags]) == 0
    [run] = mlflow.search_runs(search_all_experiments=True, filter_string="attributes.run_name = 'twice'", output_format="list")
    assert run.data.params["mgm.stability"] == "2"
    capsys.readouterr()
    assert mgm(["evaluate", str(data), "--grounding-only", "--stability", "2", "--tracking-uri", mlflow_store]) == 2
    assert "--grounding-only asks no judge, so no claim is verified: leave out --stability" in capsys.readouterr().err


def test_the_champion_judged_again_takes_the_candidate_s_method_from_its_signature():
    signed = Signature.parse("judge:m|base:localhost|mode:json_schema|max_tokens:default|claims:v1-aaaa|stability:3|"
                             f"examples:{EXAMPLES.tag}|temp:0|seed:none|mgm:0")
    options, _ = _options(signed, EXAMPLES)
    assert options.method == Method(stability=3, examples=EXAMPLES)
    with pytest.raises(ValueError, match=f"judged with the examples {EXAMPLES.tag}, and none were given"):
        _options(signed)
    assert _options(Signature.parse("judge:m|base:localhost|temp:0|seed:none|mgm:0"))[0].method == Method()
    from mlflow_genai_metrics import register_if_passing

    with pytest.raises(ValueError, match="give them with champion_data"):  # nothing to judge again: said, never ignored
        register_if_passing("models:/m/1", "m", run_id="r", rules=["alignment >= 0"], examples=EXAMPLES)
