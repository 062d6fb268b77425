"""Throughput and rerun cost against a judge endpoint with fixed latency and a fixed number of slots; the bare
openai client and the peers beside us.

    .venv/bin/python benchmarks/bench_throughput.py [--rows 1000] [--bbc] [--case LATENCY:SLOTS ...] [--repeat N]
        [--grounding on|off|both] [--claims sentences|reworded] [--peers SYSTEM...]

Each case (default ``0.2:32 0.2:128 0.01:256``: an endpoint answering in 200 ms with 32 or 128 slots, and a fast
GPU-like one answering in 10 ms with 256) gets a fresh endpoint (``scripts/serve_judge.py``, a
deterministic judge) in its own process, so the CPU time measured here is ours alone. The bound is what the endpoint
allows: slots / latency / calls per row. Then an identical second evaluation: the calls it makes (0: the cache) and
its wall time against the first. Ours runs the default path, the grounding check included (it runs while the
judge's requests are in flight: from 50 rows the cache lacks, in a worker process of its own, whose CPU time is
counted in ours); ``--grounding both`` adds ``grounding=False`` beside it, ``off`` runs that alone. The endpoint's
claims are the summary's sentences word for word, which the check scores once for the summary and its claims
(``grounding.features.texts_features``); ``--claims reworded`` makes every claim differ from them (each without its
full stop: the same calls and verdicts), so the check scores each claim afresh, as for a judge that rewords.

The bare client: ``openai.AsyncOpenAI().chat.completions.create`` sending the very requests our first run sent
(their bodies, as the endpoint logged them), ``slots`` at a time, against a fresh endpoint of the same case; what a
hand-written loop over the same prompts would cost, with no pipeline, cache, validation or records. Our share of
the bound against its share, and our CPU per row beyond what it spends on the same requests.

Then each peer (``--peers``, default all four; ``--peers`` alone for none) on the same rows, in its own process in the
peers' virtual env, with its own concurrent mode at ``slots`` requests in flight (``peers/run_peer.py --concurrency``),
against the peer-aware scripted endpoint (``peer_answers.py``) at the same latency and slots in another process. Its
calls per row come from that endpoint's log; its rows/s is timed inside the peer's process around the judging
alone (imports and set-up excluded), and reported as a ratio to ours measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402
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


def children_cpu() -> float:
    """CPU seconds of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def endpoint_stats(server: subprocess.Popen) -> dict[str, int]:
    """The endpoint's log so far: requests, ok (status 200), max_in_flight."""
    server.stdin.write("\n")
    return endpoint_stats_reply(server)


SERVE = [sys.executable, str(ROOT / "scripts" / "serve_judge.py")]


def measure(texts: tuple[list[str], list[str]], latency: float, slots: int, coverage: bool, bodies: Path, grounding: bool,
            serve: list[str] = SERVE) -> dict[str, float]:
    """Ours, first run and identical rerun; the first run's request bodies written to ``bodies``. ``grounding``:
    the default path (the model-free check runs while the judge's requests are in flight), or ``grounding=False``."""
    sources, summaries = texts
    rows = len(sources)
    with endpoint(serve, latency, slots) as (base_url, server):
        with tempfile.TemporaryDirectory(prefix="mgm-bench-cache-") as cache:
            figures = {}
            for label in ("first", "rerun"):
                judge = Judge("scripted-judge", base_url, "bench", cache_dir=cache, max_concurrency=slots)
                wall, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
                result = judge_summaries(sources, summaries, judge=judge, coverage=coverage, grounding=grounding, resamples=200)
                figures[f"{label}_wall_s"] = time.perf_counter() - wall
                # ours in all: this process and the grounding check's worker process, when a run starts one (the
                # endpoint is a child too, but it is reaped only after, so its CPU is not counted here)
                figures[f"{label}_cpu_s"] = time.process_time() - cpu + children_cpu() - children
                figures[f"{label}_calls"] = result.metrics["judge/calls"]
                if label == "first":
                    server.stdin.write(f"bodies {bodies}\n")
                    endpoint_stats_reply(server)
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


def measure_bare(bodies: Path, rows: int, latency: float, slots: int) -> dict[str, float]:
    """The bare openai client sending the same request bodies, ``slots`` in flight, against a fresh endpoint."""
    import openai

    requests = [json.loads(line) for line in bodies.read_text(encoding="utf-8").splitlines()]

    async def send_all(base_url: str) -> int:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        slot = asyncio.Semaphore(slots)

        async def send(body: dict) -> bool:
            async with slot:
                completion = await client.chat.completions.create(**body)
                return bool(completion.choices[0].message.content)

        try:
            return sum(await asyncio.gather(*(send(body) for body in requests)))
        finally:
            await client.close()

    with endpoint(SERVE, latency, slots) as (base_url, _):
        wall, cpu = time.perf_counter(), time.process_time()
        answered = asyncio.run(send_all(base_url))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if answered != len(requests):
        raise RuntimeError(f"the bare client got {answered} answers to {len(requests)} requests")
    calls_per_row = len(requests) / rows
    return dict(
        calls_per_row=calls_per_row,
        rows_per_s=rows / wall,
        bound_rows_per_s=slots / latency / calls_per_row,
        cpu_ms_per_row=cpu / rows * 1000,
        cpu_ms_per_request=cpu / len(requests) * 1000,
    )


def endpoint_stats_reply(server: subprocess.Popen) -> dict[str, int]:
    """The stats line the endpoint answers a command line with."""
    server.stdin.flush()
    return json.loads(server.stdout.readline())


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


def peer_lines(peers: list[str], texts: tuple[list[str], list[str]], latency: float, slots: int, ours: dict[bool, float]) -> list[str]:
    if not PEERS_PYTHON.exists():
        return ["", MISSING]
    rows = len(texts[0])
    lines = ["", f"Peers on the same {rows} rows, each in its own concurrent mode with {slots} requests in flight, against the "
             f"peer-aware endpoint at the same latency and slots; rows/s as a ratio to ours in this run:", "",
             "| system | calls per row | rows/s | bound rows/s | share of bound | rows/s vs ours (alignment + richness) | "
             "rows/s vs ours (+ coverage) | its CPU ms per row | most requests in flight | rows failed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="mgm-bench-peers-") as tmp:
        rows_file = write_rows(Path(tmp) / "rows.jsonl", *texts)
        for system in peers:
            f = measure_peer(system, rows_file, rows, latency, slots)
            if "rows_per_s" not in f:
                lines.append(f"| {system} | did not run: {str(f['status'].get('error_sample', ''))[-200:]!r} |")
                continue
            lines.append(f"| {system} | {f['calls_per_row']:.2f} | {f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | "
                         f"{f['rows_per_s'] / f['bound_rows_per_s']:.0%} | {f['rows_per_s'] / ours[False]:.2f}x | "
                         f"{f['rows_per_s'] / ours[True]:.2f}x | {f['cpu_ms_per_row']:.1f} | {f['max_in_flight']} | {f['status']['errors']} |")
    return lines


def case(text: str) -> tuple[float, int]:
    """``LATENCY:SLOTS``, e.g. ``0.2:32``."""
    latency, _, slots = text.partition(":")
    return float(latency), int(slots)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--bbc", action="store_true", help="BBC articles and their reference summaries (../shared/data) instead of short synthetic texts")
    parser.add_argument("--case", type=case, nargs="+", default=[(0.2, 32), (0.2, 128), (0.01, 256)],
                        help="endpoints as LATENCY:SLOTS (seconds per reply, requests served at once)")
    parser.add_argument("--repeat", type=int, default=1, help="measure ours and the bare client this many times, in turn, "
                        "and keep the fastest run of each (a shared machine's noise only ever slows a run down)")
    parser.add_argument("--grounding", choices=("on", "off", "both"), default="on",
                        help="ours with the grounding check (on: the default path), with grounding=False (off), or both side by side")
    parser.add_argument("--claims", choices=("sentences", "reworded"), default="sentences",
                        help="the endpoint's claims: the summary's sentences word for word, or each reworded (no full stop)")
    parser.add_argument("--peers", nargs="*", default=PEERS, help="peers to run beside ours, at the first case (none: --peers alone)")
    args = parser.parse_args(argv)
    texts = (bbc_rows(args.rows) if args.bbc else None) or articles(args.rows)
    rows = len(texts[0])
    serve = SERVE + (["--claims-reworded"] if args.claims == "reworded" else [])
    lines = [f"{rows} rows ({'BBC articles and their reference summaries' if args.bbc else 'short synthetic texts'}); "
             f"claims: {'each summary sentence reworded' if args.claims == 'reworded' else 'the summary sentences'}; "
             "each endpoint case fresh, in its own process",
             "| endpoint | judged | client | calls per row | rows/s | bound rows/s | share of bound | vs bare client | "
             "CPU ms per row | CPU ms per row beyond bare | rerun calls | rerun wall time / first |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)  # each case's lines as it ends: a run cut short keeps what it measured
    variants = {"on": [True], "off": [False], "both": [True, False]}[args.grounding]
    ours = {}
    for latency, slots in args.case:
        where = f"{latency * 1000:.0f} ms, {slots} slots"
        for coverage in (False, True):
            done = len(lines)
            what = "alignment + richness + coverage" if coverage else "alignment + richness"
            runs: dict[bool, list[dict]] = {g: [] for g in variants}
            bares = []
            for _ in range(args.repeat):  # ours (each variant) then the bare client, in turn; the best of each kept
                with tempfile.TemporaryDirectory(prefix="mgm-bench-bodies-") as tmp:
                    for grounding in variants:  # the same requests either way: the bodies of the last are replayed
                        runs[grounding].append(measure(texts, latency, slots, coverage, Path(tmp) / "bodies.jsonl", grounding, serve))
                    bares.append(measure_bare(Path(tmp) / "bodies.jsonl", rows, latency, slots))
            bare = max(bares, key=lambda r: r["rows_per_s"])
            bare_share = bare["rows_per_s"] / bare["bound_rows_per_s"]
            for grounding in variants:
                f = max(runs[grounding], key=lambda r: r["rows_per_s"])
                if grounding == variants[0]:
                    ours.setdefault((latency, slots), {})[coverage] = f["rows_per_s"]
                share = f["rows_per_s"] / f["bound_rows_per_s"]
                lines.append(f"| {where} | {what} | {'ours' if grounding else 'ours, grounding=False'} | {f['calls_per_row']:.2f} | "
                             f"{f['rows_per_s']:.1f} | {f['bound_rows_per_s']:.1f} | {share:.0%} | {share / bare_share:.2f}x | "
                             f"{f['cpu_ms_per_row']:.2f} | {f['cpu_ms_per_row'] - bare['cpu_ms_per_row']:+.2f} | "
                             f"{f['rerun_calls']:.0f} | {f['rerun_wall_ratio']:.3f} |")
            lines.append(f"| {where} | {what} | bare openai client, same requests | {bare['calls_per_row']:.2f} | {bare['rows_per_s']:.1f} | "
                         f"{bare['bound_rows_per_s']:.1f} | {bare_share:.0%} | 1.00x | {bare['cpu_ms_per_row']:.2f} "
                         f"({bare['cpu_ms_per_request']:.2f} per request) | | | |")
            print("\n".join(lines[done:]), flush=True)
    if args.peers:
        latency, slots = args.case[0]
        found = peer_lines(args.peers, texts, latency, slots, ours[(latency, slots)])
        print("\n".join(found), flush=True)
        lines += found
    return lines


if __name__ == "__main__":
    main()
