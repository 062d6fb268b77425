"""Speed of the grounding check on the BBC corpus, on one core, beside ROUGE measured in the same run.

    .venv/bin/python benchmarks/bench_grounding.py               # all 2,225 BBC rows
    .venv/bin/python benchmarks/bench_grounding.py --rows 200
    .venv/bin/python benchmarks/bench_grounding.py --grounding-only   # without the ROUGE lines (a minute less)

Sources are the articles (``text``), summaries the reference summaries (their sentences joined by spaces: the
published field joins them with no space at all). The process is pinned to one core where the OS allows it, and
rows/s is given both by CPU time (this process only, what one core does) and by wall-clock time (which a busy
machine inflates), with the CPU milliseconds per row. Imports, and reading the model file and the word-vector table
(once per process, timed apart), happen before the clock starts; the stem, token and word-vector memos start empty,
as in a fresh process. Every grounding line but the rerun is cold: no grounding cache, each source indexed once. The
first line meets every word of the corpus for the first time (a fresh process); "again" is the same run with the
memos holding the corpus's words (a long-lived process); the claims line adds, per row, each summary sentence as a
claim against the same index (what the judge's run asks per row, as ``grounding.worker`` does it); the worker line is
that work done by a fresh ``grounding.worker`` process fed one line per row, as a large run feeds it: its CPU with
its start-up (imports, model, vectors, empty memos), which is what the check costs a run wherever it runs. ROUGE reads the
same two texts per row: rouge-score's stemmed rouge1/2/L row by row, and the project's ``traditional_metrics``
(ROUGE, BLEU and chrF) in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_throughput import children_cpu  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"


def pin_to_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"pinned to core {core}"
    return "not pinned (no sched_setaffinity here)"


def timed(work) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``work()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def worker_cost(sources: list[str], summaries: list[str], claims: list[list[str]], cache_dir: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a fresh ``grounding.worker`` process scoring each row and its claims, fed one
    line per row (``GroundingInAnotherProcess``'s lines), storing into an empty cache in ``cache_dir``."""
    lines = [{"cache": cache_dir}] + [{"source": source, "summary": summary, "claims": row_claims}
                                      for source, summary, row_claims in zip(sources, summaries, claims)]
    feed = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "mlflow_genai_metrics.grounding.worker"], input=feed, check=True, timeout=3600)
    return children_cpu() - cpu, time.perf_counter() - wall


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="first N BBC rows (default: all 2,225)")
    parser.add_argument("--grounding-only", action="store_true", help="leave out the ROUGE lines")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
        return []
    pinned = pin_to_one_core()
    from rouge_score import rouge_scorer

    from mlflow_genai_metrics import grounding_metrics
    from mlflow_genai_metrics.grounding import cached_groundings, cached_supports, load_model, model_tag
    from mlflow_genai_metrics.grounding.vectors import load_vectors
    from mlflow_genai_metrics.grounding.words import split_sentences, stem
    from mlflow_genai_metrics.reference import traditional_metrics

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()][: args.rows]
    sources = [r["text"] for r in rows]
    summaries = [" ".join(r["reference_summary_sentences"]) for r in rows]
    claims = [split_sentences(summary) for summary in summaries]
    ids = [r["id"] for r in rows]
    stem("import")  # NLTK's import, outside the clock
    load_cpu, _ = timed(lambda: (load_model(), load_vectors()))  # once per process, like the imports
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)

    def with_claims() -> None:
        for source, summary, row_claims in zip(sources, summaries, claims):
            indexes: dict = {}  # the row's source indexed once, for its summary and its claims
            cached_groundings([source], [summary], None, indexes)
            cached_supports(row_claims, [source] * len(row_claims), None, indexes)

    results: dict[str, tuple[float, float]] = {}
    results["grounding_metrics, no cache"] = timed(lambda: grounding_metrics(sources, summaries, ids=ids, cache=False))
    results["grounding_metrics, no cache, again (word memos warm)"] = timed(lambda: grounding_metrics(sources, summaries, ids=ids, cache=False))
    results["summary and its sentences as claims, row by row, no cache (word memos warm)"] = timed(with_claims)
    with tempfile.TemporaryDirectory(prefix="mgm-bench-worker-") as cache_dir:
        results["the same in a fresh grounding.worker process, a line per row (start-up included)"] = worker_cost(sources, summaries, claims, cache_dir)
    with tempfile.TemporaryDirectory(prefix="mgm-bench-grounding-") as cache_dir:
        # A fresh cache: the first run scores and stores every row, the second reads them all back.
        results["grounding_metrics, first run (stores in the cache)"] = timed(lambda: grounding_metrics(sources, summaries, ids=ids, cache_dir=cache_dir))
        rerun = {}
        results["grounding_metrics, rerun (reads the cache)"] = timed(lambda: rerun.setdefault("r", grounding_metrics(sources, summaries, ids=ids, cache_dir=cache_dir)))
    if not args.grounding_only:
        results["rouge-score rouge1/2/L (stemmed), row by row"] = timed(lambda: [scorer.score(s, m) for s, m in zip(sources, summaries)])
        results["traditional_metrics (ROUGE, BLEU, chrF), n_jobs=1"] = timed(lambda: traditional_metrics(summaries, references=sources, n_jobs=1))

    n = len(rows)
    lines = [f"{n} BBC rows ({sum(map(len, claims))} summary sentences); grounding model {model_tag()}; {pinned}; model file and "
             f"word vectors read before the clock in {load_cpu:.2f} s of CPU (once per process); rerun recomputed {rerun['r'].computed_rows} rows", "",
             "| method | CPU s | CPU ms/row | rows/s (CPU, one core) | wall s | rows/s (wall) |", "|---|---|---|---|---|---|"]
    for name, (cpu, wall) in results.items():
        lines.append(f"| {name} | {cpu:.2f} | {cpu / n * 1000:.2f} | {n / cpu:.0f} | {wall:.2f} | {n / wall:.0f} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
