"""The judge signature pins what changes the numbers, reads back as it was written, and keeps alike runs comparable."""

from __future__ import annotations

import pytest

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.signature import Signature, parse_signature, signature_differences, summarization_signature, task_of
from mlflow_genai_metrics.summarization.options import JudgingOptions


def _signature(model: str, base_url: str = "https://api.openai.com/v1") -> str:
    key = None if "@" in base_url else "sk-test"  # a URL with credentials takes no key besides
    return summarization_signature(Judge(model, base_url, key, check_model=False, cache_dir=None))


@pytest.mark.parametrize("model", ["org/model|v2", "m:x|y:z", "a%7Cb", "x|seed:7", "mödel|ünï"])
def test_a_model_id_with_a_bar_or_percent_reads_back_as_written(model):
    signature = _signature(model)
    parsed = Signature.parse(signature)
    assert parsed.judge.model == model and parsed.format() == signature
    assert parse_signature(signature)["judge"] == model and parse_signature(signature)["seed"] == "none"


def test_two_judges_whose_model_ids_differ_after_a_bar_are_not_alike():
    # before: "org/model|v2" was read back as "org/model" (and "v2" as a field of its own), so these compared as equal
    assert signature_differences(_signature("org/model|v2"), _signature("org/model|v3")) == [
        "judge: org/model|v2 != org/model|v3"
    ]


def test_a_reply_from_the_model_named_with_a_bar_is_no_model_mismatch():
    from mlflow_genai_metrics.summarization.result import model_mismatch

    signature = _signature("org/model|v2")
    assert not model_mismatch(signature, {"org/model|v2": 3})
    assert model_mismatch(signature, {"org/model|v3": 3})


ARTICLES = [f"Council {i} approved the budget. The mayor {i} welcomed it." for i in range(6)]
SUMMARIES = [f"Council {i} approved the budget." if i % 2 else f"Council {i} rejected the plan." for i in range(6)]


def test_a_run_judged_without_coverage_compares_with_one_judged_with_it_on_the_judges_metrics(scripted_server):
    from helpers import judge_for

    from mlflow_genai_metrics import compare_results, judge_summaries
    from mlflow_genai_metrics.testing import SummarizationJudgeScript

    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server)
    with_coverage = judge_summaries(ARTICLES, SUMMARIES, judge=judge, ids=list(range(6)), progress=False)
    without = judge_summaries(ARTICLES, SUMMARIES, judge=judge, ids=list(range(6)), progress=False, coverage=False)
    # before: refused (SignatureMismatchError "keypoints: v2-... != (absent)") though the same judge, prompts and
    # verdicts produced every judge metric of both
    comparison = compare_results(with_coverage, without)
    table = comparison.table.set_index("metric")
    assert table.loc["strict_alignment", "n"] == 6 and table.loc["strict_alignment", "difference"] == 0.0
    assert "coverage" not in table.index and "coverage" in comparison.families_left_out
    assert [d.split(":")[0] for d in comparison.signature_differences] == ["keypoints", "coverage"]


def test_key_point_prompts_of_other_versions_on_both_sides_are_still_refused():
    from mlflow_genai_metrics.summarization import SignatureMismatchError
    from mlflow_genai_metrics.summarization.comparison import compare_results

    class _Run:
        def __init__(self, signature: str) -> None:
            import pandas as pd

            self.signature, self.rows, self.metrics = signature, pd.DataFrame({"id": [], "source_key": []}), {}

    signature = _signature("m")
    other = signature.replace("|coverage:", "|coverage:v9-0000,")
    with pytest.raises(SignatureMismatchError, match="coverage: v"):
        compare_results(_Run(signature), _Run(other))


@pytest.mark.parametrize(("a", "b"), [
    ("http://gpu-box:8000/v1", "http://gpu-box:8001/v1"),  # two servers on one machine
    ("https://res.openai.azure.com/openai/deployments/small", "https://res.openai.azure.com/openai/deployments/large"),
    ("https://gateway.example.com/openai/v1", "https://gateway.example.com/workers-ai/v1"),
])
def test_two_endpoints_on_one_host_are_not_one_judge(a, b):
    # before: both were "base:<host>", so runs judged by two servers answering to one model id compared as alike
    assert [d.split(":")[0] for d in signature_differences(_signature("m", a), _signature("m", b))] == ["base"]


@pytest.mark.parametrize(("url", "base"), [
    ("https://api.openai.com/v1", "api.openai.com"),
    ("https://api.openai.com/v1/", "api.openai.com"),
    ("https://api.openai.com:443/v1", "api.openai.com"),
    ("http://gpu-box:8000/v1", "gpu-box:8000"),
    ("http://[fd00::5]:8000/v1", "[fd00::5]:8000"),
    ("https://user:secret@gpu-box/serve/v1?api_key=abc", "gpu-box/serve/v1"),
    ("http://127.0.0.1:51234/v1", "localhost"),  # a local server's port changes from run to run
])
def test_the_endpoint_is_signed_by_host_port_and_path(url, base):
    signature = _signature("m", url)
    assert parse_signature(signature)["base"] == base and Signature.parse(signature).format() == signature


@pytest.mark.parametrize("task", ["translations", "legal|briefs:v2"])
def test_a_task_of_the_user_s_is_signed_read_back_and_never_one_of_the_package_s(task):
    judge = Judge("m", "https://api.openai.com/v1", "sk-test", check_model=False, cache_dir=None)
    signed = summarization_signature(judge, task=task)
    parsed = Signature.parse(signed)
    assert parsed.format() == signed and task_of(parsed) == task
    assert task_of(Signature.parse(summarization_signature(judge))) == "summaries"  # no field: the prompts say it


@pytest.mark.parametrize("task", ["summaries", "rewrites", "answers from passages", "", "  ", 7])
def test_a_task_name_that_is_the_package_s_own_or_no_name_is_refused(task):
    with pytest.raises(ValueError, match="task must be None or the name of a task of yours"):
        JudgingOptions(task=task)
