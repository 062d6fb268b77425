"""Agreement of our judgement with human faithfulness labels, beside the published reference points.

    .venv/bin/python benchmarks/bench_agreement.py --local --sample 30          # SmolLM2-135M: the floor
    .venv/bin/python benchmarks/bench_agreement.py --local --sample 30 --peers  # and DeepEval, MLflow beside it
    MGM_JUDGE_MODEL=gpt-4o-mini OPENAI_API_KEY=... .venv/bin/python benchmarks/bench_agreement.py --sample 200

For each labelled set in ../shared/data/faithfulness (FRANK, QAGS-CNNDM, QAGS-XSum, SummEdits): a sample stratified
by the binary human label, judged (claims + verification), then balanced accuracy and Cohen's kappa of `aligned`
against the binary label, Spearman and Kendall of `support_rate` against the graded label.

``--grounding`` measures the grounding check instead (no judge at all): the shipped model file, on the rows it was
not trained on (FRANK split test, SummEdits split test, both QAGS sets), AUC and balanced accuracy at its fixed
threshold against the binary label, Spearman against the graded label, beside issue 15's untrained rule, the
targets and the published figures; then per SummEdits domain and per FRANK origin.

    .venv/bin/python benchmarks/bench_agreement.py --grounding

``--rag`` measures the answer judge (``rag.judge_answers``) instead, on each set recast as retrieval
(``rag.labelled.recast_as_retrieval``: each source split into passages of 3 sentences among 3 passages of other
sources, the summary as the answer to a fixed question), on the splits the grounding model was not trained on
(FRANK test, SummEdits test, both QAGS sets): the same agreement figures, and the cited-passage accuracy (the share
of supported claims whose cited passage is the right document's) with the quote failure rate.

    .venv/bin/python benchmarks/bench_agreement.py --local --sample 10 --rag

``--peers`` (default: deepeval mlflow-summarization) also runs the peers' summarization judges, in the peers' own
virtual env (``peers/run_peer.py --scores-out``), on the same sample (``meta.stratified_labelled_sample``) against the
same judge endpoint: DeepEval's ``SummarizationMetric`` (defaults; pass = score >= its threshold 0.5, its score
correlated with the graded label) and MLflow's ``Summarization`` scorer (pass = "yes"; no score to correlate). A row a
peer failed on is counted in its error rate and left out of its agreement, never scored 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_runs import MISSING, PEERS_PYTHON, run_peer, write_rows  # noqa: E402

from mlflow_genai_metrics import Judge  # noqa: E402
from mlflow_genai_metrics.local import LocalModelServer  # noqa: E402
from mlflow_genai_metrics.meta_evaluation import (  # noqa: E402
    agreement,
    answers_meta_evaluate,
    evaluation_rows,
    grounding_meta_evaluate,
    load_labelled,
    meta_evaluate,
    stratified_labelled_sample,
)
from mlflow_genai_metrics.rag.labelled import recast_as_retrieval  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
SETS = ["frank", "qags_cnndm", "qags_xsum", "summedits"]
# Published points (the shared README): balanced accuracy, or Spearman for QAGS; each with the judge it used.
PUBLISHED = {
    "frank": "SummaC-Conv 0.816, QuestEval 0.821 (balanced accuracy, SummaC benchmark split)",
    "qags_cnndm": "G-Eval (GPT-4) 0.685, AlignScore-large 0.739 (Spearman)",
    "qags_xsum": "G-Eval (GPT-4) 0.537, AlignScore-large 0.572 (Spearman)",
    "summedits": "GPT-4 0.821, Gemini-pro 0.755, Claude 2.1 0.744, QAFactEval 0.655, SummaC-Conv 0.571, humans 0.909 (balanced accuracy)",
}

# Issue 15's targets for the grounding check, on the rows it was not trained on: (figure, at least).
# Issue 27's targets (issue 15's were FRANK AUC 0.85, QAGS-XSum 0.75, QAGS-CNNDM 0.65, SummEdits 0.60)
GROUNDING_TARGETS = {"frank": ("grounding_auc", 0.88), "qags_xsum": ("grounding_auc", 0.70),
                     "qags_cnndm": ("grounding_auc", 0.75), "summedits": ("grounding_balanced_accuracy", 0.68)}
CALIBRATION_TARGET = {"frank": 0.05}
GROUNDING_SPLITS = {"frank": "test", "summedits": "test"}  # QAGS: every row (they have no split)

AGREEMENT_PEERS = ["deepeval", "mlflow-summarization"]
PEER_NAMES = {"deepeval": "DeepEval SummarizationMetric", "deepeval-no-reason": "DeepEval SummarizationMetric (no reason)",
              "mlflow-summarization": "MLflow Summarization", "ragas-faithfulness": "Ragas Faithfulness"}


def fmt(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def peer_agreement(system: str, rows: pd.DataFrame, base_url: str, model: str, concurrency: int) -> tuple[dict[str, float], dict]:
    """Run a peer on the labelled rows; its agreement with the labels (empty when it wrote no scores) and its status."""
    with tempfile.TemporaryDirectory(prefix="mgm-agreement-peer-") as tmp:
        rows_file = write_rows(Path(tmp) / "rows.jsonl", rows["source"], rows["summary"], rows["id"])
        scores_file = Path(tmp) / "scores.jsonl"
        status = run_peer(system, rows_file, base_url, model, "--concurrency", str(concurrency), "--scores-out", str(scores_file))
        scores = [json.loads(line) for line in scores_file.read_text().splitlines()] if scores_file.exists() else []
    return (scores_agreement(rows, scores) if len(scores) == len(rows) else {}), status


def scores_agreement(rows: pd.DataFrame, scores: list[dict]) -> dict[str, float]:
    """A peer's per-row records ({"score", "passed", "error"}, in the rows' order) against the human labels: a row
    the peer failed on counts in ``judge_error_rate`` and is left out of every other figure (not scored 0)."""
    failed = [bool(s.get("error")) for s in scores]
    passed = [math.nan if bad or s.get("passed") is None else float(s["passed"]) for s, bad in zip(scores, failed)]
    score = [math.nan if bad or s.get("score") is None else float(s["score"]) for s, bad in zip(scores, failed)]
    metrics, _ = agreement(rows["human_binary"], passed, rows["human_graded"], score)
    judged = [p for p in passed if not math.isnan(p)]
    metrics.update(rows=float(len(rows)), judge_error_rate=sum(failed) / len(rows) if len(rows) else math.nan,
                   judge_pass_rate=sum(judged) / len(judged) if judged else math.nan,
                   human_consistent_rate=float(rows["human_binary"].mean()))
    return metrics


def row(name: str, system: str, m: dict[str, float], published: str) -> str:
    return (f"| {name} | {system} | {int(m['rows'])} | {fmt(m['balanced_accuracy'])} | {fmt(m['cohen_kappa'])} | {fmt(m['spearman'])} | "
            f"{fmt(m['kendall'])} | {fmt(m['judge_error_rate'])} | {fmt(m['judge_pass_rate'])} | {fmt(m['human_consistent_rate'])} | {published} |")


def grounding_lines(sets: list[str], sample: int | None = None) -> list[str]:
    """The grounding check's agreement table (and per-group tables), from the shipped model file."""
    from mlflow_genai_metrics.grounding import MODEL_FILE, load_model

    model = load_model()
    lines = [f"grounding model `{model.tag}` (read from `{MODEL_FILE.name}`), grounded at >= {model.threshold:.4f}; "
             f"untrained rule at >= {model.meta['untrained_rule']['threshold']:.4f} (both fixed on the training splits)", "",
             "| set | rows | people's consistent rate | grounding AUC | grounding balanced accuracy | grounding Spearman | grounded rate "
             "| calibration error | unscored | rule AUC | rule balanced accuracy | rule Spearman | target | published (judge) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups, reliability = [], []
    for name in sets:
        split = GROUNDING_SPLITS.get(name)
        rows = evaluation_rows(load_labelled(DATA / f"{name}.jsonl"), name, split)
        rows = stratified_labelled_sample(rows, sample)
        by = next((c for c in ("domain", "origin") if c in rows.columns), None)
        report = grounding_meta_evaluate(rows, by=by)
        m = report.metrics
        figure, least = GROUNDING_TARGETS[name]
        target = f"{'AUC' if figure == 'grounding_auc' else 'balanced accuracy'} >= {least:.2f}: {'met' if m[figure] >= least else 'not met'}"
        if name in CALIBRATION_TARGET:
            most = CALIBRATION_TARGET[name]
            target += f"; calibration error <= {most:.2f}: {'met' if m['grounding_calibration_error'] <= most else 'not met'}"
        lines.append(f"| {name} | {int(m['rows'])} ({split or 'all'}) | {fmt(m['human_consistent_rate'])} | {fmt(m['grounding_auc'])} | "
                     f"{fmt(m['grounding_balanced_accuracy'])} | {fmt(m['grounding_spearman'])} | {fmt(m['grounded_rate'])} | "
                     f"{fmt(m['grounding_calibration_error'])} | {int(m['unscored'])} | "
                     f"{fmt(m['rule_auc'])} | {fmt(m['rule_balanced_accuracy'])} | {fmt(m['rule_spearman'])} | {target} | {PUBLISHED[name]} |")
        for _, group in report.groups.iterrows():
            groups.append(f"| {name} | {by} {group[by]} | {int(group['rows'])} | {fmt(group['human_consistent_rate'])} | {fmt(group['grounding_auc'])} | "
                          f"{fmt(group['grounding_balanced_accuracy'])} | {fmt(group['grounded_rate'])} | {fmt(group['rule_auc'])} | {fmt(group['rule_balanced_accuracy'])} |")
        points = report.reliability
        reliability.append(f"| {name} | " + " | ".join(
            f"{fmt(p['mean_probability'])} / {fmt(p['consistent_rate'])} ({int(p['rows'])})" if p["rows"] else "-" for _, p in points.iterrows()) + " |")
    if reliability:  # the reliability diagram as a table: a calibrated grounding has the two figures of a cell equal
        bins = [str(b) for b in points["bin"]]
        lines += ["", "Reliability (per tenth of `grounding`: mean grounding / people's consistent rate (rows)):", "",
                  f"| set | {' | '.join(bins)} |", "|---|" + "---|" * len(bins), *reliability]
    if groups:
        lines += ["", "| set | group | rows | people's consistent rate | grounding AUC | grounding balanced accuracy | grounded rate | rule AUC | rule balanced accuracy |",
                  "|---|---|---|---|---|---|---|---|---|", *groups]
    return lines


def rag_lines(args: argparse.Namespace, judge: Judge) -> list[str]:
    """The answer judge's agreement on each set recast as retrieval, with the cited-passage accuracy."""
    lines = [f"judge `{judge.model}`, answers: each set recast as retrieval (seed {args.seed}), {args.sample} pairs per set of its "
             "evaluation splits (stratified by the human label); the model-free check on every row of those splits", "",
             "| set | pairs | balanced accuracy | Cohen's kappa | Spearman | judge errors | judge `aligned` rate | people's consistent rate "
             "| cited-passage accuracy (supported claims) | quote failure rate | model-free check: rows | AUC (answer against its passages) "
             "| AUC (summary against its source) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.sets:
        rows = evaluation_rows(load_labelled(DATA / f"{name}.jsonl"), name, GROUNDING_SPLITS.get(name))
        recast = recast_as_retrieval(rows, seed=args.seed)
        m = answers_meta_evaluate(recast, judge=judge, sample=args.sample, seed=args.seed).metrics
        checked = stratified_labelled_sample(rows, args.check_sample, seed=args.seed)
        passages_auc, source_auc = model_free_auc(recast_as_retrieval(checked, seed=args.seed), checked)
        lines.append(f"| {name} | {int(m['rows'])} ({GROUNDING_SPLITS.get(name, 'all')}) | {fmt(m['balanced_accuracy'])} | {fmt(m['cohen_kappa'])} | "
                     f"{fmt(m['spearman'])} | {fmt(m['judge_error_rate'])} | {fmt(m['judge_aligned_rate'])} | {fmt(m['human_consistent_rate'])} | "
                     f"{fmt(m['cited_passage_accuracy'])} ({int(m['supported_claims'])}) | {fmt(m['quote_failure_rate'])} | {len(checked)} | "
                     f"{fmt(passages_auc)} | {fmt(source_auc)} |")
    return lines


def model_free_auc(recast: pd.DataFrame, rows: pd.DataFrame) -> tuple[float, float]:
    """AUC against people's binary label of the grounding check with the answer against its passages (in the order
    retrieved, distractors included), and, beside it, of the same check with the summary against its own source."""
    from sklearn.metrics import roc_auc_score

    from mlflow_genai_metrics.grounding import score_pairs

    def auc(sources, summaries, labels) -> float:
        scores = [g.grounding for g in score_pairs(list(sources), list(summaries))]
        keep = [i for i, value in enumerate(scores) if value is not None]
        labelled = [labels[i] for i in keep]
        return float(roc_auc_score(labelled, [scores[i] for i in keep])) if len(set(labelled)) == 2 else math.nan

    joined = ["\n\n".join(passages) for passages in recast["passages"]]
    return (auc(joined, recast["answer"], list(recast["human_binary"])), auc(rows["source"], rows["summary"], list(rows["human_binary"])))


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=30, help="pairs per set (default 30)")
    parser.add_argument("--sets", nargs="*", default=SETS)
    parser.add_argument("--local", action="store_true", help="judge with a local model (--local-model; default SmolLM2-135M)")
    parser.add_argument("--local-model", default="smollm2-135m", choices=("smollm2-135m", "gemma3-270m"), help="the local model of --local")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a judge call may take (default: the judge's own)")
    parser.add_argument("--judge-model", default=None)
    parser.add_argument("--judge-base-url", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peers", nargs="*", default=None, help=f"also run these peers on the same sample (alone: {' '.join(AGREEMENT_PEERS)})")
    parser.add_argument("--grounding", action="store_true", help="measure the grounding check (no judge) on the splits it was not trained on")
    parser.add_argument("--peer-concurrency", type=int, default=2, help="rows each peer judges at once (default 2, as our local judge)")
    parser.add_argument("--rag", action="store_true", help="the answer judge on the sets recast as retrieval (their evaluation splits)")
    parser.add_argument("--check-sample", type=int, default=None, help="with --rag: the model-free check on this many rows per set (default: all)")
    args = parser.parse_args(argv)
    peers = (args.peers or AGREEMENT_PEERS) if args.peers is not None else []
    if not DATA.exists():
        print(f"skipped: the labelled sets are not at {DATA} (../shared/data beside the project)")
        return []
    if args.grounding:  # every row unless --sample is given explicitly
        lines = grounding_lines(args.sets, args.sample if "--sample" in (argv or []) else None)
        print("\n".join(lines))
        return lines
    lines = []
    with contextlib.ExitStack() as stack:
        if args.local:
            server = stack.enter_context(LocalModelServer(args.local_model))
            judge = Judge(server.model_id, server.base_url, max_concurrency=2, context_window=server.n_ctx,
                          **({"timeout_s": args.timeout} if args.timeout else {}))
        else:
            judge = Judge(args.judge_model, args.judge_base_url, context_window=None)
        lines += [f"judge `{judge.model}`, {args.sample} pairs per set (stratified by the human label, seed {args.seed})", "",
                  "| set | system (judge) | pairs | balanced accuracy | Cohen's kappa | Spearman | Kendall | judge errors | judge pass rate | people's consistent rate | published (judge) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        if peers and not PEERS_PYTHON.exists():
            print(MISSING)
            peers = []
        notes = []
        if args.rag:
            lines = rag_lines(args, judge)
            print("\n".join(lines))
            return lines
        for name in args.sets:
            labelled = load_labelled(DATA / f"{name}.jsonl")
            report = meta_evaluate(labelled, judge=judge, sample=args.sample, seed=args.seed)
            lines.append(row(name, f"ours: `aligned`, `support_rate` ({judge.model})", {**report.metrics, "judge_pass_rate": report.metrics["judge_aligned_rate"]}, PUBLISHED[name]))
            rows = stratified_labelled_sample(labelled, args.sample, seed=args.seed)  # the sample meta_evaluate judged
            for system in peers:
                metrics, status = peer_agreement(system, rows, judge.base_url, judge.model, args.peer_concurrency)
                if not metrics:
                    lines.append(f"| {name} | {PEER_NAMES.get(system, system)} ({judge.model}) | did not run: {str(status.get('error_sample', ''))[-200:]!r} |")
                    continue
                lines.append(row(name, f"{PEER_NAMES.get(system, system)} ({judge.model})", metrics, "same sample"))
                failures = f", e.g. {' '.join(status['error_sample'].split())[:240]}" if status.get("error_sample") else ""
                notes.append(f"- {name}, {system}: {int(status['errors'])} of {len(rows)} rows failed{failures}; {status['wall_s'] / len(rows):.0f} s per row")
        lines += [""] + notes if notes else []
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
