"""Alignment from people's corrections, measured on the labelled sets: FRANK's valid split and SummEdits' evaluation
split play people's feedback on traces; agreement is reported on their test splits, without and with the examples.

    .venv/bin/python benchmarks/bench_align.py --local --feedback 40 --test 30 --temperature 0.8 --judge-seed 6   # SmolLM2-135M
    MGM_JUDGE_MODEL=gpt-4o-mini OPENAI_API_KEY=... .venv/bin/python benchmarks/bench_align.py --feedback 200 --test 200
    .venv/bin/python benchmarks/bench_align.py --scripted --feedback 12 --test 8      # the scripted judge: a smoke run

For each set: ``--feedback`` pairs of its feedback split (stratified by the binary label) are logged to a temporary
MLflow store as traces (the source as ``inputs["text"]``, the summary as ``outputs``), each with a HUMAN feedback
``claim_alignment`` (yes when the pair is fully consistent) and the label's description as the reason. ``align_judge``
builds the examples from 75% of them and reports agreement (of ``strictly_aligned``) on the other 25%; then
``meta_evaluate`` judges ``--test`` pairs of the test split (stratified, the sample ``mgm meta-eval`` draws) without
and with the examples: balanced accuracy and Cohen's kappa of ``aligned`` against the binary label, as
docs/benchmarks.md reports agreement. No test pair is ever an example: they come from other splits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import mlflow
from mlflow.entities import AssessmentSource

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.meta_evaluation import load_labelled, meta_evaluate, stratified_labelled_sample
from mlflow_genai_metrics.tracking import align_judge

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
SETS = {"frank": ("valid", "test"), "summedits": ("evaluation", "test")}  # feedback split, test split


def log_feedback_traces(rows) -> None:
    """Each labelled pair as a trace people left a ``claim_alignment`` verdict on."""
    for row in rows.itertuples(index=False):
        with mlflow.start_span(name="summarize") as span:
            span.set_inputs({"text": row.source, "id": str(row.id)})
            span.set_outputs(row.summary)
        reason = getattr(row, "label_meaning", None) or ("fully consistent with the source" if row.human_binary else "not fully consistent with the source")
        mlflow.log_feedback(trace_id=span.trace_id, name="claim_alignment", value="yes" if row.human_binary else "no",
                            source=AssessmentSource(source_type="HUMAN", source_id="labelled-set"), rationale=str(reason))


def measure(name: str, judge: Judge, args, folder: Path) -> str:
    feedback_split, test_split = SETS[name]
    labelled = load_labelled(DATA / f"{name}.jsonl")
    feedback = stratified_labelled_sample(labelled[labelled["split"] == feedback_split], args.feedback, seed=args.seed)
    mlflow.set_experiment(f"align-{name}")
    log_feedback_traces(feedback)
    report = align_judge(f"align-{name}", judge=judge, output=folder / f"examples-{name}.json", held_out=0.25, seed=args.seed, log=False)
    test = labelled[labelled["split"] == test_split]
    before = meta_evaluate(test, judge=judge, sample=args.test, seed=args.seed, progress=False).metrics
    after = meta_evaluate(test, judge=judge, sample=args.test, seed=args.seed, progress=False, examples=report.examples).metrics
    c = report.counts
    return (f"| {name} | {feedback_split}: {c['labelled_traces']} ({c['examples']} examples, {c['held_out']} held back) | "
            f"{report.before['balanced_accuracy']:.3f} -> {report.after['balanced_accuracy']:.3f} | {test_split}: {int(before['rows'])} | "
            f"{before['balanced_accuracy']:.3f} -> {after['balanced_accuracy']:.3f} | {before['cohen_kappa']:.3f} -> {after['cohen_kappa']:.3f} | "
            f"{before['judge_error_rate']:.3f} -> {after['judge_error_rate']:.3f} |")


@contextlib.contextmanager
def judge_for(args, folder: Path):
    if args.scripted:
        from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript

        with ScriptedJudgeServer(SummarizationJudgeScript()) as server:
            yield Judge("scripted-judge", server.base_url, "local", cache_dir=folder / "cache")
    elif args.local:
        from mlflow_genai_metrics.local import LocalModelServer

        with LocalModelServer("smollm2-135m", n_ctx=8192) as llama:
            yield llama.judge(cache_dir=folder / "cache", max_concurrency=2, temperature=args.temperature, seed=args.judge_seed)
    else:
        yield Judge(cache_dir=folder / "cache")  # MGM_JUDGE_MODEL and the endpoint from the environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feedback", type=int, default=40, help="labelled pairs of each feedback split logged as people's feedback")
    parser.add_argument("--test", type=int, default=30, help="pairs of each test split judged without and with the examples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--temperature", type=float, default=0.0, help="with --local: the judge's temperature (at 0 SmolLM2 lists no claim)")
    parser.add_argument("--judge-seed", type=int, default=None, help="with --local: the seed the judge sends")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--local", action="store_true", help="SmolLM2-135M on llama.cpp as the judge")
    source.add_argument("--scripted", action="store_true", help="the scripted judge (a smoke run: its verdicts follow a word rule)")
    args = parser.parse_args()
    if not DATA.exists():
        print(f"skipped: the labelled sets are not at {DATA} (../shared/data beside the project)")
        return
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace written as its span ends, before its feedback
    with tempfile.TemporaryDirectory(prefix="mgm-bench-align-") as tmp:
        folder = Path(tmp)
        mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
        with judge_for(args, folder) as judge:
            print(f"judge {judge.model} (temperature {judge.temperature:g}, seed {judge.seed}); feedback pairs {args.feedback} per set, test pairs {args.test} per set, seed {args.seed}")
            print("| set | feedback (examples, held back) | held-back balanced accuracy, without -> with | test pairs | "
                  "test balanced accuracy, without -> with | test Cohen's kappa | judge error rate |")
            print("|---|---|---|---|---|---|---|")
            for name in args.sets:
                print(measure(name, judge, args, folder), flush=True)


if __name__ == "__main__":
    sys.exit(main())
