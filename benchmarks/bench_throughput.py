"""Throughput and rerun cost against a judge endpoint with fixed latency and a fixed number of slots; the peers beside us.

    .venv/bin/python benchmarks/bench_throughput.py [--rows 1000] [--latency 0.2] [--slots 32] [--peers SYSTEM...]

The endpoint (``mlflow_genai_metrics.testing.serve``, a deterministic judge) runs in its own process, so
the CPU time measured here is ours alone. The bound is what the endpoint allows: slots / latency / calls per row.
Then an identical second evaluation: the calls it makes (0: the cache) and its wall time against the first.

Then each peer (``--peers``, default all four; ``--peers`` alone for none) on the same rows, in its own process in the
peers' virtual env, with its own concurrent mode at ``slots`` requests in flight (``peers/run_peer.py --concurrency``),
against the peer-aware scripted endpoint (``peer_answers.py``) at the same latency and slots in another process. Its
calls per row come from that endpoint's log; its rows/s is timed inside the peer's process around the judging
alone (imports and set-up excluded), and reported as a ratio to ours measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_runs import MISSING, PEERS, PEERS_PYTHON, ROOT, run_peer, write_rows  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402


def articles(rows: int) -> tuple[list[str], list[str]]:
    sources = [f"Article {i}. The council approved budget {i} on Monday. The mayor welcomed budget {i}. Critics objected to cuts." for i in range(rows)]
    summaries = [f"The council approved budget {i}. The mayor welcomed it." for i in range(rows)]
    return sources, summaries


@contextlib.contextmanager
def endpoint(command: list[str], latency: float, slots: int) -> Iterator[tuple[str, subprocess.Popen]]:
    """A scripted endpoint in its own process (``--stats-on-stdin``): its base URL and the process."""
    server = subprocess.Popen([*command, "--latency", str(latency), "--slots", str(slots), "--stats-on-stdin"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the scripted endpoint did not start (it printed {base_url!r})")
        yield base_url, server
    finally:
        server.stdin.close()  # end of input stops it
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.terminate()
            server.wait(timeout=10)


def endpoint_stats(server: subprocess.Popen) -> dict[str, int]:
    """The endpoint's log so far: requests, ok (status 200), max_in_flight."""
    server.stdin.write("\n")
    server.stdin.flush()
    return json.loads(server.stdout.readline())


def measure(rows: int, latency: float, slots: int, coverage: bool) -> dict[str, float]:
    with endpoint([sys.executable, "-m", "mlflow_genai_metrics.testing.serve"], latency, slots) as (base_url, _):
        sources, summaries = articles(rows)
        with tempfile.TemporaryDirectory(prefix="mgm-bench-cache-") as cache:
            figures = {}
            for label in ("first", "rerun"):
                judge = Judge("scripted-judge", base_url, "bench", cache_dir=cache, max_concurrency=slots)
                wall, cpu = time.perf_counter(), time.process_time()
                # The judge path alone: the model-free grounding check has its own speed benchmark (bench_grounding.py)
                result = judge_summaries(sources, summaries, judge=judge, coverage=coverage, grounding=False, resamples=200)
                figures[f"{label}_wall_s"] = time.perf_counter() - wall
                figures[f"{label}_cpu_s"] = time.process_time() - cpu
                figures[f"{label}_calls"] = result.metrics["judge/calls"]
            figures["judge_errors"] = result.metrics["judge_error_rate"]
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


def measure_peer(system: str, rows_file: Path, rows: int, latency: float, slots: int) -> dict:
    """One peer over the rows with ``slots`` requests in flight, against a fresh peer-aware endpoint."""
    with endpoint([sys.executable, str(ROOT / "benchmarks" / "peer_answers.py")], latency, slots) as (base_url, server):
        status = run_peer(system, rows_file, base_url, "scripted-judge", "--concurrency", str(slots))
        log = endpoint_stats(server)
    if "wall_s" not in status:
        return {"status": status}
    calls_per_row = log["requests"] / rows
    return dict(
        status=status,
        calls_per_row=calls_per_row,
        rows_per_s=rows / status["wall_s"],
        bound_rows_per_s=slots / latency / calls_per_row if calls_per_row else float("nan"),
        cpu_ms_per_row=status["cpu_s"] / rows * 1000,
        max_in_flight=log["max_in_flight"],
    )


def peer_lines(peers: list[str], rows: int, latency: float, slots: int, ours: dict[str, float]) -> list[str]:
    if not PEERS_PYTHON.exists():
        return ["", MISSING]
    lines = ["", f"Peers on the same {rows} rows, each in its own concurrent mode with {slots} requests in flight, against the "
             f"peer-aware endpoint at the same latency and slots; rows/s as a ratio to ours in this run:", "",
             "| system | calls per row | rows/s | bound rows/s | share of bound | rows/s vs ours (alignment + richness) | "
             "rows/s vs ours (+ coverage) | its CPU ms per row | most requests in flight | rows failed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="mgm-bench-peers-") as tmp:
        rows_file = write_rows(Path(tmp) / "rows.jsonl", *articles(rows))
        for system in peers:
            f = measure_peer(system, rows_file, rows, latency, slots)
            if "rows_per_s" not in f:
                lines.append(f"| {system} | did not run: {str(f['status'].get('error_sample', ''))[-200:]!r} |")
                continue
            lines.append(f"| {system} | {f['calls_per_row']:.2f} | {f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | "
                         f"{f['rows_per_s'] / f['bound_rows_per_s']:.0%} | {f['rows_per_s'] / ours[False]:.2f}x | "
                         f"{f['rows_per_s'] / ours[True]:.2f}x | {f['cpu_ms_per_row']:.1f} | {f['max_in_flight']} | {f['status']['errors']} |")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--peers", nargs="*", default=PEERS, help="peers to run beside ours (none: --peers alone)")
    args = parser.parse_args(argv)
    lines = [f"{args.rows} rows, endpoint latency {args.latency * 1000:.0f} ms, {args.slots} slots",
             "| judged | calls per row | rows/s | bound rows/s | share of bound | our CPU ms per row | rerun calls | rerun wall time / first |",
             "|---|---|---|---|---|---|---|---|"]
    ours = {}
    for coverage in (False, True):
        f = measure(args.rows, args.latency, args.slots, coverage)
        ours[coverage] = f["rows_per_s"]
        what = "alignment + richness + coverage" if coverage else "alignment + richness"
        lines.append(f"| {what} | {f['calls_per_row']:.2f} | {f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | "
                     f"{f['rows_per_s'] / f['bound_rows_per_s']:.0%} | {f['cpu_ms_per_row']:.1f} | {f['rerun_calls']:.0f} | {f['rerun_wall_ratio']:.3f} |")
    if args.peers:
        lines += peer_lines(args.peers, args.rows, args.latency, args.slots, ours)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
