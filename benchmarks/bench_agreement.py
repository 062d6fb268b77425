"""Agreement of our judgement with human faithfulness labels, beside the published reference points.

    .venv/bin/python benchmarks/bench_agreement.py --local --sample 30          # SmolLM2-135M: the floor
    MGM_JUDGE_MODEL=gpt-4o-mini OPENAI_API_KEY=... .venv/bin/python benchmarks/bench_agreement.py --sample 200

For each labelled set in ../shared/data/faithfulness (FRANK, QAGS-CNNDM, QAGS-XSum, SummEdits): a sample stratified
by the binary human label, judged (claims + verification), then balanced accuracy and Cohen's kappa of `aligned`
against the binary label, Spearman and Kendall of `support_rate` against the graded label.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.local import LocalModelServer
from mlflow_genai_metrics.meta import load_labelled, meta_evaluate

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
SETS = ["frank", "qags_cnndm", "qags_xsum", "summedits"]
# Published points (the shared README): balanced accuracy, or Spearman for QAGS; each with the judge it used.
PUBLISHED = {
    "frank": "SummaC-Conv 0.816, QuestEval 0.821 (balanced accuracy, SummaC benchmark split)",
    "qags_cnndm": "G-Eval (GPT-4) 0.685, AlignScore-large 0.739 (Spearman)",
    "qags_xsum": "G-Eval (GPT-4) 0.537, AlignScore-large 0.572 (Spearman)",
    "summedits": "GPT-4 0.821, Gemini-pro 0.755, Claude 2.1 0.744, QAFactEval 0.655, SummaC-Conv 0.571, humans 0.909 (balanced accuracy)",
}


def fmt(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=30, help="pairs per set (default 30)")
    parser.add_argument("--sets", nargs="*", default=SETS)
    parser.add_argument("--local", action="store_true", help="judge with the local SmolLM2-135M")
    parser.add_argument("--judge-model", default=None)
    parser.add_argument("--judge-base-url", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: the labelled sets are not at {DATA} (../shared/data beside the project)")
        return []
    lines = []
    with contextlib.ExitStack() as stack:
        if args.local:
            server = stack.enter_context(LocalModelServer("smollm2-135m"))
            judge = Judge(server.model_id, server.base_url, max_concurrency=2, context_window=server.n_ctx)
        else:
            judge = Judge(args.judge_model, args.judge_base_url, context_window=None)
        lines += [f"judge `{judge.model}`, {args.sample} pairs per set (stratified by the human label, seed {args.seed})", "",
                  "| set | pairs | balanced accuracy | Cohen's kappa | Spearman | Kendall | judge errors | judge `aligned` rate | people's consistent rate | published (judge) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name in args.sets:
            report = meta_evaluate(load_labelled(DATA / f"{name}.jsonl"), judge=judge, sample=args.sample, seed=args.seed)
            m = report.metrics
            lines.append(f"| {name} | {int(m['rows'])} | {fmt(m['balanced_accuracy'])} | {fmt(m['cohen_kappa'])} | {fmt(m['spearman'])} | "
                         f"{fmt(m['kendall'])} | {fmt(m['judge_error_rate'])} | {fmt(m['judge_aligned_rate'])} | {fmt(m['human_consistent_rate'])} | {PUBLISHED[name]} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
