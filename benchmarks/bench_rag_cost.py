"""Judge cost per answer from retrieved passages, side by side: ours (``rag.judge_answers``), Ragas' Faithfulness and
MLflow's RetrievalGroundedness.

    benchmarks/setup_peers.sh                                        # once: the peers' own virtual environment
    .venv/bin/python benchmarks/bench_rag_cost.py [--rows 30] [--set qags_xsum]

The rows are a labelled faithfulness set recast as retrieval (``rag.labelled.recast_as_retrieval``, seed 0: each
source split into passages of 3 sentences and shuffled among 3 passages of other sources; the summary is the
answer). Every system judges the same rows against one scripted endpoint (``benchmarks/peer_answers.py``) that
answers each system's prompts with well-formed JSON and logs every request; calls and tokens per row come from
that log. Tokens are the endpoint's count (words), the same for every system, so the ratios compare like with like.

What each gives per row differs, and the table says so: ours a claim-level verdict with the passage and a checked
quote, the answer's relevance, and (with an expected answer) context sufficiency; Ragas a faithfulness score (its
statements against the contexts); MLflow one yes/no per retriever span.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import pandas as pd  # noqa: E402
from peer_answers import PeerAwareScript  # noqa: E402
from peer_runs import PEERS_PYTHON, run_peer  # noqa: E402

from mlflow_genai_metrics import Judge  # noqa: E402
from mlflow_genai_metrics.rag import judge_answers  # noqa: E402
from mlflow_genai_metrics.rag.labelled import recast_as_retrieval  # noqa: E402
from mlflow_genai_metrics.tables import load_labelled  # noqa: E402
from mlflow_genai_metrics.testing import ScriptedJudgeServer  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "faithfulness"
RAG_PEERS = {
    "ragas-faithfulness-rag": "Ragas 0.4 Faithfulness (score in [0, 1])",
    "mlflow-retrieval-groundedness": "MLflow 3.17 RetrievalGroundedness (yes/no)",
}


def usage_since(server: ScriptedJudgeServer, start: int) -> tuple[int, int, int]:
    requests = server.requests[start:]
    return len(requests), sum(r.prompt_tokens for r in requests), sum(r.completion_tokens for r in requests)


def rows_for(name: str, count: int) -> pd.DataFrame:
    labelled = load_labelled(DATA / f"{name}.jsonl")
    return recast_as_retrieval(labelled.head(count), seed=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--set", default="qags_xsum", help="the faithfulness set to recast (default qags_xsum)")
    parser.add_argument("--no-peers", action="store_true", help="ours only")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is not there (the labelled sets are read from ../shared/data)")
        return 0
    rows = rows_for(args.set, args.rows)
    table = []
    with ScriptedJudgeServer(PeerAwareScript(), models=("scripted-judge",)) as server, tempfile.TemporaryDirectory() as scratch:
        start = server.request_count
        judge = Judge("scripted-judge", server.base_url, "bench", cache_dir=None, max_concurrency=8)
        result = judge_answers(rows["question"], rows["passages"], rows["answer"], judge=judge, ids=rows["id"], progress=False)
        calls, prompt, completion = usage_since(server, start)
        errors = int((result.rows["error"] != "").sum())
        table.append(("ours: judge_answers (claims, passage + checked quote, relevance)", calls, prompt, completion, errors, ""))
        faithfulness = [r for r in server.requests[start:] if r.purpose != "Relevance"]  # the relevance call is a judgement of its own
        table.append(("ours, faithfulness alone (claims, then verification with passage + quote)", len(faithfulness),
                      sum(r.prompt_tokens for r in faithfulness), sum(r.completion_tokens for r in faithfulness), errors, ""))
        if args.no_peers or not PEERS_PYTHON.exists():
            print("peers skipped" + ("" if args.no_peers else f": {PEERS_PYTHON} is missing (run benchmarks/setup_peers.sh)"))
        else:
            path = Path(scratch) / "rows.jsonl"
            rows[["id", "question", "passages", "answer"]].to_json(path, orient="records", lines=True)
            for system, label in RAG_PEERS.items():
                start = server.request_count
                status = run_peer(system, path, server.base_url, "scripted-judge", "--concurrency", "4")
                calls, prompt, completion = usage_since(server, start)
                table.append((label, calls, prompt, completion, status.get("errors"), status.get("error_sample", "")[:120]))
    n = len(rows)
    print(f"{n} rows of {args.set} recast as retrieval ({sum(map(len, rows['passages'])) / n:.1f} passages per row), "
          "calls and tokens per row (tokens: the endpoint's word count)")
    print("| system | calls / row | prompt tokens / row | completion tokens / row | rows failed |")
    print("|---|---:|---:|---:|---:|")
    for label, calls, prompt, completion, errors, sample in table:
        print(f"| {label} | {calls / n:.2f} | {prompt / n:,.0f} | {completion / n:,.0f} | {errors} |")
        if sample:
            print(f"  first failure: {sample}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
