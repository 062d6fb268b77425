"""summarize: candidate outputs through the same client, cache and concurrency."""

from __future__ import annotations

import pytest
from helpers import judge_for

from mlflow_genai_metrics.generate import summarize
from mlflow_genai_metrics.testing import Fault, Reply


def echo_first_sentence(request):
    article = request.last_user_message.split("\n\n", 1)[1]
    return Reply(article.split(".")[0] + ".")


def test_each_article_gets_a_summary_in_order_with_the_studys_prompt(scripted_server):
    server = scripted_server(echo_first_sentence)
    texts = ["Alpha rose. More text.", "Beta fell. More text.", "Gamma held. More text."]
    out = summarize(texts, client=judge_for(server))
    assert list(out["summary"]) == ["Alpha rose.", "Beta fell.", "Gamma held."]
    assert list(out["error"]) == ["", "", ""]
    sent = server.requests[0].body
    assert sent["messages"] == [{"role": "user", "content": "Summarize the article in one paragraph.\n\nAlpha rose. More text."}]
    assert "response_format" not in sent  # free text, not JSON
    assert sent["max_tokens"] == 512


def test_a_rerun_is_served_from_the_cache(scripted_server, tmp_path):
    server = scripted_server(echo_first_sentence)
    texts = ["Alpha rose. More.", "Beta fell. More."]
    summarize(texts, client=judge_for(server, cache_dir=tmp_path))
    again = summarize(texts, client=judge_for(server, cache_dir=tmp_path))
    assert server.request_count == 2 and all(again["cached"])


def test_a_different_prompt_is_not_served_from_the_cache(scripted_server, tmp_path):
    server = scripted_server(echo_first_sentence)
    summarize(["Alpha rose. More."], client=judge_for(server, cache_dir=tmp_path))
    summarize(["Alpha rose. More."], client=judge_for(server, cache_dir=tmp_path), prompt="Summarize in one sentence.")
    assert server.request_count == 2


def test_a_summary_cut_off_by_max_tokens_is_kept_and_flagged(scripted_server):
    server = scripted_server(lambda r: Reply("The council approved the", finish_reason="length"))
    out = summarize(["An article."], client=judge_for(server), max_tokens=5)
    assert out.loc[0, "summary"] == "The council approved the" and out.loc[0, "finish_reason"] == "length"


def test_a_failed_generation_is_an_error_not_a_summary(scripted_server):
    server = scripted_server(lambda r: Fault.server_error(503))
    out = summarize(["An article."], client=judge_for(server, max_retries=1))
    assert out.loc[0, "summary"] is None and out.loc[0, "error"].startswith("server_error")


def test_model_and_base_url_build_the_client(scripted_server):
    server = scripted_server(echo_first_sentence)
    out = summarize(["Delta grew. More."], model="scripted-judge", base_url=server.base_url, cache_dir=None)
    assert out.loc[0, "summary"] == "Delta grew."


def test_bad_rows_are_named():
    with pytest.raises(ValueError, match="row 1: NoneType"):
        summarize(["fine", None], model="m", base_url="http://127.0.0.1:1/v1")
