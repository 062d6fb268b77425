"""Traditional metrics on all 2,225 BBC rows: ``traditional_metrics`` against rouge-score + sacreBLEU row by row.

    .venv/bin/python benchmarks/bench_traditional.py [--rows N] [--ter-rows N]

Predictions are each article's lead (its first 120 words), references the extractive reference summaries
(``reference_summary_sentences``). The baseline is what a user would write: per row, one stemmed
``RougeScorer.score`` for rouge1/2/L, one for rougeLsum (sentences on lines), one ``sentence_bleu`` and one
``sentence_chrf``; and ``corpus_bleu`` /
``corpus_chrf`` over all rows, in one process. Both are timed in the same run; the ratio is what to read.

Also timed: the paired bootstrap of corpus BLEU and chrF (``paired_corpus_difference``, 1,000 resamples) between
these predictions and the articles' first 60 words, from the rows' statistics.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"


def load(rows: int | None):
    if not DATA.exists():
        sys.exit(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
    records = [json.loads(line) for line in DATA.read_text().splitlines()]
    records = records[:rows] if rows else records
    predictions = [" ".join(r["body"].split()[:120]) for r in records]
    references = [r["reference_summary_sentences"] for r in records]
    return records, predictions, references


def baseline(predictions, references):
    import sacrebleu
    from rouge_score import rouge_scorer

    from mlflow_genai_metrics.text import split_sentences

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    lsum_scorer = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)
    joined = [" ".join(s) for s in references]
    for prediction, sentences, reference in zip(predictions, references, joined):
        scorer.score(reference, prediction)
        lsum_scorer.score("\n".join(sentences), "\n".join(split_sentences(prediction)))
        sacrebleu.sentence_bleu(prediction, [reference])
        sacrebleu.sentence_chrf(prediction, [reference])
    sacrebleu.corpus_bleu(predictions, [joined])
    sacrebleu.corpus_chrf(predictions, [joined])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="first N rows only (default: all 2,225)")
    parser.add_argument("--ter-rows", type=int, default=20, help="rows for the TER timing (default 20)")
    args = parser.parse_args()
    records, predictions, references = load(args.rows)

    from mlflow_genai_metrics.reference import paired_corpus_difference, traditional_metrics

    timings = {}
    started = time.perf_counter()
    baseline(predictions, references)
    timings["rouge-score + sacreBLEU, row by row, 1 process"] = time.perf_counter() - started
    for jobs in (1, os.cpu_count() or 1):
        started = time.perf_counter()
        result = traditional_metrics(predictions, references, n_jobs=jobs)
        timings[f"traditional_metrics, n_jobs={jobs}"] = time.perf_counter() - started
    started = time.perf_counter()
    traditional_metrics(predictions[: args.ter_rows], references[: args.ter_rows], ter=True, n_jobs=1)
    ter_per_row = (time.perf_counter() - started) / args.ter_rows
    shorter = traditional_metrics([" ".join(r["body"].split()[:60]) for r in records], references)
    started = time.perf_counter()
    paired = {name: paired_corpus_difference(name, result.statistics[name], shorter.statistics[name]) for name in ("bleu", "chrf")}
    paired_seconds = time.perf_counter() - started

    base = timings["rouge-score + sacreBLEU, row by row, 1 process"]
    print(f"{len(predictions)} BBC rows; python {platform.python_version()}, {os.cpu_count()} cores")
    print("| method | seconds | ms per row | time vs row by row |")
    print("|---|---|---|---|")
    for name, seconds in timings.items():
        print(f"| {name} | {seconds:.1f} | {seconds / len(predictions) * 1000:.2f} | {seconds / base:.2f}x |")
    print(f"\nTER (ter=True), one process: {ter_per_row:.2f} s per row over {args.ter_rows} rows "
          f"-> about {ter_per_row * 2225 / 60:.0f} min for 2,225 rows on one core")
    print(f"paired bootstrap of corpus BLEU and chrF (1,000 resamples each), first 60 vs first 120 words: "
          f"{paired_seconds:.1f} s; " + "; ".join(f"{name} {d.difference:+.2f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}] p={d.p_value:.3f}" for name, d in paired.items()))
    print("aggregates:", {k: round(v, 4) for k, v in result.metrics.items()})
    print("signatures:", result.signatures)


if __name__ == "__main__":
    main()
