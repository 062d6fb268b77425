"""Spark ``local[2]`` against the single-process async path, on one scripted endpoint with fixed latency and slots.

    .venv/bin/python benchmarks/bench_spark.py [--rows 10000] [--latency 0.2] [--slots 64] [--no-coverage]

The endpoint (``scripts/serve_judge.py``) runs in its own process. Both paths get the same total
concurrency (the endpoint's slots; Spark splits it over its two workers) and a fresh cache each. Timed: from the
call to the aggregates in hand (for Spark, the judging job and the aggregation job; the session is started first
and not timed). The bound is what the endpoint allows: slots / latency / calls per row. Also recorded: how busy
the machine's cores were (all processes, /proc/stat) and the CPU seconds the endpoint process used, to tell an
endpoint-bound run from a CPU-bound one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import pandas as pd
from bench_throughput import SERVE, endpoint  # the scripted endpoint in its own process

from mlflow_genai_metrics import Judge, judge_summaries


def corpus(rows: int) -> pd.DataFrame:
    """Distinct articles, one summary each (key points cannot be shared: the most calls per row)."""
    return pd.DataFrame({
        "id": range(rows),
        "source": [f"Article {i}. The council of town {i} approved budget {i} on Monday. The mayor welcomed budget {i}. "
                   f"Critics objected to cuts in town {i}." for i in range(rows)],
        "summary": [f"The council of town {i} approved budget {i}. The mayor welcomed it." for i in range(rows)],
    })


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot (Linux /proc/stat); (0, 0) elsewhere."""
    try:
        fields = [float(v) for v in open("/proc/stat").readline().split()[1:]]
    except OSError:
        return (0.0, 0.0)
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle, sum(fields))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (Linux /proc); NaN elsewhere."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (float(fields[11]) + float(fields[12])) / os.sysconf("SC_CLK_TCK")


def spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]").appName("mgm-bench").config("spark.ui.enabled", "false").getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def measure(rows: int, latency: float, slots: int, coverage: bool) -> dict[str, dict[str, float]]:
    from mlflow_genai_metrics.spark import judge_summaries_spark

    data = corpus(rows)
    spark = spark_session()
    frame = spark.createDataFrame(data).cache()
    frame.count()  # the input is in memory before the clock starts
    figures: dict[str, dict[str, float]] = {}
    with endpoint(SERVE, latency, slots) as (base_url, server):
        for path in ("single process (async)", "Spark local[2]"):
            with tempfile.TemporaryDirectory(prefix="mgm-bench-cache-") as cache:
                judge = Judge("scripted-judge", base_url, cache_dir=cache, max_concurrency=slots, progress=False)
                started, cpu_before, endpoint_before = time.perf_counter(), machine_cpu(), process_cpu_s(server.pid)
                if path.startswith("Spark"):
                    result = judge_summaries_spark(frame, judge=judge, coverage=coverage)
                    metrics = result.metrics
                    result.unpersist()
                else:
                    metrics = judge_summaries(data["source"], data["summary"], judge=judge, ids=data["id"], coverage=coverage).metrics
                wall = time.perf_counter() - started
                busy, total = (after - before for after, before in zip(machine_cpu(), cpu_before))
            calls_per_row = metrics["judge/calls"] / rows
            figures[path] = {
                "wall_s": wall,
                "rows_per_s": rows / wall,
                "calls_per_row": calls_per_row,
                "bound_rows_per_s": slots / latency / calls_per_row if latency else float("inf"),
                "errors": metrics["judge_error_rate"],
                "alignment": metrics["alignment"],
                "machine_busy": busy / total if total else float("nan"),
                "endpoint_cpu_s": process_cpu_s(server.pid) - endpoint_before,
            }
    frame.unpersist()
    return figures


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--no-coverage", dest="coverage", action="store_false")
    args = parser.parse_args(argv)
    figures = measure(args.rows, args.latency, args.slots, args.coverage)
    single = figures["single process (async)"]["rows_per_s"]
    lines = [
        f"{args.rows} rows, endpoint latency {args.latency * 1000:.0f} ms, {args.slots} slots, "
        f"{'alignment + richness + coverage' if args.coverage else 'alignment + richness'}",
        "| path | calls per row | wall s | rows/s | bound rows/s | share of bound | rows/s vs single process | judge errors | alignment | machine CPU busy | endpoint CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path, f in figures.items():
        lines.append(
            f"| {path} | {f['calls_per_row']:.2f} | {f['wall_s']:.1f} | {f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | "
            f"{f['rows_per_s'] / f['bound_rows_per_s']:.0%} | {f['rows_per_s'] / single:.2f}x | {f['errors']:.3f} | {f['alignment']:.3f} | "
            f"{f['machine_busy']:.0%} | {f['endpoint_cpu_s']:.1f} |"
        )
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
