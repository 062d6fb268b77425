"""The grounding check beside a CPU-bound local endpoint: does it take the model's cores?

    .venv/bin/python benchmarks/bench_local_endpoint.py [--rows 50] [--model smollm2-135m] [--slots 2] [--repeat 1]

A real llama.cpp server (``local.LocalModelServer``, one thread per core: it computes on every core it is given)
judges the same BBC rows (articles and their reference summaries, alignment + richness) twice in turn: on the
default path, whose grounding check runs while the judge's requests are in flight (from 50 rows the cache lacks,
in a worker process of its own at a lower priority: ``summarization.grounded.GroundingInAnotherProcess``), and with
``grounding=False``. Each run has a fresh cache, so every request is asked and every row scored. Reported: rows/s
and the ratio of the default path's to ``grounding=False``'s (what the check costs the judge), the CPU the server
spent per row (its own process, from ``/proc``), ours per row (this process and the check's process, that one's
also apart: none when the check ran on the judge's loop), and the rows the
judge failed on (a small model's unreadable replies; the same requests either way, so the same count).
A first row is judged untimed (the server's first requests are slower); ``--repeat N`` runs the pair N times,
each path going first in turn, and keeps the fastest of each. A small model on this CPU takes tens
of seconds a BBC row, so 50 rows take half an hour or more: ``--worker`` starts the check's process for fewer rows too (the
threshold lowered in this process only), to measure that process beside the server on a sample.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402
from bench_throughput import children_cpu  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402
from mlflow_genai_metrics.local import LocalModelServer  # noqa: E402
from mlflow_genai_metrics.summarization import grounded  # noqa: E402


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has spent, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(server: LocalModelServer, texts: tuple[list[str], list[str]], slots: int, grounding: bool) -> dict[str, float]:
    sources, summaries = texts
    with tempfile.TemporaryDirectory(prefix="mgm-bench-local-") as cache:
        judge = Judge(server.model_id, server.base_url, "local", cache_dir=cache, max_concurrency=slots, timeout_s=600)
        # children_cpu: the reaped children, i.e. the grounding check's process (the server is reaped only after)
        wall, own, worker, served = time.perf_counter(), time.process_time(), children_cpu(), process_cpu(server.pid)
        result = judge_summaries(sources, summaries, judge=judge, coverage=False, grounding=grounding, resamples=200)
        wall, own = time.perf_counter() - wall, time.process_time() - own
        worker, served = children_cpu() - worker, process_cpu(server.pid) - served
    rows = len(sources)
    failed = int((result.rows["error"] != "").sum())  # "" where the judge gave every answer
    return {"rows_per_s": rows / wall, "wall_s": wall, "ours_ms": (own + worker) / rows * 1000, "worker_ms": worker / rows * 1000,
            "server_ms": served / rows * 1000, "failed": failed, "calls": result.metrics["judge/calls"]}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=grounded.ROWS_FOR_A_PROCESS,
                        help=f"BBC rows (default {grounded.ROWS_FOR_A_PROCESS}: the fewest for which the check runs in its own process)")
    parser.add_argument("--model", default="smollm2-135m", help="the local model (local.LocalModelServer's names)")
    parser.add_argument("--slots", type=int, default=2, help="requests in flight (the Judge's max_concurrency)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--worker", action="store_true", help="the check in its own process however few the rows")
    parser.add_argument("--words", type=int, default=None, help="each article cut to its first N words (a quick smoke run)")
    args = parser.parse_args(argv)
    if args.worker:
        grounded.ROWS_FOR_A_PROCESS = 1
    texts = bbc_rows(args.rows, args.words)  # None (said) when the data is absent
    if not texts:
        return []
    rows = len(texts[0])
    runs: dict[bool, list[dict]] = {True: [], False: []}
    with LocalModelServer(args.model, n_ctx=args.n_ctx) as server:
        measure(server, (texts[0][:1], texts[1][:1]), args.slots, False)  # the server's first requests, untimed
        for repeat in range(args.repeat):
            for grounding in (True, False) if repeat % 2 == 0 else (False, True):  # each goes first in turn
                runs[grounding].append(measure(server, texts, args.slots, grounding))
        threads = server.n_threads
    best = {g: max(found, key=lambda r: r["rows_per_s"]) for g, found in runs.items()}
    worker = "in its own process" if best[True]["worker_ms"] > 0 else "on the judge's loop"  # as measured: its CPU or none
    lines = [f"{rows} BBC rows, alignment + richness, {args.model} on a llama.cpp server with {threads} threads on "
             f"{os.cpu_count()} cores, {args.slots} requests in flight; the check {worker}; best of {args.repeat}"
             + (f"; articles cut to {args.words} words" if args.words else ""), "",
             "| path | rows/s | vs grounding=False | wall s | server CPU ms per row | our CPU ms per row | of it, the check's process | calls | rows failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for grounding, name in ((True, "default (grounding on)"), (False, "grounding=False")):
        f = best[grounding]
        lines.append(f"| {name} | {f['rows_per_s']:.2f} | {f['rows_per_s'] / best[False]['rows_per_s']:.3f}x | {f['wall_s']:.1f} | "
                     f"{f['server_ms']:.0f} | {f['ours_ms']:.1f} | {f['worker_ms']:.1f} | {f['calls']:.0f} | {f['failed']} |")
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    main()
