"""Judge two summaries the MLflow way, then judge them again and pay nothing. Run from the project root:

    .venv/bin/python examples/judge_quickstart.py                 # local SmolLM2-135M via llama.cpp
    MGM_JUDGE_MODEL=gpt-4o-mini OPENAI_API_KEY=sk-... .venv/bin/python examples/judge_quickstart.py   # OpenAI

Each evaluation is one `mlflow.genai.evaluate` run (through `evaluate_summaries`): one trace per summary, one card
per judge on it (claim_alignment, key_point_coverage, grounding), where people can add their own feedback in the
MLflow UI; the second one is answered from the judge's cache. The runs go to a SQLite store in a temporary folder,
or in --store DIR to keep them (the last line says how to open them). A 135M-parameter judge's verdicts are noise:
this shows the machinery, not judgement quality. Point MGM_JUDGE_MODEL / MGM_JUDGE_BASE_URL at a real judge for that.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import mlflow
from mlflow.entities import Feedback

from mlflow_genai_metrics import Judge, evaluate_summaries
from mlflow_genai_metrics.local import LocalModelServer
from mlflow_genai_metrics.study import local_store, ui_command
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage

ARTICLE = (
    "Everton defender David Weir has played down talk of European football, despite his team lying third in "
    "the Premiership after beating Liverpool 1-0 on Saturday."
)
# mlflow.genai.evaluate's rows: the source and its id in inputs, the summary as outputs.
DATA = [
    {"inputs": {"text": ARTICLE, "id": "faithful"},
     "outputs": "Everton beat Liverpool and are third, but David Weir played down talk of Europe."},
    {"inputs": {"text": ARTICLE, "id": "wrong-place"},
     "outputs": "Everton are second in the Premiership after beating Liverpool."},
]


def show_cards(run_id: str) -> None:
    """Each summary's trace and its cards, as the run's Traces tab shows them."""
    mlflow.flush_trace_async_logging()
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        root = next(span for span in trace.data.spans if span.parent_id is None)
        print(f"  {root.inputs['id']}: {root.outputs}")
        for card in sorted((a for a in trace.info.assessments if isinstance(a, Feedback)), key=lambda a: a.name):
            said = card.rationale.splitlines()[0] if card.rationale else f"ERROR {card.error.error_message}"
            print(f"    {card.name:<19} {card.value!s:<6} {said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="folder for the SQLite MLflow store (default: a temporary one)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        # A fresh judge cache, so the first evaluation really calls the judge and the second really does not.
        cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="mgm-quickstart-"))
        store = Path(args.store or Path(cache_dir) / "store").resolve()
        uri = local_store(store)
        if mlflow.get_experiment_by_name("judge-quickstart") is None:  # its artifacts beside the store, not in ./mlruns
            mlflow.create_experiment("judge-quickstart", artifact_location=(store / "artifacts").as_uri())
        mlflow.set_experiment("judge-quickstart")
        if os.environ.get("MGM_JUDGE_MODEL"):
            judge = Judge(cache_dir=cache_dir, max_concurrency=4)
            print(f"judge: {judge.model} at {judge.shown_url}")
        else:
            server = stack.enter_context(LocalModelServer("smollm2-135m"))
            print(f"judge: local {server.model_id} at {server.base_url} (a 135M model: verdicts are only a demo)")
            judge = server.judge(cache_dir=cache_dir, max_concurrency=4)  # knows the server's context window
        for evaluation_name in ("first evaluation", "second evaluation"):
            started = time.perf_counter()
            # New judge objects for each evaluation, on the one Judge (its cache and usage carry over).
            evaluation = evaluate_summaries(DATA, [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
            elapsed = time.perf_counter() - started
            metrics = evaluation.metrics
            print(f"\n{evaluation_name}: {elapsed:.2f}s, run {evaluation.run_id}: strict_alignment "
                  f"{metrics.get('strict_alignment', float('nan')):.3g}, coverage {metrics.get('coverage', float('nan')):.3g}, "
                  f"grounding {metrics['grounding']:.3g} over {len(evaluation.result.rows)} summaries")
            show_cards(evaluation.run_id)
        usage = judge.usage
        print(
            f"\nusage: {usage.requests} requests, {usage.calls} HTTP calls, {usage.cache_hits} cache hits, "
            f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens; "
            f"response mode the endpoint accepted: {judge.response_mode}"
        )
        print(f"open the runs: {ui_command(uri)}" if args.store else "(pass --store DIR to keep the runs and open them in the MLflow UI)")


if __name__ == "__main__":
    main()
