"""Run one peer's summarization judge over a JSONL of {"source", "summary"} rows (in the peers' virtual env).

    .venv-peers/bin/python benchmarks/peers/run_peer.py SYSTEM rows.jsonl --base-url URL --model NAME

SYSTEM: deepeval | deepeval-no-reason | mlflow-summarization | ragas-faithfulness. Prints one JSON line:
{"system", "rows", "errors", "error_sample"}. The endpoint's own log counts the calls and tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system")
    parser.add_argument("data")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    os.environ.update(OPENAI_API_KEY="peer-benchmark", OPENAI_BASE_URL=args.base_url, OPENAI_API_BASE=args.base_url,
                      DEEPEVAL_TELEMETRY_OPT_OUT="YES", DO_NOT_TRACK="1", MLFLOW_TRACKING_URI="sqlite:///:memory:")
    rows = [json.loads(line) for line in open(args.data)]
    judge = build(args.system, args.base_url, args.model)
    errors, sample = 0, ""
    for row in rows:
        try:
            judge(row["source"], row["summary"])
        except Exception as exc:  # a peer's failure on one row is counted, not fatal
            errors += 1
            sample = sample or f"{type(exc).__name__}: {str(exc)[:300]}"
    print(json.dumps({"system": args.system, "rows": len(rows), "errors": errors, "error_sample": sample}))


def build(system: str, base_url: str, model: str):
    if system.startswith("deepeval"):
        from deepeval.metrics import SummarizationMetric
        from deepeval.models import LocalModel
        from deepeval.test_case import LLMTestCase

        llm = LocalModel(model=model, base_url=base_url, api_key="peer-benchmark")
        include_reason = system == "deepeval"

        def run(source: str, summary: str) -> None:
            metric = SummarizationMetric(model=llm, include_reason=include_reason, async_mode=False)
            metric.measure(LLMTestCase(input=source, actual_output=summary))

        return run
    if system == "mlflow-summarization":
        from mlflow.genai.scorers import Summarization

        scorer = Summarization(model=f"openai:/{model}")

        def run(source: str, summary: str) -> None:
            feedback = scorer(inputs={"text": source}, outputs=summary)
            if getattr(feedback, "error", None):
                raise RuntimeError(str(feedback.error))

        return run
    if system == "ragas-faithfulness":
        from openai import AsyncOpenAI
        from ragas.llms import llm_factory
        from ragas.metrics.collections import Faithfulness

        llm = llm_factory(model, client=AsyncOpenAI(base_url=base_url, api_key="peer-benchmark"))
        metric = Faithfulness(llm=llm)

        def run(source: str, summary: str) -> None:
            metric.score(user_input="Summarize the article.", response=summary, retrieved_contexts=[source])

        return run
    sys.exit(f"unknown system {system!r}")


if __name__ == "__main__":
    main()
