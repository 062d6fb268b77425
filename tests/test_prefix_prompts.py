"""Every pass that reads the source opens with the same bytes (instructions, then the source), whatever differs per
call, so an endpoint's prompt cache reads each source once; the prompts' versions say so in the signature."""

from __future__ import annotations

import os

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.prompts import SOURCE_PROMPTS, load_prompt, marker
from mlflow_genai_metrics.summarization.chunking import split_source
from mlflow_genai_metrics.summarization.passes import extract_key_points_request, verify_claims_request
from mlflow_genai_metrics.testing import SummarizationJudgeScript, marked_sections

ARTICLE = "Everton beat Liverpool 1-0 on Saturday. David Weir is an Everton defender. The crowd was 40,000."


def prompt_of(request) -> str:
    return request.messages[0].content


def source_block_end(prompt: str, source: str) -> int:
    """Where the source's closing marker line ends."""
    closing = f"{marker('ARTICLE', source)}\n{source}\n{marker('ARTICLE', source)}\n"
    return prompt.index(closing) + len(closing)


def test_the_key_points_and_every_verification_prompt_about_one_source_share_every_byte_up_to_the_end_of_the_source():
    prompts = [
        prompt_of(extract_key_points_request(ARTICLE)),
        prompt_of(verify_claims_request(ARTICLE, ["Everton won."])),
        prompt_of(verify_claims_request(ARTICLE, ["Weir is a defender.", "Everton lost.", "The crowd was small."])),
    ]
    shared = os.path.commonprefix(prompts)
    assert len(shared) >= source_block_end(prompts[0], ARTICLE)
    assert shared.index(ARTICLE) > 0  # instructions first, then the source


def test_nothing_that_differs_per_pass_or_call_comes_before_the_source():
    for prompt in (prompt_of(extract_key_points_request(ARTICLE)), prompt_of(verify_claims_request(ARTICLE, ["Everton won."]))):
        before = prompt[: source_block_end(prompt, ARTICLE)]
        assert "CLAIMS" not in before and "key points" not in before.lower() and "claim" not in before.lower()


def test_the_source_prompts_templates_open_with_the_same_text_up_to_the_source_block():
    block = "{source_marker}\n{source}\n{source_marker}\n"
    heads = {name: load_prompt(name).template.split(block)[0] + block for name in SOURCE_PROMPTS}
    assert len(set(heads.values())) == 1, heads


def test_every_chunk_of_a_chunked_source_is_the_shared_prefix_of_its_key_points_and_verification_prompts():
    source = "\n".join(f"Paragraph {n}: Everton beat Liverpool and David Weir played in defence." for n in range(12))
    chunks = split_source(source, 64)
    assert len(chunks) > 1
    for chunk in chunks:
        key_points = prompt_of(extract_key_points_request(chunk))
        verification = prompt_of(verify_claims_request(chunk, ["Everton won."]))
        assert len(os.path.commonprefix([key_points, verification])) >= source_block_end(key_points, chunk)


def test_the_scripted_judge_reads_the_reordered_prompts_and_a_chunked_run_judges_every_chunk(scripted_server):
    source = "\n".join(f"Paragraph {n}: Everton beat Liverpool and David Weir played in defence." for n in range(12))
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries([source], ["Everton beat Liverpool. Weir played in defence."], judge=judge_for(server),
                             max_source_tokens=64, resamples=10)
    assert result.rows.loc[0, "error"] == "" and result.rows.loc[0, "claim_count"] == 2
    chunks = split_source(source, 64)
    verified = [marked_sections(r.body["messages"][0]["content"])["ARTICLE"] for r in server.requests if r.purpose == "ClaimVerdicts"]
    listed = [marked_sections(r.body["messages"][0]["content"])["ARTICLE"] for r in server.requests if r.purpose == "ExtractedKeyPoints"]
    assert sorted(verified) == sorted(listed) == sorted(chunks)


def test_the_signature_carries_the_new_source_prompt_versions(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries([ARTICLE], ["Everton beat Liverpool."], judge=judge_for(server), resamples=10)
    assert f"|{load_prompt('verify').tag}|" in f"|{result.signature}|" and load_prompt("verify").version == "v3"
    assert f"|{load_prompt('keypoints').tag}|" in f"|{result.signature}|" and load_prompt("keypoints").version == "v2"


# -- cached prompt tokens: reported, summed, priced -------------------------------------------------------------------

CANDIDATES = ["Everton beat Liverpool on Saturday.", "David Weir defends for Everton.", "A crowd of 40,000 watched."]


def words_through_source(prompt: str) -> int:
    return len(prompt[: source_block_end(prompt, ARTICLE)].split())


def test_the_cached_tokens_an_endpoint_reports_are_the_usages_cached_prompt_tokens(scripted_server):
    server = scripted_server(SummarizationJudgeScript(), prefix_cache_block=16)
    result = judge_summaries([ARTICLE] * 3, CANDIDATES, judge=judge_for(server), resamples=10)
    reported = sum(r.cached_tokens for r in server.requests)
    assert reported > 0
    assert result.usage.cached_prompt_tokens == reported
    assert result.metrics["judge/cached_prompt_tokens"] == reported


def test_every_verification_call_finds_the_source_cached_by_the_key_point_call(scripted_server):
    server = scripted_server(SummarizationJudgeScript(), prefix_cache_block=4)
    judge_summaries([ARTICLE] * 3, CANDIDATES, judge=judge_for(server), resamples=10)
    verifications = [r for r in server.requests if r.purpose == "ClaimVerdicts"]
    assert len(verifications) == 3
    for request in verifications:
        shared = words_through_source(request.body["messages"][0]["content"])
        assert request.cached_tokens >= shared - shared % 4


def test_without_a_prompt_cache_no_cached_tokens_are_counted(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries([ARTICLE] * 3, CANDIDATES, judge=judge_for(server), resamples=10)
    assert result.usage.cached_prompt_tokens == 0 and result.usage.prompt_tokens > 0


def test_cached_prompt_tokens_cost_the_cached_input_price_when_prices_have_one(scripted_server):
    from mlflow_genai_metrics.judge import Prices

    server = scripted_server(SummarizationJudgeScript(), prefix_cache_block=4)
    judge = judge_for(server, prices=Prices(input=1.0, output=2.0, cached_input=0.25))
    usage = judge_summaries([ARTICLE] * 3, CANDIDATES, judge=judge, resamples=10).usage
    assert usage.cached_prompt_tokens > 0
    expected = ((usage.prompt_tokens - usage.cached_prompt_tokens) * 1.0 + usage.cached_prompt_tokens * 0.25
                + usage.completion_tokens * 2.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected)


def test_without_a_cached_input_price_cached_tokens_cost_the_input_price():
    from mlflow_genai_metrics.judge import Prices

    assert Prices.coerce((1.0, 2.0)).cost(1000, 100, 600) == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)
    assert Prices.coerce((1.0, 2.0, 0.5)).cost(1000, 100, 600) == pytest.approx((400 * 1.0 + 600 * 0.5 + 100 * 2.0) / 1e6)


def test_prompt_token_details_of_another_shape_are_ignored_not_a_bad_reply():
    from mlflow_genai_metrics.judge.replies import read_completion

    class Response:
        headers = {"content-type": "application/json"}
        content = (b'{"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}], '
                   b'"usage": {"prompt_tokens": 9, "completion_tokens": 1, "prompt_tokens_details": "n/a"}}')

    result = read_completion(Response(), str)
    assert result.prompt_tokens == 9 and result.cached_prompt_tokens == 0


@pytest.mark.local_model
@pytest.mark.timeout(900)  # a real model on two shared cores, twice
def test_bench_prefix_cache_smoke():
    """The benchmark runs on one article and one candidate (four calls a layout): the real llama.cpp server evaluates
    fewer prompt tokens after the change, since the verification call finds the article the key-point call left in
    its cache."""
    import subprocess
    import sys
    from pathlib import Path

    from conftest import SHARED_DATA

    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_prefix_cache.py"
    done = subprocess.run([sys.executable, str(script), "--articles", "1", "--candidates", "1", "--words", "150"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ratio = next(line for line in done.stdout.splitlines() if line.startswith("prompt tokens evaluated, after / before"))
    assert float(ratio.split(": ")[1].rstrip("x")) < 1.0
