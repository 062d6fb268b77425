"""Every benchmark script runs at a tiny size in CI, so none can rot (the real runs are by hand: docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_DATA

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_traditional_smoke():
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_traditional.py", "--rows", "30", "--ter-rows", "2")
    assert "| traditional_metrics, n_jobs=1 |" in out and "rouge-score + sacreBLEU, row by row" in out


def test_bench_faults_smoke():
    out = run("bench_faults.py", "--rows", "60")
    assert "rows lost: 0" in out and "match: True" in out


def test_bench_throughput_smoke():
    out = run("bench_throughput.py", "--rows", "12", "--latency", "0.01", "--slots", "4")
    assert "| alignment + richness | 2.00 |" in out and "| alignment + richness + coverage | 4.00 |" in out
    assert all(line.split("|")[7].strip() == "0" for line in out.splitlines() if line.startswith("| alignment"))


def test_bench_agreement_smoke():
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    server = subprocess.Popen([sys.executable, "-m", "mlflow_genai_metrics.testing.serve"], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        out = run("bench_agreement.py", "--sample", "4", "--sets", "qags_xsum", "--judge-model", "scripted-judge", "--judge-base-url", base_url)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "| qags_xsum | 4 |" in out and "G-Eval (GPT-4) 0.537" in out


def test_bench_cost_smoke():
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_cost.py", "--articles", "3", "--peers")  # the peers' own run is by hand (their venv)
    assert "| ours: alignment + richness | 2.00 |" in out and "| ours: + coverage | 4.00 |" in out
    assert "| 5 |" in out


def test_peer_answers_fit_each_peers_format():
    sys.path.insert(0, str(BENCHMARKS))
    from peer_answers import PeerAwareScript

    script = PeerAwareScript()
    questions = "... with the 'answers' key ...\nQuestions:\n" + json.dumps(["a?", "b?"]) + "\n\nJSON:"
    assert script.answer(questions) == {"answers": ["yes", "yes"]}
    claims = "The length of 'verdicts' ...\nSummary Claims:\n" + json.dumps(["x", "y", "z"]) + "\n\nJSON:"
    assert len(script.answer(claims)["verdicts"]) == 3
