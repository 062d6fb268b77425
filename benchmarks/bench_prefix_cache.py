"""Prompt processing on a real llama.cpp server with its prompt cache on, before and after the prefix-cache layout.

    .venv/bin/python benchmarks/bench_prefix_cache.py [--articles 3] [--candidates 3]

Three candidates' summaries of the same BBC articles (the reference summary, the article's first three sentences,
the reference without its first sentence; one candidate after the other, as runs of several models are laid out)
are judged by ``judge_summaries`` with coverage, twice: with the prompts as they were before the layout change
(``benchmarks/prompts_before_prefix/``: keypoints v1, verify v2, whose task came before the source) and with the
package's prompts (keypoints v2, verify v3: one preamble and the source first, the task after). Each time a fresh
SmolLM2-135M server (``LocalModelServer``, ``--cache True``: llama-cpp-python's RAM prompt cache, and ``--verbose``
for its timings) processes every prompt the judge sends. Between the two sits a recording endpoint
(``ScriptedJudgeServer``) that passes each prompt on to llama.cpp (one token of answer: the prompt is what is
measured) and answers with the deterministic rules of ``SummarizationJudgeScript``, so both layouts ask the very
same questions whatever the small model would write. The server's own timings give the prompt tokens it actually
evaluated (the rest came from its cache) and the time it took.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

BEFORE = Path(__file__).resolve().parent / "prompts_before_prefix"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402
from mlflow_genai_metrics.local import LocalModelServer  # noqa: E402
from mlflow_genai_metrics.prompts import Prompt, load_prompt  # noqa: E402
from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript  # noqa: E402
from mlflow_genai_metrics.testing.summarization_judge import marked_sections, pass_of  # noqa: E402
from mlflow_genai_metrics.text import split_sentences  # noqa: E402

# llama.cpp's per-completion timing line (llama_perf_context_print), printed with --verbose True.
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
PASSES = ("keypoints", "claims", "verify", "coverage")


def old_prompt(name: str) -> Prompt:
    """The prompt as it was before the prefix layout (keypoints v1, verify v2); the others as they are."""
    path = BEFORE / f"{name}.txt"
    if not path.exists():
        return load_prompt(name)
    text = path.read_text(encoding="utf-8")
    header, _, body = text.partition("\n")
    _, prompt_name, version = header.split()
    return Prompt(name=prompt_name, version=version, template=body.strip() + "\n", source_text=text)


@dataclass
class ProcessThenAnswer:
    """A script for the recording endpoint: llama.cpp processes the prompt, the rules answer it."""

    llama_url: str
    model: str
    rules: SummarizationJudgeScript = field(default_factory=SummarizationJudgeScript)
    passes: list[str] = field(default_factory=list)
    prompt_tokens: int = 0

    def __call__(self, request):
        body = {"model": self.model, "messages": request.messages, "max_tokens": 1, "temperature": 0}
        post = urllib.request.Request(f"{self.llama_url}/chat/completions", data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(post, timeout=600) as reply:  # blocking: one request at a time, in order
            self.prompt_tokens += json.loads(reply.read())["usage"]["prompt_tokens"]
        self.passes.append(pass_of(marked_sections(request.messages[0]["content"])))
        return self.rules(request)


@dataclass
class Measured:
    calls: int
    prompt_tokens: int
    evaluated: int
    eval_s: float
    wall_s: float
    per_pass: dict[str, int]  # evaluated tokens per pass


def candidates(texts: list[str], references: list[str], count: int = 3) -> tuple[list[str], list[str]]:
    """The first ``count`` of three candidates per article, one candidate's rows after the other's."""
    made = [
        references,
        [" ".join(split_sentences(text)[1:4]) for text in texts],  # the lead (after the title line)
        [" ".join(split_sentences(reference)[1:]) or reference for reference in references],
    ][:count]
    return texts * len(made), [summary for candidate in made for summary in candidate]


def measure(sources: list[str], summaries: list[str], *, before: bool, n_ctx: int, coverage: bool) -> Measured:
    patched = mock.patch("mlflow_genai_metrics.summarization.passes.load_prompt", old_prompt) if before else nullcontext()
    with LocalModelServer("smollm2-135m", n_ctx=n_ctx, extra_args=("--cache", "True", "--verbose", "True")) as llama:
        script = ProcessThenAnswer(llama.base_url, llama.model_id)
        with ScriptedJudgeServer(script, models=(llama.model_id,)) as endpoint, patched:
            # One call at a time, in the order judge_rows sends them; a loaded machine must not time a call out (a retry).
            judge = Judge(llama.model_id, endpoint.base_url, "local", cache_dir=None, max_concurrency=1, timeout_s=1800)
            started = time.perf_counter()
            result = judge_summaries(sources, summaries, judge=judge, coverage=coverage, grounding=False, resamples=10, progress=False)
            wall = time.perf_counter() - started
        timings = [(float(ms), int(tokens)) for ms, tokens in _PROMPT_EVAL.findall(llama.log_tail(10**9))]
    assert result.metrics["judge_error_rate"] == 0, "every row must be judged for the two layouts to compare"
    if len(timings) != len(script.passes):
        raise RuntimeError(f"{len(timings)} timing lines for {len(script.passes)} prompts: cannot attribute them")
    per_pass = {name: sum(t for (_, t), p in zip(timings, script.passes) if p == name) for name in PASSES}
    return Measured(len(script.passes), script.prompt_tokens, sum(t for _, t in timings), sum(ms for ms, _ in timings) / 1e3, wall, per_pass)


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=3, choices=(1, 2, 3),
                        help="how many of the three candidates to judge (1: the reference summaries only)")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--no-coverage", action="store_true", help="alignment and richness only: no key-point call to share the source with")
    parser.add_argument("--words", type=int, default=None, help="each article cut to its first N words (a quick smoke run)")
    args = parser.parse_args(argv)
    rows = bbc_rows(args.articles, args.words)
    if rows is None:
        return []
    sources, summaries = candidates(*rows, args.candidates)
    before = measure(sources, summaries, before=True, n_ctx=args.n_ctx, coverage=not args.no_coverage)
    after = measure(sources, summaries, before=False, n_ctx=args.n_ctx, coverage=not args.no_coverage)
    lines = [
        f"{args.articles} BBC articles x {args.candidates} candidates = {len(sources)} rows, {'without' if args.no_coverage else 'with'} coverage; SmolLM2-135M on llama-cpp-python "
        "(`--cache True`), one request at a time" + (f"; articles cut to {args.words} words" if args.words else ""),
        "",
        "| prompt layout | calls | prompt tokens sent | prompt tokens evaluated | evaluated / sent | "
        + " | ".join(f"evaluated: {name}" for name in PASSES) + " | prompt processing s |",
        "|---|---|---|---|---|" + "---|" * len(PASSES) + "---|",
    ]
    for name, m in (("before (keypoints v1, verify v2)", before), ("after (keypoints v2, verify v3)", after)):
        lines.append(f"| {name} | {m.calls} | {m.prompt_tokens} | {m.evaluated} | {m.evaluated / m.prompt_tokens:.2f} | "
                     + " | ".join(str(m.per_pass[p]) for p in PASSES) + f" | {m.eval_s:.1f} |")
    lines += [
        "",
        f"prompt tokens evaluated, after / before: {after.evaluated / before.evaluated:.2f}x",
        f"prompt processing time, after / before: {after.eval_s / before.eval_s:.2f}x",
        f"prompt tokens sent, after / before: {after.prompt_tokens / before.prompt_tokens:.3f}x",
    ]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
