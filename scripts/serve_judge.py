"""``python scripts/serve_judge.py --latency 0.2 --slots 32``: the deterministic summarization judge behind a
``ScriptedJudgeServer`` in its own process (so a benchmark's CPU time is its own); prints the base URL. A development
script for the benchmarks, not part of the package (it is not in the wheel).

With ``--stats-on-stdin`` it also answers every line read on stdin with one JSON line of the server's log so far
(``requests``, ``ok``: status 200, ``max_in_flight``), and stops at end of input: how a benchmark in another
process counts the calls a system made. A line ``bodies PATH`` first writes the JSON body of every request so far
to PATH, one per line (how a benchmark replays the very same requests with another client). ``main(script=...)`` serves another script the same way.

Its claims are the summary's sentences, word for word; with ``--claims-reworded`` each without its closing full stop
or mark, so that no claim repeats a summary's sentence (as a judge's rewording does: the grounding check scores each
claim afresh instead of reading the sentence's features from the source's index). The same verdicts and calls.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Mapping

from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript
from mlflow_genai_metrics.testing.script import Script
from mlflow_genai_metrics.text import split_sentences


class Reworded(Mapping):
    """summary -> its claims: its sentences without their closing full stop or mark (for any summary)."""

    def __getitem__(self, summary: str) -> list[str]:
        return [sentence.rstrip(".!?") for sentence in split_sentences(summary)]

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def stats(server: ScriptedJudgeServer) -> dict[str, int]:
    """What the server's log says so far."""
    return {"requests": server.request_count, "ok": server.count(status=200), "max_in_flight": server.max_in_flight}


def write_bodies(server: ScriptedJudgeServer, path: str) -> None:
    """Every request's JSON body so far, one per line, in the order they arrived."""
    with open(path, "w", encoding="utf-8") as out:
        for entry in list(server.requests):
            out.write(json.dumps(entry.body) + "\n")


def main(argv: list[str] | None = None, *, script: Script | None = None) -> None:
    """Serve until interrupted (or, with ``--stats-on-stdin``, until stdin closes)."""
    import argparse

    parser = argparse.ArgumentParser(description="a scripted OpenAI-compatible judge on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--slots", type=int, default=None, help="requests served at once (the rest queue)")
    parser.add_argument("--claims-reworded", action="store_true", help="claims that never repeat a summary's sentence word for word")
    parser.add_argument("--stats-on-stdin", action="store_true", help="answer each stdin line with the request counts; stop at EOF")
    args = parser.parse_args(argv)
    script = script or SummarizationJudgeScript(claims=Reworded() if args.claims_reworded else {})
    server = ScriptedJudgeServer(script, latency_s=args.latency, slots=args.slots).start()
    print(server.base_url, flush=True)
    try:
        if args.stats_on_stdin:
            for line in sys.stdin:
                if line.startswith("bodies "):
                    write_bodies(server, line.removeprefix("bodies ").strip())
                print(json.dumps(stats(server)), flush=True)
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
