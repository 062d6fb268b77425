"""``mgm serve`` and ``mgm demo``: local models on 127.0.0.1, and the whole loop on them."""

from __future__ import annotations

import argparse
import shlex
import signal
import threading

from .common import EXIT_OK, folder_argument, port_number, positive_int


def serve(args: argparse.Namespace) -> int:
    from ..local import LocalModelServer

    print(f"starting {args.model} (llama.cpp) ...", flush=True)
    with LocalModelServer(args.model, n_ctx=args.n_ctx, host=args.host, port=args.port, n_threads=args.threads) as server:
        print(f"serving {server.model_id} at {server.base_url}, context window {server.n_ctx} tokens (Ctrl-C stops it)", flush=True)
        print("for a judge in another shell (mgm evaluate, Judge()):", flush=True)
        print("  export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in server.environment.items()), flush=True)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(0.5):  # a server that dies is said at once, not after a Ctrl-C
                server.check_alive()
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


DEMO_NOTE = (
    "NOTE: the judge here is SmolLM2-135M, a 135-million-parameter model on this CPU. Its verdicts only demonstrate\n"
    "the pipeline: it often returns no claim for a summary that has words, which is recorded as a judge failure\n"
    "(no_claims) for that row, never as a score. grounding and grounded need no judge: they stand without it, for\n"
    "comparing the candidates on these articles (the data grounding is calibrated on is named under the table).\n"
    "Set MGM_JUDGE_MODEL, MGM_JUDGE_BASE_URL and OPENAI_API_KEY to judge with a real model."
)
# The gate: the judge's faithfulness and its error rate, and the model-free check (confident that most summaries
# are grounded: the Clopper-Pearson lower bound of grounded_rate, so that 8 articles must be nearly all grounded to pass).
# strict_alignment, not the study's alignment: a judge that answers idk to every claim gives alignment 1 (nothing
# contradicted) and strict_alignment 0. 0.3: 3 of the 8 summaries with every claim supported (small models add
# details the source does not hold; the grounded rule carries the demo's bar).
DEMO_GATE = {"strict_alignment": ">= 0.3", "grounded_rate_ci_low": ">= 0.5", "judge_error_rate": "<= 0.25"}


def demo(args: argparse.Namespace) -> int:
    import contextlib
    import os
    import time

    from ..judge import Judge
    from ..local import LocalModelServer
    from ..study import Candidate, load_articles, local_store, run_study

    started = time.perf_counter()
    articles = load_articles(args.data)
    if args.limit is not None:
        articles = articles.head(args.limit)
    store = folder_argument(args.store, "--store")
    uri = local_store(store)
    with contextlib.ExitStack() as stack:
        print("starting local models (llama.cpp on 127.0.0.1): Gemma 3 270M and SmolLM2-135M-Instruct ...", flush=True)
        gemma = stack.enter_context(LocalModelServer("gemma3-270m"))
        smollm = stack.enter_context(LocalModelServer("smollm2-135m"))
        candidates = [
            Candidate("gemma3-270m", gemma.model_id, gemma.base_url, max_tokens=args.max_tokens),
            Candidate("smollm2-135m", smollm.model_id, smollm.base_url, max_tokens=args.max_tokens),
        ]
        local_judge = not os.environ.get("MGM_JUDGE_MODEL", "").strip()  # blank is unset, as Judge() reads it
        if local_judge:
            judge = smollm.judge(max_concurrency=2)
        else:
            judge = Judge(max_concurrency=args.concurrency)
        print(f"judge: {judge.model} at {judge.shown_url}; {len(articles)} articles; MLflow store {uri}", flush=True)
        result = run_study(
            articles, candidates, judge, experiment="mgm-demo", artifact_location=store / "artifacts",
            gate_rules=DEMO_GATE, candidate_concurrency=2,
        )
    print(demo_report(result, uri, local_judge=local_judge, seconds=time.perf_counter() - started))
    return EXIT_OK


def demo_report(result, uri: str, *, local_judge: bool, seconds: float) -> str:
    """What ``mgm demo`` prints once the study is done: the table (its columns lined up), the per-category figures,
    the judge's failures and the runs' warnings, the paired comparison, each gate with every rule's actual value
    against its threshold (so a failed gate says why), and each run's page in the MLflow UI."""
    from ..study import comparison_lines, format_table, run_url, ui_command, warning_lines
    from .run_output import grounding_caveat

    lines = ["", format_table(result.table), f"(grounding, grounded: {grounding_caveat()})", "", "by category (alignment, richness, grounding):"]
    if result.by_category.empty:  # pandas' "Empty DataFrame" and its column list, once
        lines.append("  none: no candidate wrote a summary to judge")
    else:
        lines.append(result.by_category.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    lines += [
        f"{name}: {failures} have no score (the judge failed, or no summary was written): counted in judge_error_rate"
        for name, failures in result.judge_failures.items()
    ]
    lines += [f"{name}: {text}" for name, text in result.cut_off.items()]
    lines += warning_lines(result.warnings)
    if result.comparison_refused:
        lines.append(f"comparison not made: {result.comparison_refused}")
    if result.comparison is not None:
        lines += comparison_lines(result.comparison)
    for name, gate in result.gates.items():
        lines += ["", f"gate for {name}: {gate}"]
    if local_judge:
        lines += ["", DEMO_NOTE]
    lines += ["", f"done in {seconds:.0f} s. Open the runs in the MLflow UI:", f"  {ui_command(uri)}"]
    lines += [f"  {name}: {run_url(result.experiment_id, run_id)}" for name, run_id in result.run_ids.items()]
    return "\n".join(lines)


def add_commands(commands) -> None:
    """Add this module's subcommands to ``mgm``'s parser."""
    serve_parser = commands.add_parser(
        "serve", help="serve a local model (llama.cpp) on 127.0.0.1 as an OpenAI-compatible endpoint",
        description=(
            "Serve a local model (llama-cpp-python's server) as an OpenAI-compatible endpoint until Ctrl-C, and print "
            "the line to export in another shell: MGM_JUDGE_MODEL, MGM_JUDGE_BASE_URL and MGM_JUDGE_CONTEXT (its "
            "context window, which a Judge reads from there). Pass --port to keep that line the same from one start "
            "to the next."
        ),
    )
    serve_parser.add_argument("model", nargs="?", default="smollm2-135m", help="smollm2-135m, gemma3-270m or a path to a .gguf file")
    serve_parser.add_argument("--n-ctx", type=positive_int, default=8192, metavar="TOKENS", help="context window in tokens, exported as MGM_JUDGE_CONTEXT")
    serve_parser.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on; the server checks no API key, so another address than loopback opens the model to that network",
    )
    serve_parser.add_argument("--port", type=port_number, default=None, help="port to listen on (default: a free one, new at every start)")
    serve_parser.add_argument(
        "--threads", type=positive_int, default=None,
        help="CPU threads the model computes on (default: $MGM_LOCAL_THREADS, else one per core; fewer leave cores to other work)",
    )
    serve_parser.set_defaults(run=serve)
    demo_parser = commands.add_parser("demo", help="the whole loop on local models: summarize, judge, log, compare, gate")
    demo_parser.add_argument("--data", default=None, help="articles file; the BBC jsonl works as is (default: the eight that ship with the package)")
    demo_parser.add_argument("--limit", type=positive_int, default=None, metavar="N", help="first N articles only (default: every article)")
    demo_parser.add_argument("--store", default="mgm-demo", help="folder for the SQLite MLflow store and artifacts")
    demo_parser.add_argument("--max-tokens", type=positive_int, default=200, help="summary length limit for the candidates")
    demo_parser.add_argument("--concurrency", type=positive_int, default=8, help="judge calls in flight, for a judge set by MGM_JUDGE_MODEL (the local one takes 2)")
    demo_parser.set_defaults(run=demo)
