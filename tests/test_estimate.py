"""``estimate_cost`` and ``mgm evaluate --estimate``: the calls, tokens and cost a run is expected to take, from the
prompts it would send, without calling the judge; within a stated margin of the real usage on the BBC sample."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import SHARED_DATA
from helpers import judge_for

from mlflow_genai_metrics import cli, judge_summaries
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.summarization.estimate import estimate_cost
from mlflow_genai_metrics.testing import SummarizationJudgeScript, count_tokens

BBC = SHARED_DATA / "bbc_news_summary.jsonl"
SOURCES = ["Everton beat Liverpool 1-0 on Saturday. David Weir is an Everton defender. The crowd was 40,000."] * 2
SUMMARIES = ["Everton beat Liverpool. Weir defends for Everton.", "Everton won on Saturday."]


def real_usage(server, sources, summaries, *, coverage: bool, **options):
    return judge_summaries(sources, summaries, judge=judge_for(server), coverage=coverage, grounding=False, resamples=10, **options).usage


def test_the_estimate_calls_no_judge(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    estimate = estimate_cost(SOURCES, SUMMARIES, judge=judge_for(server))
    assert estimate.calls > 0 and server.request_count == 0 and server.model_listings == 0


def test_the_estimate_counts_the_calls_judge_summaries_makes(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    for coverage in (False, True):
        assert estimate_cost(SOURCES, SUMMARIES, coverage=coverage).calls == real_usage(server, SOURCES, SUMMARIES, coverage=coverage).calls


def test_a_chunked_source_costs_a_verification_and_a_key_point_call_per_chunk(scripted_server):
    source = "\n".join(f"Paragraph {n}: Everton beat Liverpool and David Weir played in defence." for n in range(12))
    server = scripted_server(SummarizationJudgeScript())
    estimate = estimate_cost([source], ["Everton beat Liverpool."], max_source_tokens=64)
    assert estimate.calls == real_usage(server, [source], ["Everton beat Liverpool."], coverage=True, max_source_tokens=64).calls
    assert estimate.calls > estimate_cost([source], ["Everton beat Liverpool."]).calls


def test_an_empty_summary_costs_no_call():
    assert estimate_cost(SOURCES[:1], ["  ...  "], coverage=False).calls == 0


def test_the_first_rounds_prompts_are_counted_as_sent(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    real_usage(server, SOURCES, SUMMARIES, coverage=True)
    sent = {purpose: sum(r.prompt_tokens for r in server.requests if r.purpose == purpose) for purpose in ("ExtractedClaims", "ExtractedKeyPoints")}
    passes = {p.name: p for p in estimate_cost(SOURCES, SUMMARIES, count_tokens=count_tokens).passes}
    overhead = 4  # per message, for the chat template
    assert passes["claims"].prompt_tokens == sent["ExtractedClaims"] + overhead * passes["claims"].calls
    assert passes["keypoints"].prompt_tokens == sent["ExtractedKeyPoints"] + overhead * passes["keypoints"].calls


def test_the_cost_is_the_tokens_at_the_prices_given_or_the_judges():
    estimate = estimate_cost(SOURCES, SUMMARIES, prices=(1.0, 2.0))
    assert estimate.cost_usd == pytest.approx((estimate.prompt_tokens * 1.0 + estimate.completion_tokens * 2.0) / 1e6)
    from mlflow_genai_metrics import Judge

    judge = Judge("m", "http://127.0.0.1:9/v1", cache_dir=None, prices=Prices(input=1.0, output=2.0))
    assert estimate_cost(SOURCES, SUMMARIES, judge=judge).cost_usd == estimate.cost_usd
    assert estimate_cost(SOURCES, SUMMARIES).cost_usd is None


@pytest.mark.skipif(not BBC.exists(), reason=f"the BBC data is not at {BBC} (../shared/data beside the project)")
@pytest.mark.parametrize("coverage", [False, True])
def test_on_the_bbc_sample_the_estimate_is_within_the_stated_margin_of_the_real_usage(scripted_server, coverage):
    """The margin docs/benchmarks.md states: calls exactly; prompt tokens within 10% (counted as the endpoint counts);
    the completion allowance at least what the scripted judge's terse answers take, and at most 3 times it."""
    from mlflow_genai_metrics.study import load_articles, stratified_sample

    articles = stratified_sample(load_articles(BBC), 30)
    sources, summaries = list(articles["text"]), list(articles["reference"])
    usage = real_usage(scripted_server(SummarizationJudgeScript()), sources, summaries, coverage=coverage)
    estimate = estimate_cost(sources, summaries, coverage=coverage, count_tokens=count_tokens)
    assert estimate.calls == usage.calls
    assert abs(estimate.prompt_tokens / usage.prompt_tokens - 1) <= 0.10
    assert 1.0 <= estimate.completion_tokens / usage.completion_tokens <= 3.0


def test_mgm_evaluate_estimate_prints_the_estimate_and_calls_no_judge(tmp_path, capsys, monkeypatch):
    data = tmp_path / "rows.csv"
    pd.DataFrame({"text": SOURCES, "summary": SUMMARIES}).to_csv(data, index=False)
    monkeypatch.delenv("MGM_JUDGE_MODEL", raising=False)  # no judge is configured, and none is needed
    assert cli.main(["evaluate", str(data), "--estimate", "--prices", "0.15,0.60", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]) == 0
    out = capsys.readouterr().out
    expected = estimate_cost(SOURCES, SUMMARIES, prices=(0.15, 0.60))
    assert f"expected cost for 2 rows: ${expected.cost_usd:.4f}" in out and "verify" in out
    assert not (tmp_path / "m.db").exists()  # no run was logged


def test_mgm_evaluate_refuses_prices_it_cannot_read(tmp_path, capsys):
    data = tmp_path / "rows.csv"
    pd.DataFrame({"text": SOURCES, "summary": SUMMARIES}).to_csv(data, index=False)
    assert cli.main(["evaluate", str(data), "--estimate", "--prices", "cheap"]) == 2
    assert "prices 'cheap'" in capsys.readouterr().err


def test_mgm_evaluate_budget_and_prices_reach_the_judge():
    argv = ["evaluate", "rows.csv", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1", "--max-calls", "30"]
    from mlflow_genai_metrics.cli.common import make_judge

    judge = make_judge(cli.build_parser().parse_args([*argv, "--prices", "0.15,0.60", "--max-cost-usd", "1"]))
    assert (judge.max_calls, judge.max_cost_usd, judge.prices) == (30, 1.0, Prices(input=0.15, output=0.60))
    with pytest.raises(ValueError, match="max_cost_usd needs prices"):
        make_judge(cli.build_parser().parse_args([*argv, "--max-cost-usd", "1"]))


@pytest.mark.skipif(not BBC.exists(), reason=f"the BBC data is not at {BBC} (../shared/data beside the project)")
def test_bench_estimate_smoke():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_estimate.py"
    done = subprocess.run([sys.executable, str(script), "--articles", "4"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| + coverage | total | 16 / 16 |" in done.stdout and "SmolLM2's tokenizer" in done.stdout
