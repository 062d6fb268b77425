"""Throughput and rerun cost against a judge endpoint with fixed latency and a fixed number of slots.

    .venv/bin/python benchmarks/bench_throughput.py [--rows 1000] [--latency 0.2] [--slots 32]

The endpoint (``mlflow_genai_metrics.testing.serve``, a deterministic judge) runs in its own process, so
the CPU time measured here is ours alone. The bound is what the endpoint allows: slots / latency / calls per row.
Then an identical second evaluation: the calls it makes (0: the cache) and its wall time against the first.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from mlflow_genai_metrics import Judge, judge_summaries


def articles(rows: int) -> tuple[list[str], list[str]]:
    sources = [f"Article {i}. The council approved budget {i} on Monday. The mayor welcomed budget {i}. Critics objected to cuts." for i in range(rows)]
    summaries = [f"The council approved budget {i}. The mayor welcomed it." for i in range(rows)]
    return sources, summaries


def measure(rows: int, latency: float, slots: int, coverage: bool) -> dict[str, float]:
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow_genai_metrics.testing.serve", "--latency", str(latency), "--slots", str(slots)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the scripted endpoint did not start (it printed {base_url!r})")
        sources, summaries = articles(rows)
        with tempfile.TemporaryDirectory(prefix="mgm-bench-cache-") as cache:
            figures = {}
            for label in ("first", "rerun"):
                judge = Judge("scripted-judge", base_url, "bench", cache_dir=cache, max_concurrency=slots)
                wall, cpu = time.perf_counter(), time.process_time()
                result = judge_summaries(sources, summaries, judge=judge, coverage=coverage, resamples=200)
                figures[f"{label}_wall_s"] = time.perf_counter() - wall
                figures[f"{label}_cpu_s"] = time.process_time() - cpu
                figures[f"{label}_calls"] = result.metrics["judge/calls"]
            figures["judge_errors"] = result.metrics["judge_error_rate"]
    finally:
        server.terminate()
        server.wait(timeout=10)
    calls_per_row = figures["first_calls"] / rows
    figures.update(
        rows=rows,
        calls_per_row=calls_per_row,
        rows_per_s=rows / figures["first_wall_s"],
        bound_rows_per_s=slots / latency / calls_per_row,
        cpu_ms_per_row=figures["first_cpu_s"] / rows * 1000,
        rerun_wall_ratio=figures["rerun_wall_s"] / figures["first_wall_s"],
    )
    return figures


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=32)
    args = parser.parse_args(argv)
    lines = [f"{args.rows} rows, endpoint latency {args.latency * 1000:.0f} ms, {args.slots} slots",
             "| judged | calls per row | rows/s | bound rows/s | share of bound | our CPU ms per row | rerun calls | rerun wall time / first |",
             "|---|---|---|---|---|---|---|---|"]
    for coverage in (False, True):
        f = measure(args.rows, args.latency, args.slots, coverage)
        what = "alignment + richness + coverage" if coverage else "alignment + richness"
        lines.append(f"| {what} | {f['calls_per_row']:.2f} | {f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | "
                     f"{f['rows_per_s'] / f['bound_rows_per_s']:.0%} | {f['cpu_ms_per_row']:.1f} | {f['rerun_calls']:.0f} | {f['rerun_wall_ratio']:.3f} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
