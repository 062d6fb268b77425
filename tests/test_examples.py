"""Every file in examples/ runs as its docstring says, from the project root with the project's interpreter: the
commands are read from the docstring, a hosted judge or candidate is played by the scripted server (through the
same environment variables a user sets for the real one), and the local model runs for real where it is quick
(reproduce_study's local path, two llama.cpp servers generating, takes minutes: `mgm demo`'s test covers it)."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from conftest import SECRET_KEY, SHARED_DATA, WarmPython
from run_traces import cards_per_row

from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TESTED = {"judge_quickstart.py", "reproduce_study.py"}  # each has tests below


def documented_commands(example: str) -> list[list[str]]:
    """The commands the example's docstring gives, as words (``\\`` continuations joined, comments dropped)."""
    doc = ast.get_docstring(ast.parse((EXAMPLES / example).read_text())) or ""
    text = doc.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in text.splitlines() if f"examples/{example}" in line]


def run_documented(words: list[str], warm: WarmPython, *, environment: dict[str, str], extra: tuple[str, ...] = (), timeout: int = 300):
    """``words`` as a shell would run them from the project root: ``VAR=value`` assignments first (overridden by
    ``environment``), then ``.venv/bin/python`` (this interpreter, run in the suite's warm one: ``warm``) and the
    example."""
    assignments = {}
    while "=" in words[0] and not words[0].startswith("."):
        name, value = words.pop(0).split("=", 1)
        assignments[name] = value
    assert words[0] == ".venv/bin/python", f"documented with {words[0]!r}, not the project's interpreter"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "MGM_JUDGE", "OPENAI_"))}
    command = [warm.python, *words[1:], *extra]
    return subprocess.run(command, cwd=ROOT, env={**base, **warm.env, **assignments, **environment}, capture_output=True, text=True,
                          timeout=timeout)


def test_every_example_is_run_by_a_test_and_documents_its_commands():
    assert {path.name for path in EXAMPLES.glob("*.py")} == TESTED
    for example in TESTED:
        assert documented_commands(example), example


@contextlib.contextmanager
def tracking(store: Path) -> Iterator[str]:
    """The example's SQLite store as this process's tracking store, for the block."""
    uri = f"sqlite:///{store / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    try:
        yield uri
    finally:
        mlflow.set_tracking_uri("")


def usage_of(out: str) -> tuple[int, int, int]:
    """(requests, HTTP calls, cache hits) from the example's usage line."""
    found = re.search(r"^usage: (\d+) requests, (\d+) HTTP calls, (\d+) cache hits", out, re.MULTILINE)
    assert found, out
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


JUDGE_CARDS = ["claim_alignment", "grounding", "key_point_coverage"]


def test_judge_quickstart_with_a_hosted_judge_runs_as_documented(scripted_server, tmp_path, warm_python):
    server = scripted_server(SummarizationJudgeScript(), models=("gpt-4o-mini",))
    hosted = [words for words in documented_commands("judge_quickstart.py") if words[0].startswith("MGM_JUDGE_MODEL=")]
    assert hosted, "judge_quickstart.py documents no hosted-judge command"
    done = run_documented(hosted[0], warm_python, environment={"MGM_JUDGE_BASE_URL": server.base_url, "OPENAI_API_KEY": SECRET_KEY,
                                                  "MGM_CACHE_DIR": str(tmp_path)}, extra=("--store", str(tmp_path / "store")))
    assert done.returncode == 0, done.stderr
    assert "judge: gpt-4o-mini at " in done.stdout
    requests, calls, hits = usage_of(done.stdout)
    assert calls > 0 and hits == calls and requests == calls + hits  # the second evaluation came from the cache
    assert f"open the runs: mlflow ui --backend-store-uri sqlite:///{tmp_path / 'store' / 'mlflow.db'}" in done.stdout
    run_ids = re.findall(r"^(?:first|second) evaluation: [0-9.]+s, run ([0-9a-f]{32}):", done.stdout, re.MULTILINE)
    assert len(run_ids) == 2
    with tracking(tmp_path / "store"):  # each run: one trace per summary, a card per judge on it
        for run_id in run_ids:
            assert cards_per_row(run_id) == {"faithful": JUDGE_CARDS, "wrong-place": JUDGE_CARDS}
    assert len(re.findall(r"^    claim_alignment +(yes|no) ", done.stdout, re.MULTILINE)) == 4  # the cards as printed


@pytest.mark.local_model
def test_judge_quickstart_with_the_local_model_runs_as_documented(tmp_path, warm_python):
    local = [words for words in documented_commands("judge_quickstart.py") if words[0] == ".venv/bin/python"]
    done = run_documented(local[0], warm_python, environment={"MGM_CACHE_DIR": str(tmp_path)}, extra=("--store", str(tmp_path / "store")), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "judge: local smollm2-135m at http://127.0.0.1:" in done.stdout
    requests, calls, hits = usage_of(done.stdout)
    assert calls > 0 and hits > 0 and requests >= calls
    with tracking(tmp_path / "store"):
        runs = mlflow.search_runs(experiment_names=["judge-quickstart"], output_format="list")
        assert len(runs) == 2 and all(set(cards_per_row(r.info.run_id)) == {"faithful", "wrong-place"} for r in runs)


class HostedModels:
    """The scripted server as an OpenAI-like endpoint: candidates answer with the article's first sentence, the
    judge is the deterministic summarization judge."""

    models = ("gpt-4o-mini", "gpt-4.1-nano", "gpt-4o")

    def __init__(self) -> None:
        self.judge = SummarizationJudgeScript()

    def __call__(self, request):
        if request.body.get("model") == "gpt-4o":
            return self.judge(request)
        article = request.last_user_message.split("\n\n", 1)[1]
        return Reply(article.split(". ")[0].strip().rstrip(".") + ".")


BBC = SHARED_DATA / "bbc_news_summary.jsonl"
needs_bbc = pytest.mark.skipif(not BBC.exists(), reason=f"the BBC sample is not at {BBC} (../shared/data beside the project)")


@needs_bbc
def test_reproduce_study_with_hosted_models_runs_as_documented_on_a_small_sample(scripted_server, tmp_path, warm_python):
    server = scripted_server(HostedModels(), models=HostedModels.models)
    hosted = [words for words in documented_commands("reproduce_study.py") if "--judge-model" in words]
    assert hosted, "reproduce_study.py documents no hosted-model command"
    environment = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": SECRET_KEY, "MGM_CACHE_DIR": str(tmp_path / "cache")}
    # a small sample, and the store in a temp folder (the later option wins)
    done = run_documented(hosted[0], warm_python, environment=environment, extra=("--sample", "5", "--store", str(tmp_path / "study")))
    assert done.returncode == 0, done.stderr
    assert "5 BBC articles, judge `gpt-4o` at " in done.stdout
    assert "gpt-4o-mini" in done.stdout and "gpt-4.1-nano" in done.stdout
    with tracking(tmp_path / "study"):  # every candidate's run: one trace per article, a card per judge on it
        runs = {r.info.run_name: r.info.run_id for r in mlflow.search_runs(experiment_names=["bbc-study"], output_format="list")}
        for name in ("gpt-4o-mini", "gpt-4.1-nano"):
            cards = cards_per_row(runs[name])
            assert len(cards) == 5 and all(found == JUDGE_CARDS for found in cards.values()), (name, cards)
