"""Judge cost per row, side by side: ours, DeepEval's SummarizationMetric, MLflow's Summarization scorer, Ragas.

    benchmarks/setup_peers.sh                                   # once: the peers' own virtual environment
    .venv/bin/python benchmarks/bench_cost.py [--articles 50]

Every system judges the same BBC articles, with their reference summaries as the outputs to judge, against one
scripted endpoint (``benchmarks/peer_answers.py``) that answers each system's prompts with well-formed JSON and
logs every request. Calls and tokens per row come from that log. Tokens are the endpoint's count (words), the same
for every system, so the ratios compare like with like. Then the multi-model case: 1, 2 and 5 candidate outputs
per article, where our key points are extracted once per article and reused. Last, the price: ours with coverage at
gpt-4o-mini's prices, asked online and in batch mode (``judge_summaries(..., batch=True)`` through the scripted
endpoint's Batches API), where OpenAI charges half.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_answers import PeerAwareScript  # noqa: E402
from peer_runs import MISSING, PEERS, PEERS_PYTHON, run_peer, write_rows  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.judge.batch import BatchOptions  # noqa: E402
from mlflow_genai_metrics.study import load_articles, stratified_sample  # noqa: E402
from mlflow_genai_metrics.testing import ScriptedJudgeServer  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "bbc_news_summary.jsonl"
PRICES = Prices(input=0.15, output=0.60)  # gpt-4o-mini, USD per million tokens; its Batch API price is half


def usage_since(server: ScriptedJudgeServer, start: int) -> tuple[int, int, int]:
    requests = server.requests[start:]
    return len(requests), sum(r.prompt_tokens for r in requests), sum(r.completion_tokens for r in requests)


def run_ours(server: ScriptedJudgeServer, sources, summaries, *, coverage: bool) -> tuple[int, int, int]:
    start = server.request_count
    judge = Judge("scripted-judge", server.base_url, "bench", cache_dir=None, max_concurrency=8)
    judge_summaries(sources, summaries, judge=judge, coverage=coverage, resamples=100)
    return usage_since(server, start)


def price_per_thousand_rows(server: ScriptedJudgeServer, sources, summaries, *, batch: bool) -> tuple[float, int]:
    """Ours with coverage: USD per 1000 rows at ``PRICES`` (the run's own cost), and the batches it took."""
    batches = server.batch_api.created
    judge = Judge("scripted-judge", server.base_url, "bench", cache_dir=None, max_concurrency=8, prices=PRICES)
    result = judge_summaries(sources, summaries, judge=judge, coverage=True, resamples=100,
                             batch=BatchOptions(poll_s=0.01) if batch else False)
    return result.metrics["judge/cost_usd"] / len(sources) * 1000, server.batch_api.created - batches


def usage_of_peer(server: ScriptedJudgeServer, system: str, rows_file: Path) -> tuple[tuple[int, int, int], dict]:
    start = server.request_count
    status = run_peer(system, rows_file, server.base_url, "scripted-judge")
    return usage_since(server, start), status


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=50)
    parser.add_argument("--peers", nargs="*", default=PEERS)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
        return []
    articles = stratified_sample(load_articles(DATA), args.articles)
    sources, summaries = list(articles["text"]), list(articles["reference"])
    n = len(sources)
    table = []
    with ScriptedJudgeServer(PeerAwareScript(), models=("scripted-judge",)) as server:
        ours = run_ours(server, sources, summaries, coverage=False)
        table.append(("ours: alignment + richness", ours, ""))
        table.append(("ours: + coverage", run_ours(server, sources, summaries, coverage=True), ""))
        if PEERS_PYTHON.exists():
            with tempfile.TemporaryDirectory() as tmp:
                rows_file = write_rows(Path(tmp) / "rows.jsonl", sources, summaries)
                for system in args.peers:
                    usage, status = usage_of_peer(server, system, rows_file)
                    note = f"{status['errors']} of {n} rows failed: {status.get('error_sample', '')[:120]}" if status.get("errors") else ""
                    table.append((system, usage, note))
        else:
            print(MISSING)
        multi = []
        for models in (1, 2, 5):
            variants = [" ".join(s.split(". ")[k % 3:]) or s for k in range(models) for s in summaries]
            multi.append((models, run_ours(server, sources * models, variants, coverage=True)[0] / (n * models)))
        prices = [(mode, *price_per_thousand_rows(server, sources, summaries, batch=mode == "batch")) for mode in ("online", "batch")]
    base_calls, base_prompt = ours[0] / n, ours[1] / n
    lines = [f"{n} BBC articles, their reference summaries judged; tokens are the endpoint's word counts", "",
             "| system | judge calls per row | prompt tokens per row | completion tokens per row | calls vs ours | prompt tokens vs ours | note |",
             "|---|---|---|---|---|---|---|"]
    for name, (calls, prompt, completion), note in table:
        lines.append(f"| {name} | {calls / n:.2f} | {prompt / n:.0f} | {completion / n:.0f} | {calls / n / base_calls:.2f}x | "
                     f"{prompt / n / base_prompt:.2f}x | {note} |")
    lines += ["", "Ours with coverage, several candidate models on the same articles (key points reused per article):", "",
              "| models per article | judge calls per row |", "|---|---|"]
    lines += [f"| {models} | {calls:.2f} |" for models, calls in multi]
    online_usd = prices[0][1]
    lines += ["", f"Ours with coverage at gpt-4o-mini's prices ({PRICES.input_per_million:g} / {PRICES.output_per_million:g} USD per "
              "million prompt / completion tokens), online and through the Batches API (OpenAI's batch price: half):", "",
              "| mode | USD per 1000 rows | vs online | batches |", "|---|---|---|---|"]
    lines += [f"| {mode} | {usd:.4f} | {usd / online_usd:.2f}x | {batches if mode == 'batch' else '-'} |" for mode, usd, batches in prices]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
