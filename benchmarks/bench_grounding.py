"""Speed of the grounding check on the BBC corpus, on one core, beside ROUGE measured in the same run.

    .venv/bin/python benchmarks/bench_grounding.py               # all 2,225 BBC rows
    .venv/bin/python benchmarks/bench_grounding.py --rows 200

Sources are the articles (``text``), summaries the reference summaries (their sentences joined by spaces: the
published field joins them with no space at all). The process is pinned to one core where the OS allows it, and
rows/s is given both by CPU time (this process only, what one core does) and by wall-clock time (which a busy
machine inflates). Imports happen before the clock starts; the stem and token memos start empty, as in a fresh
process. ROUGE reads the same two texts per row: rouge-score's stemmed rouge1/2/L row by row, and the project's
``traditional_metrics`` (ROUGE, BLEU and chrF) in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

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


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="first N BBC rows (default: all 2,225)")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
        return []
    pinned = pin_to_one_core()
    from rouge_score import rouge_scorer

    from mlflow_genai_metrics import grounding_metrics
    from mlflow_genai_metrics.grounding import model_tag
    from mlflow_genai_metrics.grounding.words import stem
    from mlflow_genai_metrics.reference import traditional_metrics

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()][: args.rows]
    sources = [r["text"] for r in rows]
    summaries = [" ".join(r["reference_summary_sentences"]) for r in rows]
    ids = [r["id"] for r in rows]
    stem("import")  # NLTK's import, outside the clock
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)

    results: dict[str, tuple[float, float]] = {}
    results["grounding_metrics, no cache"] = timed(lambda: grounding_metrics(sources, summaries, ids=ids, cache=False))
    with tempfile.TemporaryDirectory(prefix="mgm-bench-grounding-") as cache_dir:
        # A fresh cache: the first run scores and stores every row, the second reads them all back.
        results["grounding_metrics, first run (stores in the cache)"] = timed(lambda: grounding_metrics(sources, summaries, ids=ids, cache_dir=cache_dir))
        rerun = {}
        results["grounding_metrics, rerun (reads the cache)"] = timed(lambda: rerun.setdefault("r", grounding_metrics(sources, summaries, ids=ids, cache_dir=cache_dir)))
    results["rouge-score rouge1/2/L (stemmed), row by row"] = timed(lambda: [scorer.score(s, m) for s, m in zip(sources, summaries)])
    results["traditional_metrics (ROUGE, BLEU, chrF), n_jobs=1"] = timed(lambda: traditional_metrics(summaries, references=sources, n_jobs=1))

    n = len(rows)
    lines = [f"{n} BBC rows; grounding model {model_tag()}; {pinned}; rerun recomputed {rerun['r'].computed_rows} rows", "",
             "| method | CPU s | rows/s (CPU, one core) | wall s | rows/s (wall) |", "|---|---|---|---|---|"]
    for name, (cpu, wall) in results.items():
        lines.append(f"| {name} | {cpu:.2f} | {n / cpu:.0f} | {wall:.2f} | {n / wall:.0f} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
