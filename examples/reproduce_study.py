"""Reproduce the study on the BBC News corpus: candidates summarize, a judge scores claim by claim, MLflow logs it.
Run from the project root (the package is installed in .venv by ./run):

    # local models (llama.cpp on 127.0.0.1), a stratified sample of 50 articles:
    .venv/bin/python examples/reproduce_study.py --sample 50 --local

    # the same summaries, with the model-free grounding check only (no judge call):
    .venv/bin/python examples/reproduce_study.py --sample 50 --local --grounding-only

    # any OpenAI-compatible candidates and judge, e.g. OpenAI:
    export OPENAI_API_KEY=sk-...
    .venv/bin/python examples/reproduce_study.py --sample 200 \
        --candidate gpt-4o-mini=gpt-4o-mini --candidate gpt-4.1-nano=gpt-4.1-nano \
        --judge-model gpt-4o --judge-context 128000

A candidate is NAME=MODEL or NAME=MODEL@BASE_URL. Without --sample, all 2,225 articles are used (deduplicated:
about 2,088). The data is read from ../shared/data/bbc_news_summary.jsonl (or --data); it is never copied.
Each candidate's run is an `mlflow.genai.evaluate` run (through `evaluate_summaries`): one trace per article with
a card per judge on it (claim_alignment, key_point_coverage, grounding), where people can add their own feedback.
Prints the study's table (the judge's metrics beside the model-free grounding check's), a WARNING line for a run
whose judge verified almost nothing, and per-category results, writes them as Markdown to --out, and ends with
each run's page in the MLflow UI.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.grounding.model import calibration_note
from mlflow_genai_metrics.local import LocalModelServer
from mlflow_genai_metrics.study import (
    Candidate,
    comparison_lines,
    format_table,
    load_articles,
    local_store,
    run_study,
    run_url,
    stratified_sample,
    ui_command,
    warning_lines,
)

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"


def parse_candidate(text: str) -> Candidate:
    name, _, target = text.partition("=")
    model, _, base_url = target.partition("@")
    if not name or not model:
        raise argparse.ArgumentTypeError(f"a candidate is NAME=MODEL or NAME=MODEL@BASE_URL, got {text!r}")
    return Candidate(name, model, base_url or None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the BBC News jsonl (default: ../shared/data/bbc_news_summary.jsonl)")
    parser.add_argument("--sample", type=int, default=None, help="N articles, stratified by category, deduplicated")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--local", action="store_true", help="candidates Gemma 3 270M and SmolLM2-135M, judge SmolLM2 (unless --judge-model), all local")
    parser.add_argument("--candidate", action="append", type=parse_candidate, default=[], help="NAME=MODEL[@BASE_URL] (repeatable)")
    parser.add_argument("--grounding-only", action="store_true", help="no judge: the model-free grounding check alone")
    parser.add_argument("--judge-model", default=None, help="default: $MGM_JUDGE_MODEL")
    parser.add_argument("--judge-base-url", default=None, help="default: $MGM_JUDGE_BASE_URL, else OpenAI")
    parser.add_argument("--judge-context", type=int, default=None, help="the judge's context window in tokens")
    parser.add_argument("--concurrency", type=int, default=8, help="judge calls in flight (default 8)")
    parser.add_argument("--max-tokens", type=int, default=256, help="summary length limit (default 256)")
    parser.add_argument("--store", default="mgm-study", help="folder for the SQLite MLflow store (default ./mgm-study)")
    parser.add_argument("--out", default=None, help="write the tables as Markdown here")
    args = parser.parse_args()

    if not Path(args.data).exists():
        print(f"skipped: no BBC data at {args.data} (it lives in ../shared/data beside the project)")
        return 0
    articles = load_articles(args.data)
    articles = stratified_sample(articles, args.sample or len(articles), seed=args.seed)
    uri = local_store(args.store)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        candidates = [Candidate(c.name, c.model, c.base_url, max_tokens=args.max_tokens) for c in args.candidate]
        judge_options = {"max_concurrency": args.concurrency, "context_window": args.judge_context}
        if args.local:
            gemma = stack.enter_context(LocalModelServer("gemma3-270m"))
            smollm = stack.enter_context(LocalModelServer("smollm2-135m"))
            candidates += [
                Candidate("gemma3-270m", gemma.model_id, gemma.base_url, max_tokens=args.max_tokens),
                Candidate("smollm2-135m", smollm.model_id, smollm.base_url, max_tokens=args.max_tokens),
            ]
        if args.grounding_only:
            judge = None
        elif args.local and not (args.judge_model or args.judge_base_url):
            judge = smollm.judge(max_concurrency=2, context_window=args.judge_context or smollm.n_ctx)
        else:
            judge = Judge(args.judge_model, args.judge_base_url, **judge_options)
        if not candidates:
            parser.error("no candidates: pass --candidate NAME=MODEL[@BASE_URL] or --local")
        judged_by = judge.model if judge else "none (grounding only)"
        print(f"{len(articles)} articles ({articles['category'].value_counts().to_dict()}); judge {judged_by}; store {uri}")
        result = run_study(articles, candidates, judge, experiment="bbc-study", artifact_location=Path(args.store) / "artifacts")
    elapsed = time.perf_counter() - started
    by_category = result.by_category.pivot(index="category", columns="candidate", values=["alignment", "richness", "grounding"])
    by_category.columns = [f"{metric}: {candidate}" for metric, candidate in by_category.columns]
    by_category = by_category.dropna(axis=1, how="all")  # with no judge, only grounding has values
    compared = comparison_lines(result.comparison) if result.comparison is not None else []
    compared += [f"not compared: {result.comparison_refused}"] if result.comparison_refused else []
    paired = "".join(f"- {line}\n" for line in compared)
    failures = "".join(f"{name}: {text} have no score (the judge failed, or no summary was written).\n" for name, text in result.judge_failures.items())
    failures += "".join(f"{name}: {text}\n" for name, text in result.cut_off.items())  # max_tokens cut them short
    failures += "".join(f"{line}\n" for line in warning_lines(result.warnings))  # a judge that verified almost nothing
    text = (
        f"{len(articles)} BBC articles, {f'judge `{judge.model}` at {judge.endpoint_label}' if judge else 'no judge'}, {elapsed / 60:.1f} min\n\n"
        + format_table(result.table)
        + f"\n(grounding, grounded: {calibration_note()})"  # the data the grounded label holds on, as every run and card say
        + (f"\n\n{failures.rstrip()}" if failures else "")
        + "\n\nPer category (mean of per-row values):\n\n"
        + format_table(by_category.round(3).reset_index())
        + "\n"
        + (f"\nPaired differences against the first candidate:\n\n{paired}" if paired else "")
    )
    print("\n" + text)
    print(f"open the runs: {ui_command(uri)}")
    for name, run_id in result.run_ids.items():
        print(f"  {name}: {run_url(result.experiment_id, run_id)}")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
