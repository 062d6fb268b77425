"""Run one peer's judge over a JSONL of rows (in the peers' virtual env): {"source", "summary"} for the summary
judges, {"question", "passages", "answer"} for the judges of answers from retrieved passages.

    .venv-peers/bin/python benchmarks/peers/run_peer.py SYSTEM rows.jsonl --base-url URL --model NAME
        [--concurrency N] [--scores-out scores.jsonl]

SYSTEM: deepeval | deepeval-no-reason | mlflow-summarization | ragas-faithfulness (summaries);
ragas-faithfulness-rag | mlflow-retrieval-groundedness (answers: Ragas' Faithfulness with the passages as its
retrieved contexts, MLflow's RetrievalGroundedness on a trace whose RETRIEVER span returned the passages). Prints one JSON line:
{"system", "rows", "errors", "error_sample", "concurrency", "wall_s", "cpu_s"}; the times cover judging only (not
imports or set-up). The endpoint's own log counts the calls and tokens.

``--concurrency 1`` (the default) judges the rows one after another with each peer's synchronous call. Above 1,
each peer runs in its own concurrent mode with at most N rows in flight: DeepEval's ``a_measure`` and Ragas's
``ascore`` gathered under an asyncio semaphore, MLflow's scorer (synchronous only) from a pool of N threads, as
``mlflow.genai.evaluate`` does with ``MLFLOW_GENAI_EVAL_MAX_WORKERS``.

``--scores-out`` writes one JSON line per row, in input order: {"index", "id", "score", "passed", "error"}.
``score`` is the peer's number (DeepEval's and Ragas's score; MLflow's yes/no gives none), ``passed`` its
pass/fail (DeepEval: score >= its threshold; MLflow: "yes"; Ragas: none), ``error`` the message when the peer
failed on the row (then score and passed are null: a failure is not a 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

Outcome = dict  # {"score": float | None, "passed": bool | None}


@dataclass
class Peer:
    """A peer's judge of one row (the row's dict): ``sync`` always; ``concurrent`` when the peer has its own async form."""

    sync: Callable[[dict], Outcome]
    concurrent: Callable[[dict], Awaitable[Outcome]] | None = None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system")
    parser.add_argument("data")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--concurrency", type=int, default=1, help="rows in flight at once (default 1: one by one)")
    parser.add_argument("--scores-out", default=None, help="write each row's score, pass/fail and error here (JSONL)")
    args = parser.parse_args()
    os.environ.update(OPENAI_API_KEY="peer-benchmark", OPENAI_BASE_URL=args.base_url, OPENAI_API_BASE=args.base_url,
                      DEEPEVAL_TELEMETRY_OPT_OUT="YES", DO_NOT_TRACK="1", RAGAS_DO_NOT_TRACK="true", MLFLOW_TRACKING_URI="sqlite:///:memory:",
                      # MLflow's documented switch for machines without network access: its judge otherwise spends
                      # about 7 s of its first call retrying a download of the model catalogue.
                      MLFLOW_MODEL_CATALOG_URI="")
    rows = [json.loads(line) for line in open(args.data) if line.strip()]
    peer = build(args.system, args.base_url, args.model)
    wall, cpu = time.perf_counter(), time.process_time()
    outcomes = judge_all(peer, rows, max(args.concurrency, 1))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    failed = [o["error"] for o in outcomes if o.get("error")]
    if args.scores_out:
        with open(args.scores_out, "w") as out:
            for index, (row, outcome) in enumerate(zip(rows, outcomes)):
                record = {"index": index, "id": row.get("id"), "score": None, "passed": None, "error": None, **outcome}
                out.write(json.dumps(record) + "\n")
    print(json.dumps({"system": args.system, "rows": len(rows), "errors": len(failed), "error_sample": failed[0] if failed else "",
                      "concurrency": max(args.concurrency, 1), "wall_s": wall, "cpu_s": cpu}))


def _failure(exc: BaseException) -> Outcome:
    """A peer's failure on one row is recorded, not fatal, and never scored."""
    return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def judge_all(peer: Peer, rows: list[dict], concurrency: int) -> list[Outcome]:
    def one(row: dict) -> Outcome:
        try:
            return peer.sync(row)
        except Exception as exc:
            return _failure(exc)

    if concurrency == 1:
        return [one(row) for row in rows]
    if peer.concurrent is None:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(one, rows))
    return asyncio.run(_gather(peer.concurrent, rows, concurrency))


async def _gather(judge: Callable[[dict], Awaitable[Outcome]], rows: list[dict], concurrency: int) -> list[Outcome]:
    slots = asyncio.Semaphore(concurrency)

    async def one(row: dict) -> Outcome:
        async with slots:
            try:
                return await judge(row)
            except Exception as exc:
                return _failure(exc)

    return await asyncio.gather(*(one(row) for row in rows))


def build(system: str, base_url: str, model: str) -> Peer:
    if system.startswith("deepeval"):
        from deepeval.metrics import SummarizationMetric
        from deepeval.models import LocalModel
        from deepeval.test_case import LLMTestCase

        llm = LocalModel(model=model, base_url=base_url, api_key="peer-benchmark")
        include_reason = system == "deepeval"

        def outcome(metric) -> Outcome:
            return {"score": metric.score, "passed": bool(metric.score >= metric.threshold)}

        def run(row: dict) -> Outcome:
            metric = SummarizationMetric(model=llm, include_reason=include_reason, async_mode=False)
            metric.measure(LLMTestCase(input=row["source"], actual_output=row["summary"]), _show_indicator=False)
            return outcome(metric)

        async def a_run(row: dict) -> Outcome:
            metric = SummarizationMetric(model=llm, include_reason=include_reason, async_mode=True)
            await metric.a_measure(LLMTestCase(input=row["source"], actual_output=row["summary"]), _show_indicator=False)
            return outcome(metric)

        return Peer(run, a_run)
    if system == "mlflow-summarization":
        from mlflow.genai.scorers import Summarization

        scorer = Summarization(model=f"openai:/{model}")

        def verdict(row: dict) -> Outcome:
            feedback = scorer(inputs={"text": row["source"]}, outputs=row["summary"])
            if getattr(feedback, "error", None):
                raise RuntimeError(str(feedback.error))
            value = str(getattr(feedback.value, "value", feedback.value)).strip().lower()
            if value not in ("yes", "no"):
                raise ValueError(f"MLflow's Summarization returned {feedback.value!r}, not yes or no")
            return {"passed": value == "yes"}

        return Peer(verdict)  # synchronous only: the thread pool is its concurrent mode
    if system in ("ragas-faithfulness", "ragas-faithfulness-rag"):
        from openai import AsyncOpenAI
        from ragas.llms import llm_factory
        from ragas.metrics.collections import Faithfulness

        llm = llm_factory(model, client=AsyncOpenAI(base_url=base_url, api_key="peer-benchmark"))
        metric = Faithfulness(llm=llm)

        def asked(row: dict) -> dict:
            if system == "ragas-faithfulness":  # a summary: the article is the one context
                return {"user_input": "Summarize the article.", "response": row["summary"], "retrieved_contexts": [row["source"]]}
            return {"user_input": row["question"], "response": row["answer"], "retrieved_contexts": list(row["passages"])}

        def score(row: dict) -> Outcome:
            return {"score": float(metric.score(**asked(row)).value)}

        async def a_score(row: dict) -> Outcome:
            return {"score": float((await metric.ascore(**asked(row))).value)}

        return Peer(score, a_score)
    if system == "mlflow-retrieval-groundedness":
        import tempfile

        import mlflow
        from mlflow.entities import Document, SpanType
        from mlflow.genai.scorers import RetrievalGroundedness

        # its scorer reads the retrieved documents from a trace, which must be in a store to be read back (an
        # in-memory SQLite database is a new one on each connection); its artifacts (the traces) go there too, not
        # to ./mlruns of the working directory
        store = tempfile.mkdtemp(prefix="peer-traces-")
        mlflow.set_tracking_uri(f"sqlite:///{store}/traces.db")
        mlflow.set_experiment(experiment_id=mlflow.create_experiment("retrieval-groundedness",
                                                                     artifact_location=f"file://{store}/artifacts"))
        scorer = RetrievalGroundedness(model=f"openai:/{model}")

        @mlflow.trace(span_type=SpanType.RETRIEVER)
        def retrieve(passages: list[str]) -> list[Document]:
            return [Document(page_content=p) for p in passages]

        @mlflow.trace
        def application(question: str, passages: list[str], answer: str) -> str:
            retrieve(passages)
            return answer

        def grounded(row: dict) -> Outcome:
            application(row["question"], list(row["passages"]), row["answer"])
            mlflow.flush_trace_async_logging()
            trace = mlflow.get_trace(mlflow.get_last_active_trace_id(thread_local=True))
            feedbacks = scorer(trace=trace)
            feedbacks = feedbacks if isinstance(feedbacks, list) else [feedbacks]
            failed = [f for f in feedbacks if getattr(f, "error", None)]
            if failed:
                raise RuntimeError(str(failed[0].error))
            values = [str(getattr(f.value, "value", f.value)).strip().lower() for f in feedbacks]
            return {"passed": all(v == "yes" for v in values)}

        return Peer(grounded)  # synchronous only: the thread pool is its concurrent mode
    sys.exit(f"unknown system {system!r}")


if __name__ == "__main__":
    main()
