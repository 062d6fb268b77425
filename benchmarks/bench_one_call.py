"""Our claim pipeline against the one-call claim judge MLflow's ``make_judge`` builds (``tracking.make_claim_judge``),
on the same rows and the same scripted endpoint: what each costs and what each does when things go wrong.

    .venv/bin/python benchmarks/bench_one_call.py [--rows 40] [--bbc] [--latency 0.05] [--local]

Four cases, each on a fresh endpoint (and a fresh cache for ours):

- **first run, then an identical rerun**: calls and prompt tokens per row (the scripted server's count, whitespace
  words), wall time at ``--concurrency`` requests in flight, and the rerun's calls;
- **replies that are not JSON**: the endpoint answers ``not json`` to the first attempt of one row in four;
- **sources longer than the context window**: each source gets 360 words more, and the endpoint refuses (HTTP 400,
  as OpenAI and vLLM do) any prompt over ``--context`` words; our judge is told the window (``context_window=``) and
  splits the source;
- **``--local``**: the real SmolLM2 on llama-cpp-python's server, one row (slow).

Ours is ``judge_summaries(..., coverage=False, grounding=False)``, the claim half only, as the one-call judge has no
coverage. The one-call judge runs as ``mlflow.genai.evaluate`` would call it, ``--concurrency`` rows at once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402
from bench_throughput import articles  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402
from mlflow_genai_metrics.testing import Fault, Reply, ScriptedJudgeServer, SummarizationJudgeScript  # noqa: E402
from mlflow_genai_metrics.testing.script import count_tokens  # noqa: E402
from mlflow_genai_metrics.tracking import make_claim_judge  # noqa: E402

_ROW = re.compile(r"Article (\d+)\.")
FILLER = " ".join(f"Residents of district {i} attended the meeting." for i in range(60))


def one_call_run(judge: Judge, sources: list[str], summaries: list[str], concurrency: int) -> tuple[int, int, float]:
    """Rows with a verdict, rows with an error, wall seconds."""
    one_call = make_claim_judge(judge)

    def ask(row: tuple[str, str]) -> bool:
        try:  # mlflow.genai.evaluate records what it raises as the row's error feedback
            return one_call(inputs={"text": row[0]}, outputs=row[1]).error is None
        except Exception:
            return False

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        ok = list(pool.map(ask, zip(sources, summaries)))
    return sum(ok), len(ok) - sum(ok), time.perf_counter() - start


def ours_run(judge: Judge, sources: list[str], summaries: list[str]) -> tuple[int, int, float]:
    start = time.perf_counter()
    result = judge_summaries(sources, summaries, judge=judge, coverage=False, grounding=False, progress=False)
    wall = time.perf_counter() - start
    errors = int((result.rows["error"] != "").sum())
    return len(sources) - errors, errors, wall


class Faulty:
    """The scripted judge, answering ``not json`` to the first attempt of every fourth row's requests (the row is
    recognised by ``Article <i>.`` in its prompt, so both judges meet the same rows), and refusing prompts over
    ``context`` words as a real endpoint does."""

    def __init__(self, *, broken_share: int = 0, context: int | None = None) -> None:
        self.script = SummarizationJudgeScript()
        self.broken_share, self.context = broken_share, context

    def __call__(self, request):
        if self.context is not None and count_tokens(request.prompt_text) > self.context:
            return Fault.http(400, f"This model's maximum context length is {self.context} tokens; the prompt is longer")
        if self.broken_share and request.attempt == 0 and not request.is_repair:
            row = _ROW.search(request.prompt_text)
            if row is not None and int(row[1]) % self.broken_share == 0:
                return Reply("not json")
        return self.script(request)


def case(name: str, sources: list[str], summaries: list[str], args, **faults) -> None:
    for label in ("ours", "one call"):
        with ScriptedJudgeServer(Faulty(**faults), latency_s=args.latency, slots=args.concurrency) as server, \
                tempfile.TemporaryDirectory(prefix="mgm-bench-one-call-") as cache:
            options = {"context_window": faults["context"]} if faults.get("context") and label == "ours" else {}
            judge = Judge("scripted-judge", server.base_url, "local", cache_dir=cache, max_concurrency=args.concurrency, **options)
            run = ours_run if label == "ours" else lambda j, s, m: one_call_run(j, s, m, args.concurrency)
            judged, errors, wall = run(judge, sources, summaries)
            calls, tokens = server.request_count, sum(r.prompt_tokens for r in server.requests)
            rerun = ""
            if not faults:
                run(Judge("scripted-judge", server.base_url, "local", cache_dir=cache, max_concurrency=args.concurrency), sources, summaries)
                rerun = f"{(server.request_count - calls) / len(sources):.1f}"
            print(f"| {name} | {label} | {judged} | {errors} | {calls / len(sources):.2f} | {tokens / len(sources):.0f} | {wall:.2f} | {rerun} |")


def local_case(rows: int) -> None:
    from mlflow_genai_metrics.local import LocalModelServer

    sources, summaries = articles(rows)
    with LocalModelServer("smollm2-135m", n_ctx=4096) as llama, tempfile.TemporaryDirectory(prefix="mgm-bench-one-call-") as cache:
        for label in ("ours", "one call"):
            # sampled, with the seed the stability test found to give claims (at temperature 0 SmolLM2 lists none)
            judge = llama.judge(cache_dir=cache, temperature=0.8, seed=6)
            judged, errors, wall = ours_run(judge, sources, summaries) if label == "ours" else one_call_run(judge, sources, summaries, 1)
            print(f"| SmolLM2 on llama-cpp-python | {label} | {judged} | {errors} | | | {wall:.2f} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--bbc", action="store_true", help="BBC articles and their reference summaries (../shared/data)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the endpoint adds to every reply")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--context", type=int, default=500, help="the endpoint's context window, in words, for the long-source case")
    parser.add_argument("--local", action="store_true", help="also the real SmolLM2 (1 row: slow)")
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = "local"  # MLflow's judges send it: the key the judges below are given (loopback only)
    os.environ.setdefault("MLFLOW_MODEL_CATALOG_URI", "")  # no download of MLflow's model catalogue (offline: ~7 s of retries)
    texts = bbc_rows(args.rows) if args.bbc else articles(args.rows)
    if texts is None:
        return
    sources, summaries = texts
    with ScriptedJudgeServer(Faulty()) as server:  # MLflow's first judge call imports and sets up: not timed below
        one_call_run(Judge("scripted-judge", server.base_url, "local", cache_dir=None), sources[:1], summaries[:1], 1)
    print("| case | judge | rows judged | rows with an error | calls per row | prompt tokens per row | wall s | rerun calls per row |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    case("first run, rerun", sources, summaries, args)
    case("not JSON on 1 row in 4", sources, summaries, args, broken_share=4)
    long_sources = [f"{source} {FILLER}" for source in sources]  # 360 words more: past the window
    case(f"sources past a window of {args.context} words", long_sources, summaries, args, context=args.context)
    if args.local:
        local_case(1)


if __name__ == "__main__":
    main()
