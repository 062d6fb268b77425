"""``mgm meta-eval``, ``mgm agreement``, ``mgm align`` and ``mgm monitor``: the judge measured against people and
taught by their corrections, and traces scored; ``mgm label-sample`` and ``mgm people``: a random sample of a run's
rows for people to label, and people's rate estimated from their labels (``tracking.labels``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import (
    EXIT_EVALUATION_FAILED,
    EXIT_OK,
    figure,
    judge_options,
    make_judge,
    method_arguments,
    method_options,
    positive_int,
    prepare_experiment,
    set_tracking,
    share,
    tracking_option,
)


def meta_eval(args: argparse.Namespace) -> int:
    from ..meta_evaluation import answers_meta_evaluate, evaluation_rows, grounding_meta_evaluate, load_labelled, meta_evaluate

    data = Path(args.data)
    labelled = load_labelled(args.data)
    if args.by is not None and args.by not in labelled.columns:
        raise ValueError(f"--by {args.by!r}: {data.name} has no such column; it has {list(labelled.columns)}")
    if args.plot:
        _check_plot_path(Path(args.plot))  # before any row is judged, not after
    if args.task == "rag" and args.grounding_only:
        raise ValueError("--grounding-only measures the grounding check on summaries: leave out --task rag")
    if not args.no_log:
        set_tracking(args)
        from ..tracking.agreement import log_meta_report, report_experiment

        prepare_experiment(args.experiment)  # a new one keeps its artifacts beside a local SQLite store
        experiment_id = report_experiment(args.experiment)  # a bad store fails here, before any row is judged
    if args.grounding_only:
        rows = evaluation_rows(labelled, data.name.split(".")[0], args.split)
        by = args.by or next((c for c in ("domain", "origin") if c in rows.columns), None)
        grounding = grounding_meta_evaluate(rows, by=by)
        print(f"{data.name}: {len(rows)} pairs ({args.split or 'every split it was not trained on'}); grounding model {grounding.model_tag}")
        for key, value in grounding.metrics.items():
            print(f"  {key:<32} {value:.3f}")
        if not grounding.groups.empty:
            print(grounding.groups.round(3).to_string(index=False))
        print("reliability (a calibrated grounding has mean_probability near consistent_rate in every tenth):")
        print(grounding.reliability.round(3).to_string(index=False))
        metrics, confusion, signature, groups = grounding.metrics, grounding.confusion, grounding.signature, grounding.groups
        reliability = grounding.reliability
        params = {"mgm.meta.data": data.name, "mgm.meta.mode": "grounding", "mgm.meta.split": args.split or "untrained splits", "mgm.meta.by": by}
    else:
        rag = args.task == "rag"
        if rag:  # a faithfulness set recast as retrieval; its evaluation splits only (FRANK test, SummEdits test, QAGS)
            from ..rag.labelled import recast_as_retrieval

            labelled = recast_as_retrieval(evaluation_rows(labelled, data.name.split(".")[0], args.split), seed=args.seed)
        evaluate = answers_meta_evaluate if rag else meta_evaluate
        report = evaluate(labelled, judge=make_judge(args), sample=args.sample, seed=args.seed, progress=True, **method_arguments(args))
        print(f"{data.name}{' recast as retrieval' if rag else ''}: {int(report.metrics['rows'])} pairs; judge {report.result.signature}")
        names = ("balanced_accuracy", "cohen_kappa", "spearman", "kendall", "judge_error_rate", "human_consistent_rate", "judge_aligned_rate")
        for name in (*names, *(("cited_passage_accuracy", "supported_claims", "quote_failure_rate") if rag else ())):
            print(figure(name, report.metrics))
        print(report.confusion.to_string())
        if args.plot:
            report.figure().savefig(args.plot, dpi=110)
            print(f"confusion matrix plot: {args.plot}")
        metrics, confusion, signature, groups, reliability = report.metrics, report.confusion, report.result.signature, None, None
        params = {"mgm.meta.data": data.name, "mgm.meta.mode": "answers" if rag else "judge", "mgm.meta.sample": args.sample,
                  "mgm.meta.seed": args.seed}
    if not args.no_log:
        run_id = log_meta_report(metrics, confusion, experiment_id=experiment_id, signature=signature, params=params, groups=groups, reliability=reliability)
        print(f"logged as run {run_id} (experiment {args.experiment})")
    if not args.grounding_only and metrics.get("judge_error_rate") == 1:  # a dead judge is no measurement: CI must see it
        print(f"mgm meta-eval: the judge failed on every row ({int(metrics.get('rows', 0))} pairs): nothing was measured",
              file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    return EXIT_OK


def _check_plot_path(path: Path) -> None:
    """A plot file matplotlib can write: a format it knows, in a folder that exists."""
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in formats:
        raise ValueError(f"--plot {path}: not an image file matplotlib writes; end it in one of .{', .'.join(sorted(formats))}")
    if not path.parent.is_dir():
        raise ValueError(f"--plot {path}: the folder {path.parent} does not exist")


def agreement(args: argparse.Namespace) -> int:
    from ..tracking import judge_agreement
    from ..tracking.agreement import log_agreement

    set_tracking(args)
    report = judge_agreement(args.experiment, run_id=args.run_id, name=args.name, judge_source_id=args.judge_source, log=False)
    source = f"run {report.source_run_id}" if report.source_run_id else f"experiment {args.experiment or report.experiment_id}"
    if not report.counts["pairs_used"]:
        counts = ", ".join(f"{k} {v}" for k, v in report.counts.items() if v)
        raise ValueError(f"no trace of {source} has both a judge verdict and people's under {args.name!r} ({counts or 'no trace'})")
    print(f"agreement of the judge with people on {args.name!r}, {source}:")
    for name in ("balanced_accuracy", "cohen_kappa"):
        print(figure(name, report.metrics))
    for key, value in report.counts.items():
        print(f"  {key:<24} {value}")
    print(report.confusion.to_string())
    for note in report.notes:
        print(f"NOTE: {note}")
    for line in sampled_people_lines(report, log=not args.no_log):
        print(line)
    if not args.no_log:
        print(f"logged as run {log_agreement(report)}")
    return EXIT_OK


def sampled_people_lines(report, *, log: bool) -> list[str]:
    """People's estimate of each run read that has a labelled sample (``mgm label-sample``): the run given, or the
    experiment's runs with one; logged on each run unless ``--no-log``."""
    from mlflow.tracking import MlflowClient

    from ..tracking.labels import SAMPLE_TAG, people_lines

    if report.source_run_id:
        run_ids = [report.source_run_id]
    else:
        found = MlflowClient().search_runs([report.experiment_id], filter_string=f"tags.`{SAMPLE_TAG}.seed` LIKE '%'", max_results=20)
        run_ids = [run.info.run_id for run in found]
    lines = []
    for run_id in run_ids:
        lines += [f"run {run_id}: {line}" if not report.source_run_id else line for line in people_lines(run_id, log=log)]
    return lines


def align(args: argparse.Namespace) -> int:
    from ..tracking import align_judge

    set_tracking(args)
    judge = make_judge(args)
    report = align_judge(args.experiment, judge=judge, output=args.output, run_id=args.run_id, name=args.name, held_out=args.held_out,
                         seed=args.seed, per_request=args.per_request, log=not args.no_log)
    counts = report.counts
    print(f"{counts['examples']} examples from people's feedback on {args.name!r} written to {report.output} ({report.examples.tag}); "
          f"{counts['held_out']} labelled traces held back to measure on")
    if counts["labelled_without_texts"]:
        print(f"{counts['labelled_without_texts']} labelled traces have no source and summary (the application failed on them, or they "
              "are not a summary of a source): not used")
    for label, metrics in (("without examples", report.before), ("with examples", report.after)):
        print(f"agreement with people on the held-back traces, {label}:")
        for name in ("balanced_accuracy", "cohen_kappa"):
            print(figure(name, metrics))
    failed = counts["judge_failed_before"] + counts["judge_failed_after"]
    if failed:
        print(f"the judge failed on {counts['judge_failed_before']} held-back rows without examples and {counts['judge_failed_after']} with them: left out of the figures")
    print(f"judge with them: --examples {report.output} (signature {report.signature})")
    if report.run_id:
        print(f"logged as run {report.run_id}")
    if counts["held_out"] and counts["held_out"] in (counts["judge_failed_before"], counts["judge_failed_after"]):
        print("mgm align: the judge failed on every held-back trace " + ("without" if counts["held_out"] == counts["judge_failed_before"]
              else "with") + " the examples: nothing was measured", file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    return EXIT_OK


def monitor(args: argparse.Namespace) -> int:
    from ..tracking import answer_scorers, score_traces, summarization_scorers

    set_tracking(args)
    judge = make_judge(args)
    if args.task == "rag":
        if args.no_coverage:
            raise ValueError("--no-coverage is for summaries, not for --task rag")
        judges = answer_scorers(judge, **method_arguments(args))
    else:
        judges = summarization_scorers(judge, coverage=not args.no_coverage, **method_arguments(args))
    report = score_traces(args.experiment, judges, filter_string=args.filter, max_traces=args.max_traces)
    print(f"experiment {report.experiment_id}: {report.traces_seen} traces, {report.scored} scored now "
          f"({report.judge_errors} judge errors, {report.retried} asked again after an error), {report.already_scored} already scored, {report.unusable} not a "
          f"{'question, answer and passages' if args.task == 'rag' else 'source and a summary'}, {report.deferred} left for the next pass"
          + (f", {report.application_errors} whose application failed (APPLICATION_ERROR cards)" if report.application_errors else ""))
    for warning in report.warnings:
        print(f"WARNING: {warning}")
    return EXIT_OK


def label_sample_command(args: argparse.Namespace) -> int:
    from ..tracking.labels import label_sample

    set_tracking(args)
    sample = label_sample(args.run_id, args.n, seed=args.seed, card=args.card)
    print(f"drew {len(sample.trace_ids)} of the {sample.evaluated} rows of run {sample.run_id} at random (seed {sample.seed}, recorded "
          f"on the run); people answer {sample.card!r} on each")
    print(f"label them {sample.where}")
    print(f"then: mgm people --run-id {sample.run_id}")
    return EXIT_OK


def people_command(args: argparse.Namespace) -> int:
    from ..tracking.labels import people_estimate

    set_tracking(args)
    report = people_estimate(args.run_id, log=not args.no_log)
    for line in report.lines:
        print(line)
    return EXIT_OK


def add_commands(commands) -> None:
    """Add this module's subcommands to ``mgm``'s parser."""
    meta_parser = commands.add_parser("meta-eval", help="agreement of the judge with human faithfulness labels")
    meta_parser.add_argument("data", help="a labelled .jsonl (id, source, summary, label[, label_binary]), e.g. ../shared/data/faithfulness/frank.jsonl")
    meta_parser.add_argument("--sample", type=positive_int, default=None, metavar="N", help="N pairs, stratified by the binary label (default: every pair)")
    meta_parser.add_argument("--seed", type=int, default=0, help="seed of the --sample draw")
    meta_parser.add_argument("--plot", default=None, help="save the confusion matrix as this PNG (default: no plot)")
    judge_options(meta_parser, leave_out=("batch",))
    method_options(meta_parser)
    meta_parser.add_argument("--task", choices=("summary", "rag"), default="summary",
                             help="summary: the summary judge (default); rag: the answer judge, on the set recast as retrieval (each source "
                                  "split into passages among passages of other sources, the summary as the answer; its evaluation splits "
                                  "only), with the cited-passage accuracy (docs/rag.md)")
    meta_parser.add_argument("--grounding-only", action="store_true", help="measure the grounding check (no judge) instead of the judge")
    meta_parser.add_argument("--split", default=None, help="with --grounding-only or --task rag: only this split (default: every split the grounding model was not trained on)")
    meta_parser.add_argument("--by", default=None, help="with --grounding-only: figures per value of this column (default: domain or origin)")
    meta_parser.add_argument("--experiment", default="mgm-meta-eval", help="MLflow experiment of the report's run")
    meta_parser.set_defaults(run=meta_eval)

    agreement_parser = commands.add_parser("agreement", help="agreement of the judge's feedback with people's on traces")
    source = agreement_parser.add_mutually_exclusive_group()
    source.add_argument("--experiment", default=None, help="experiment (name or id) whose traces to read (default: $MLFLOW_EXPERIMENT_NAME)")
    source.add_argument("--run-id", default=None, help="read the traces of this run only, e.g. an evaluation run (default: every trace of the experiment)")
    agreement_parser.add_argument("--name", default="claim_alignment", help="feedback name")
    agreement_parser.add_argument("--judge-source", default=None, metavar="SOURCE_ID",
                                  help="read this judge's verdicts only (its feedback's source id, e.g. the model) when several judged")
    agreement_parser.set_defaults(run=agreement)
    for reporting in (meta_parser, agreement_parser):  # both log their report as a run
        reporting.add_argument("--no-log", action="store_true", help="print the report only; log no MLflow run")
        tracking_option(reporting)
    align_parser = commands.add_parser("align", help="few-shot examples from people's corrections on traces, and the judge's agreement before and after")
    align_source = align_parser.add_mutually_exclusive_group()
    align_source.add_argument("--experiment", default=None, help="experiment (name or id) whose traces to read (default: $MLFLOW_EXPERIMENT_NAME)")
    align_source.add_argument("--run-id", default=None, help="read the traces of this run only (default: every trace of the experiment)")
    align_parser.add_argument("--name", default="claim_alignment", help="feedback name")
    align_parser.add_argument("--output", "-o", default="examples.json", help="the examples file to write (default: examples.json)")
    align_parser.add_argument("--held-out", type=share, default=0.3, metavar="SHARE",
                              help="the share of labelled traces held back to measure agreement on (default: 0.3)")
    align_parser.add_argument("--seed", type=int, default=0, help="seed of the held-back draw (default: 0)")
    align_parser.add_argument("--per-request", type=positive_int, default=3, metavar="N", help="examples shown per verification (default: 3)")
    judge_options(align_parser, leave_out=("batch",))
    align_parser.add_argument("--no-log", action="store_true", help="print the report only; log no MLflow run")
    tracking_option(align_parser)
    align_parser.set_defaults(run=align)
    monitor_parser = commands.add_parser("monitor", help="score an experiment's traces not yet scored (production monitoring)")
    monitor_parser.add_argument("--experiment", default=None, help="experiment (name or id) whose traces to score (default: $MLFLOW_EXPERIMENT_NAME)")
    monitor_parser.add_argument("--filter", default=None, help="an mlflow.search_traces filter string, e.g. \"trace.status = 'OK'\" (default: every trace)")
    monitor_parser.add_argument("--max-traces", type=positive_int, default=None, metavar="N", help="score at most N traces now, the rest on the next pass (default: all)")
    judge_options(monitor_parser, leave_out=("batch",))
    method_options(monitor_parser)
    monitor_parser.add_argument("--task", choices=("summary", "rag"), default="summary",
                                help="summary: traces whose root span holds a source and a summary (default); rag: a RAG application's "
                                     "traces, the question and answer from the root span, the passages from its RETRIEVER spans")
    monitor_parser.add_argument("--no-coverage", action="store_true", help="claim alignment and grounding only")
    tracking_option(monitor_parser)
    monitor_parser.set_defaults(run=monitor)
    sample_parser = commands.add_parser("label-sample", help="draw a random sample of a run's rows for people to label in MLflow")
    sample_parser.add_argument("--run-id", required=True, help="the evaluation run whose rows to draw from")
    sample_parser.add_argument("--n", type=positive_int, required=True, metavar="N", help="how many rows to draw")
    sample_parser.add_argument("--seed", type=int, default=None, help="seed of the draw (default: drawn from the OS; recorded on the run either way)")
    sample_parser.add_argument("--card", default=None, help="the card people answer (default: the one the run's traces carry, e.g. claim_alignment)")
    tracking_option(sample_parser)
    sample_parser.set_defaults(run=label_sample_command)
    people_parser = commands.add_parser("people", help="people's rate on a run, estimated from the labels on its sample (PPI++)")
    people_parser.add_argument("--run-id", required=True, help="the run whose sample people labelled (mgm label-sample)")
    people_parser.add_argument("--no-log", action="store_true", help="print the estimate only; log nothing on the run")
    tracking_option(people_parser)
    people_parser.set_defaults(run=people_command)
