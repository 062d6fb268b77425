"""What an identical rerun costs against the first run, on the path users run: ``judge_summaries`` with its
defaults (coverage, the grounding check, default resamples), against the scripted endpoint in its own process.

    .venv/bin/python benchmarks/bench_rerun.py [--rows 1000] [--bbc] [--case LATENCY:SLOTS ...] [--repeat N] [--reruns K]

Each repetition takes a fresh endpoint and a fresh cache: a first run, then ``--reruns`` identical reruns on the same
cache (a new ``Judge`` each). Reported per case: the first run's wall time, the rerun's, and the rerun's as a share of
the first run of its own repetition, best and median (a shared machine's noise only ever slows a run down), the
rerun's CPU time (all threads of this process; the endpoint runs in another), and the calls the reruns made (0: every
answer from the cache).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402
from bench_throughput import SERVE, articles, case, endpoint  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402


def repetition(texts: tuple[list[str], list[str]], latency: float, slots: int, reruns: int) -> tuple[list[float], list[float], int]:
    """One fresh endpoint and cache: the wall time of the first run and of each rerun, each rerun's CPU time, and the
    calls the reruns made."""
    sources, summaries = texts
    walls, cpus, calls = [], [], 0
    with endpoint(SERVE, latency, slots) as (base_url, _), tempfile.TemporaryDirectory(prefix="mgm-bench-rerun-") as cache:
        for run in range(1 + reruns):
            judge = Judge("scripted-judge", base_url, "bench", cache_dir=cache, max_concurrency=slots)
            wall, cpu = time.perf_counter(), time.process_time()
            result = judge_summaries(sources, summaries, judge=judge)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            calls += result.metrics["judge/calls"] if run else 0
    return walls, cpus[1:], int(calls)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--bbc", action="store_true", help="BBC articles and their reference summaries (../shared/data)")
    parser.add_argument("--case", type=case, nargs="+", default=[(0.2, 32), (0.2, 128)], help="endpoints as LATENCY:SLOTS")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions, each with a fresh endpoint and cache")
    parser.add_argument("--reruns", type=int, default=3, help="identical reruns per repetition")
    args = parser.parse_args(argv)
    texts = (bbc_rows(args.rows) if args.bbc else None) or articles(args.rows)
    lines = [f"{len(texts[0])} rows ({'BBC articles and their reference summaries' if args.bbc else 'short synthetic texts'}); "
             f"{args.repeat} repetitions of a first run and {args.reruns} reruns",
             "| endpoint | first run s (best, median) | rerun s (best, median) | rerun CPU s (best, median) | "
             "rerun / first (best, median, worst) | rerun calls |",
             "|---|---|---|---|---|---|"]
    for latency, slots in args.case:
        firsts, reruns, cpus, ratios, calls = [], [], [], [], 0
        for _ in range(args.repeat):
            (first, *again), cpu, asked = repetition(texts, latency, slots, args.reruns)
            firsts.append(first)
            reruns += again
            cpus += cpu
            ratios += [wall / first for wall in again]
            calls += asked
        lines.append(f"| {latency * 1000:.0f} ms, {slots} slots | {min(firsts):.2f}, {statistics.median(firsts):.2f} | "
                     f"{min(reruns):.3f}, {statistics.median(reruns):.3f} | {min(cpus):.3f}, {statistics.median(cpus):.3f} | "
                     f"{min(ratios):.2%}, {statistics.median(ratios):.2%}, {max(ratios):.2%} | {calls} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
