"""What judging cost, as every route reports it, against what the scripted endpoint counted (hostile cases): the
calls, prompt, completion and cached prompt tokens and the cost at prices with a cached-input price, on the server's
emulated prompt cache (``prefix_cache_block``), which reports cached tokens in each reply's usage."""

from __future__ import annotations

import mlflow
import pytest
from helpers import judge_for

from mlflow_genai_metrics import Judge, judge_summaries
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.summarization import estimate_cost
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, log_results

PRICES = Prices(input=1000.0, output=3000.0, cached_input=100.0)  # USD per million tokens: cached prompt tokens cost a tenth


@pytest.fixture(autouse=True)
def few_workers(monkeypatch):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")


def spent(requests) -> dict[str, float]:
    """What the endpoint counted for ``requests``: every call, and the tokens of those it answered, priced."""
    answered = [r for r in requests if r.status == 200]
    prompt, completion = sum(r.prompt_tokens for r in answered), sum(r.completion_tokens for r in answered)
    cached = sum(r.cached_tokens for r in answered)
    return {"judge/calls": float(len(requests)), "judge/prompt_tokens": float(prompt), "judge/completion_tokens": float(completion),
            "judge/cached_prompt_tokens": float(cached), "judge/cost_usd": PRICES.cost(prompt, completion, cached)}


def summaries(count: int = 4) -> list[dict]:
    rows = []
    for i in range(count):
        text = f"The council of town {i} approved the budget on Monday. The mayor {i} welcomed it. Critics objected strongly."
        rows.append({"inputs": {"text": text, "id": f"r{i}"}, "outputs": f"The council of town {i} approved the budget."})
    return rows


@pytest.mark.parametrize("cached", [True, False])
def test_log_results_counts_the_cached_prompt_tokens_the_evaluation_was_billed(scripted_server, mlflow_store, tmp_path, cached):
    """Plain mlflow.genai.evaluate, then log_results: the run's judge/cached_prompt_tokens was the report's own (0 with
    the judge's cache on, while the evaluation's calls had 1,004 of their prompt tokens served from the endpoint's
    prompt cache), beside a judge/prompt_tokens and judge/cost_usd that counted the evaluation's calls."""
    server = scripted_server(SummarizationJudgeScript(), prefix_cache_block=4)
    judge = judge_for(server, prices=PRICES, cache_dir=tmp_path / "cache" if cached else None)
    scorers = [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()]
    result = mlflow.genai.evaluate(data=summaries(), scorers=scorers)
    report = log_results(result.run_id, scorers)
    truth = spent(server.requests)
    assert truth["judge/cached_prompt_tokens"] > 0 and server.request_count == (16 if cached else 32)
    assert {name: report.metrics[name] for name in truth} == pytest.approx(truth)
    logged = mlflow.get_run(result.run_id).data.metrics
    assert logged["judge/calls"] == truth["judge/calls"] and logged["judge/cost_usd"] == pytest.approx(truth["judge/cost_usd"])


def test_an_empty_reply_that_reports_0_completion_tokens_costs_its_prompt_alone(scripted_server):
    """One claim extraction answered with an empty message, whose usage says 0 completion tokens (and is asked again:
    a repair turn). Its 0 was read as a count left out and priced at the request's max_tokens: the run reported
    1,918 completion tokens for the 414 the endpoint counted, $8.37 for $3.86, and warned that a call reported more
    tokens than it could."""
    def empty_once(request, kind):
        return Reply("") if kind == "claims" and not request.is_repair and "town 1 " in request.prompt_text else None

    server = scripted_server(SummarizationJudgeScript(fault=empty_once), prefix_cache_block=4)
    rows = summaries(6)
    result = judge_summaries([row["inputs"]["text"] for row in rows], [row["outputs"] for row in rows],
                             judge=judge_for(server, prices=PRICES), progress=False)
    truth = spent(server.requests)
    assert any(r.status == 200 and r.completion_tokens == 0 for r in server.requests) and result.rows["error"].fillna("").eq("").all()
    assert {name: result.metrics[name] for name in truth} == pytest.approx(truth)
    assert result.usage.implausible_usage == 0 and "judge/implausible_usage" not in result.metrics
    assert not [w for w in result.warnings if w.kind == "implausible_usage"]


def test_the_estimate_for_a_judge_in_batch_mode_prices_its_calls_at_the_batch_price():
    """A batched Judge's calls cost the batch price (half, by default), as ``mgm evaluate --estimate --batch`` says:
    ``estimate_cost(judge=judge.batched())`` priced them at the full price, twice what the run would cost."""
    rows = summaries(3)
    sources, texts = [row["inputs"]["text"] for row in rows], [row["outputs"] for row in rows]
    judge = Judge("scripted-judge", "http://127.0.0.1:9/v1", "key", prices=PRICES, cache_dir=None)
    online = estimate_cost(sources, texts, judge=judge)
    batched = estimate_cost(sources, texts, judge=judge.batched())
    assert batched.calls == online.calls and batched.prompt_tokens == online.prompt_tokens
    assert batched.cost_usd == pytest.approx(online.cost_usd / 2) == pytest.approx(estimate_cost(sources, texts, prices=PRICES.batch()).cost_usd)
