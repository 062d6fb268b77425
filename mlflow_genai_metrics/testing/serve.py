"""``python -m mlflow_genai_metrics.testing.serve --latency 0.2 --slots 32``: the deterministic summarization judge
behind a ``ScriptedJudgeServer`` in its own process (so a benchmark's CPU time is its own); prints the base URL."""

from __future__ import annotations

import threading

from .scripted_server import ScriptedJudgeServer


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted."""
    import argparse

    from .summarization_judge import SummarizationJudgeScript

    parser = argparse.ArgumentParser(description="a scripted OpenAI-compatible judge on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--slots", type=int, default=None, help="requests served at once (the rest queue)")
    args = parser.parse_args(argv)
    server = ScriptedJudgeServer(SummarizationJudgeScript(), latency_s=args.latency, slots=args.slots).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
