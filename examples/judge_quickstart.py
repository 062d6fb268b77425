"""Ask a real local judge typed questions, then ask again and pay nothing. Run from the project root:

    .venv/bin/python examples/judge_quickstart.py                 # local SmolLM2-135M via llama.cpp
    MGM_JUDGE_MODEL=gpt-4o-mini OPENAI_API_KEY=sk-... .venv/bin/python examples/judge_quickstart.py   # OpenAI

A 135M-parameter judge's verdicts are noise: this shows the machinery (typed answers, response-mode fallback,
cache, usage), not judgement quality. Point MGM_JUDGE_MODEL / MGM_JUDGE_BASE_URL at a real judge for that.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Literal

from pydantic import BaseModel, Field

from mlflow_genai_metrics import Judge, JudgeRequest
from mlflow_genai_metrics.local import LocalModelServer

ARTICLE = (
    "Everton defender David Weir has played down talk of European football, despite his team lying third in "
    "the Premiership after beating Liverpool 1-0 on Saturday."
)
CLAIMS = [
    "David Weir plays as a defender for Everton.",
    "Everton are currently second in the Premiership.",
    "Everton beat Liverpool in a recent match.",
    "David Weir played down talk of Everton playing in European football.",
]


class ClaimVerdict(BaseModel):
    verdict: Literal["yes", "no", "idk"] = Field(description="yes: supported; no: contradicted; idk: neither")
    reason: str = Field(max_length=200, description="one sentence")


def question(claim: str) -> JudgeRequest:
    return JudgeRequest(
        messages=[
            {"role": "system", "content": "You check one claim against an article."},
            {"role": "user", "content": f"Article: {ARTICLE}\nClaim: {claim}\nDoes the article support the claim "
             "(yes), contradict it (no), or neither (idk)? Give a one-sentence reason."},
        ],
        answer_type=ClaimVerdict,
        prompt_version="quickstart:v1",
        max_tokens=200,
    )


def main() -> None:
    with contextlib.ExitStack() as stack:
        # A fresh cache, so the first run really calls the judge and the rerun really does not.
        cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="mgm-quickstart-"))
        if os.environ.get("MGM_JUDGE_MODEL"):
            judge = Judge(cache_dir=cache_dir, max_concurrency=4)
            print(f"judge: {judge.model} at {judge.shown_url}")
        else:
            server = stack.enter_context(LocalModelServer("smollm2-135m"))
            print(f"judge: local {server.model_id} at {server.base_url} (a 135M model: verdicts are only a demo)")
            judge = server.judge(cache_dir=cache_dir, max_concurrency=4)  # knows the server's context window
        for run in ("first run", "rerun"):
            started = time.perf_counter()
            replies = judge.ask_many([question(c) for c in CLAIMS], desc=run)
            elapsed = time.perf_counter() - started
            print(f"\n{run}: {elapsed:.2f}s")
            for claim, reply in zip(CLAIMS, replies):
                shown = f"{reply.answer.verdict:>3}  {reply.answer.reason}" if reply.ok else f"ERROR {reply.error}"
                print(f"  {claim:<70} {shown}{'  (cached)' if reply.cached else ''}")
        usage = judge.usage
        print(
            f"\nusage: {usage.requests} requests, {usage.calls} HTTP calls, {usage.cache_hits} cache hits, "
            f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens; "
            f"response mode the endpoint accepted: {judge.response_mode}"
        )


if __name__ == "__main__":
    main()
