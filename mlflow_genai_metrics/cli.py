"""The ``mgm`` command line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    from .local import LocalModelServer

    with LocalModelServer(args.model, n_ctx=args.n_ctx) as server:
        print(f"serving {server.model_id} at {server.base_url}  (Ctrl-C stops it)", flush=True)
        print(f"  export MGM_JUDGE_MODEL={server.model_id} MGM_JUDGE_BASE_URL={server.base_url}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mgm", description="LLM-as-a-judge summarization metrics for MLflow.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a local model (llama.cpp) on 127.0.0.1 as an OpenAI-compatible judge")
    serve.add_argument("model", nargs="?", default="smollm2-135m", help="smollm2-135m, gemma3-270m or a path to a .gguf file")
    serve.add_argument("--n-ctx", type=int, default=8192, help="context window in tokens (default 8192)")
    serve.set_defaults(run=_serve)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
