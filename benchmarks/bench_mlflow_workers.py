"""MLflow's own ``mlflow.genai.evaluate`` on a SQLite store, at its default workers and at 4: seconds per run and
traces stored, with three trivial ``@scorer`` functions (no judge, nothing of this package).

    .venv/bin/python benchmarks/bench_mlflow_workers.py [--runs 3] [--rows 18] [--workers default 4]

Why: at MLflow's default workers, plain evaluations on SQLite took 31-39 s a run in the suite
(``test_plain_mlflow_genai_evaluate_with_a_judge_per_scorer_at_mlflow_s_default_workers_ten_times``). This shows
whether that is MLflow's own: its threads exhaust SQLAlchemy's pool of connections, each waiting thread gives up
after SQLAlchemy's 30-s timeout, and the traces it was writing are lost ("Failed to send trace"). Each setting gets
a fresh SQLite store in a temporary folder; ``default`` leaves ``MLFLOW_GENAI_EVAL_MAX_WORKERS`` unset.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time


class Counting(logging.Handler):
    """Counts MLflow's "Failed to send trace" warnings."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.failed = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.failed += "Failed to send trace" in record.getMessage()


def measure(workers: str, runs: int, rows: int) -> list[tuple[int, float, int, int]]:
    """(run, seconds, traces stored with their spans, traces MLflow said it failed to send) of each run at ``workers``."""
    import mlflow
    from mlflow.genai.scorers import scorer

    if workers == "default":
        os.environ.pop("MLFLOW_GENAI_EVAL_MAX_WORKERS", None)
    else:
        os.environ["MLFLOW_GENAI_EVAL_MAX_WORKERS"] = workers

    @scorer
    def first(inputs, outputs):
        return 1.0

    @scorer
    def second(inputs, outputs):
        return 0.5

    @scorer
    def third(inputs, outputs):
        return 0.0

    found = []
    counting = Counting()
    logging.getLogger("mlflow").addHandler(counting)
    try:
        with tempfile.TemporaryDirectory(prefix="mgm-bench-workers-") as folder:
            mlflow.set_tracking_uri(f"sqlite:///{folder}/mlflow.db")
            mlflow.set_experiment(f"workers-{workers}")
            for run in range(runs):
                data = [{"inputs": {"id": f"{run}-{i}", "text": f"The council approved budget {i}."},
                         "outputs": f"Budget {i} approved."} for i in range(rows)]
                before, wall = counting.failed, time.perf_counter()
                result = mlflow.genai.evaluate(data=data, scorers=[first, second, third])
                wall = time.perf_counter() - wall
                mlflow.flush_trace_async_logging()
                listed = mlflow.search_traces(run_id=result.run_id, return_type="list")
                stored = sum(1 for trace in listed if trace.data.spans)  # a trace whose spans were lost holds no row
                found.append((run, wall, stored, counting.failed - before))
    finally:
        logging.getLogger("mlflow").removeHandler(counting)
        mlflow.set_tracking_uri(None)
    return found


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=18)
    parser.add_argument("--workers", nargs="+", default=["default", "4"],
                        help="MLFLOW_GENAI_EVAL_MAX_WORKERS values to try (default: MLflow's own)")
    args = parser.parse_args(argv)
    import mlflow
    import sqlalchemy

    lines = [f"mlflow {mlflow.__version__}, SQLAlchemy {sqlalchemy.__version__}; {args.rows} rows a run, three trivial "
             "@scorer functions, a fresh SQLite store per setting", "",
             "| MLflow workers | run | seconds | traces stored with their spans | traces MLflow failed to send |", "|---|---|---|---|---|"]
    for workers in args.workers:
        for run, wall, stored, failed in measure(workers, args.runs, args.rows):
            lines.append(f"| {workers} | {run + 1} | {wall:.1f} | {stored} of {args.rows} | {failed} |")
            print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
