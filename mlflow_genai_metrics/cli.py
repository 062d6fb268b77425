"""The ``mgm`` command line.

    mgm evaluate data.csv --source-col text --summary-col summary [--reference-col reference]
    mgm evaluate data.jsonl --source-col text --model gpt-4o-mini      # generate the summaries first
    mgm compare RUN_ID RUN_ID ... [--log]
    mgm gate RUN_ID --model-uri models:/... --name summarizer --rule "alignment>=0.9" --rule "rougeL>=0.3"
    mgm serve smollm2-135m

Exit codes a CI pipeline can use: 0 done (gate passed), 1 gate failed or evaluation failed (the judge failed on
every row), 2 bad input or configuration (a missing column, a malformed rule, an unknown run id, model URI,
registered model or alias), said in one line ``mgm <command>: <message>`` on stderr. Any other error is a bug and
keeps its traceback. The tracking store defaults to ``$MLFLOW_TRACKING_URI``, else a local SQLite file ``mlflow.db``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

__all__ = ["main"]

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_EVALUATION_FAILED = EXIT_GATE_FAILED  # one code for "the work ran and its verdict is no"
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "mgm"


def _serve(args: argparse.Namespace) -> int:
    from .local import LocalModelServer

    with LocalModelServer(args.model, n_ctx=args.n_ctx) as server:
        print(f"serving {server.model_id} at {server.base_url}  (Ctrl-C stops it)", flush=True)
        print(f"  export MGM_JUDGE_MODEL={server.model_id} MGM_JUDGE_BASE_URL={server.base_url}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return EXIT_OK


def _tracking(args: argparse.Namespace) -> None:
    import os

    import mlflow

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri((None if args.tracking_uri else os.environ.get("MLFLOW_REGISTRY_URI")) or uri)


def _experiment(args: argparse.Namespace):
    """--experiment, else ``$MLFLOW_EXPERIMENT_NAME`` (or ``$MLFLOW_EXPERIMENT_ID``) as MLflow itself reads them, else mgm."""
    import os

    import mlflow

    if args.experiment:
        return mlflow.set_experiment(args.experiment)
    if os.environ.get("MLFLOW_EXPERIMENT_NAME"):
        return mlflow.set_experiment(os.environ["MLFLOW_EXPERIMENT_NAME"])
    if os.environ.get("MLFLOW_EXPERIMENT_ID"):
        return mlflow.set_experiment(experiment_id=os.environ["MLFLOW_EXPERIMENT_ID"])
    return mlflow.set_experiment(DEFAULT_EXPERIMENT)


def _judge(args: argparse.Namespace):
    from .judge import Judge

    return Judge(args.judge_model, args.judge_base_url, max_concurrency=args.concurrency, context_window=args.judge_context,
                 prices=getattr(args, "prices", None), max_calls=getattr(args, "max_calls", None), max_cost_usd=getattr(args, "max_cost_usd", None))


def _evaluate(args: argparse.Namespace) -> int:
    import mlflow

    from .summarization.metrics import METRICS
    from .summarization.scoring import interval_names
    from .tables import read_table
    from .tracking import summarization_metrics

    data = read_table(args.data)
    if data.empty:  # mlflow.models.evaluate would fail on it with an IndexError of its own, before any metric runs
        raise ValueError(f"{args.data} has no rows: nothing to evaluate")
    missing = [c for c in (args.source_col, args.summary_col if not args.model else None, args.reference_col, args.id_col, args.category_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    if args.limit:
        data = data.head(args.limit)
    if args.grounding_only and (args.judge_model or args.judge_base_url or args.judge_context):
        raise ValueError("--grounding-only asks no judge: leave out --judge-model, --judge-base-url and --judge-context")
    if args.estimate:  # the prompts it would send, counted: no judge call, no run
        from .summarization.estimate import estimate_cost

        if args.model or args.grounding_only:
            raise ValueError("--estimate counts the judge's prompts for the summaries in the file: leave out --model and --grounding-only")
        print(estimate_cost(data[args.source_col], data[args.summary_col], coverage=not args.no_coverage, prices=args.prices,
                            context_window=args.judge_context).format())
        return EXIT_OK
    _tracking(args)
    experiment = _experiment(args)
    judge = None if args.grounding_only else _judge(args)  # None: the grounding check alone, no judge call
    with mlflow.start_run(run_name=args.run_name) as run:
        if args.model:
            from .tracking import SummarizerModel

            candidate = SummarizerModel(args.model, args.model_base_url, input_col=args.source_col)
            info = candidate.log(name="summarizer")
            mlflow.set_tag("mgm.candidate", args.model)
            print(f"logged candidate {args.model} as {info.model_uri}")
            data = data.assign(**{args.summary_col: candidate.predict(None, data)})
        metrics = summarization_metrics(
            judge, coverage=not args.no_coverage, ter=args.ter, source_col=args.source_col, id_col=args.id_col, category_col=args.category_col, progress=True,
        )
        evaluation = mlflow.models.evaluate(
            data=data, predictions=args.summary_col, targets=args.reference_col, extra_metrics=metrics
        )
    shown = [spec.name for spec in METRICS.aggregates() if spec.headline] + ["grounding", "grounded_rate", "judge/suspect_rate", "rougeL", "judge/calls"]
    print(f"run {run.info.run_id} ({len(data)} rows) in experiment {experiment.name!r} of {mlflow.get_tracking_uri()}")
    print(f"artifacts: {run.info.artifact_uri}")
    for name in shown:
        if name in evaluation.metrics:
            low_name, high_name, _ = interval_names(name)
            low, high = evaluation.metrics.get(low_name), evaluation.metrics.get(high_name)
            interval = f"  [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
            print(f"  {name:<28} {evaluation.metrics[name]:.4g}{interval}")
    if evaluation.metrics.get("judge_error_rate") == 1.0:
        return _evaluation_failed(run.info.run_id, len(data))
    return EXIT_OK


def _evaluation_failed(run_id: str, rows: int) -> int:
    """Every row a judge failure: no judge metric stands on anything, so the run is marked FAILED and mgm exits 1."""
    from mlflow.tracking import MlflowClient

    from .study import judge_failure_summary
    from .tracking import load_run

    errors = load_run(run_id).rows["error"]
    first = next((e for e in errors.fillna("").astype(str) if e), "")
    MlflowClient().set_terminated(run_id, status="FAILED")
    detail = f"; the first error: {' '.join(first.split())}" if first else ""
    print(f"mgm evaluate: the judge failed on every row, {judge_failure_summary(errors) or rows}: run {run_id} marked FAILED{detail}", file=sys.stderr)
    return EXIT_EVALUATION_FAILED


def _compare(args: argparse.Namespace) -> int:
    from .tracking import compare_runs

    _tracking(args)
    table = compare_runs(
        args.run_ids, metrics=args.metric or None, allow_mixed_judges=args.allow_mixed_judges, allow_partial=args.allow_partial,
        log=args.log,
    )
    columns = ["run_name", "metric", "value", "ci_low", "ci_high", "n", "difference_vs_first", "p_value", "pairs_used", "pairs_dropped_for_errors"]
    with __import__("pandas").option_context("display.width", 220, "display.max_columns", 20):
        print(table[columns].to_string(index=False))
    for note in dict.fromkeys(n for n in table["note"] if n):
        print(f"note: {note}")
    if args.log:
        print(f"comparison logged as run {table.attrs['comparison_run_id']}")
    return EXIT_OK


def _gate(args: argparse.Namespace) -> int:
    from .tracking import register_if_passing

    _tracking(args)
    result = register_if_passing(
        args.model_uri, args.name, run_id=args.run_id, rules=args.rule, alias=args.alias, beat_champion=args.beat_champion
    )
    print(result)
    return EXIT_OK if result.passed else EXIT_GATE_FAILED


DEMO_NOTE = (
    "NOTE: the judge here is SmolLM2-135M, a 135-million-parameter model on this CPU. Its verdicts only demonstrate\n"
    "the pipeline: it often returns no claim for a summary that has words, which is recorded as a judge failure\n"
    "(no_claims) for that row, never as a score. grounding and grounded need no judge: they stand as they are.\n"
    "Set MGM_JUDGE_MODEL, MGM_JUDGE_BASE_URL and OPENAI_API_KEY to judge with a real model."
)
# The gate: the judge's headline and its error rate, and the model-free check (confident that most summaries are
# grounded: the Wilson lower bound of grounded_rate, so that 8 articles must be nearly all grounded to pass).
DEMO_GATE = {"alignment": ">= 0.5", "grounded_rate_ci_low": ">= 0.5", "judge_error_rate": "<= 0.25"}


def _demo(args: argparse.Namespace) -> int:
    import contextlib
    import os
    import time

    from .judge import Judge
    from .local import LocalModelServer
    from .study import Candidate, comparison_lines, format_table, load_articles, local_store, run_study, ui_command

    started = time.perf_counter()
    articles = load_articles(args.data)
    if args.limit:
        articles = articles.head(args.limit)
    store = Path(args.store)
    uri = local_store(store)
    with contextlib.ExitStack() as stack:
        print("starting local models (llama.cpp on 127.0.0.1): Gemma 3 270M and SmolLM2-135M-Instruct ...", flush=True)
        gemma = stack.enter_context(LocalModelServer("gemma3-270m"))
        smollm = stack.enter_context(LocalModelServer("smollm2-135m"))
        candidates = [
            Candidate("gemma3-270m", gemma.model_id, gemma.base_url, max_tokens=args.max_tokens),
            Candidate("smollm2-135m", smollm.model_id, smollm.base_url, max_tokens=args.max_tokens),
        ]
        local_judge = not os.environ.get("MGM_JUDGE_MODEL")
        if local_judge:
            judge = Judge(smollm.model_id, smollm.base_url, max_concurrency=2, context_window=smollm.n_ctx)
        else:
            judge = Judge(max_concurrency=args.concurrency)
        print(f"judge: {judge.model} at {judge.shown_url}; {len(articles)} articles; MLflow store {uri}", flush=True)
        result = run_study(
            articles, candidates, judge, experiment="mgm-demo", artifact_location=store / "artifacts",
            gate_rules=DEMO_GATE, candidate_concurrency=2,
        )
    print("\n" + format_table(result.table))
    print("\nby category (alignment, richness, grounding):")
    print(result.by_category.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for name, failures in result.judge_failures.items():
        print(f"the judge failed on {failures} of {name}'s summaries: those rows have no score and count in judge_error_rate")
    if result.comparison_refused:
        print(f"comparison not made: {result.comparison_refused}")
    if result.comparison is not None:
        print("\n".join(comparison_lines(result.comparison)))
    for name, gate in result.gates.items():
        print(f"\ngate for {name}: {gate}")
    if local_judge:
        print("\n" + DEMO_NOTE)
    print(f"\ndone in {time.perf_counter() - started:.0f} s. Open the runs in the MLflow UI:\n  {ui_command(uri)}")
    return EXIT_OK


def _figure(name: str, metrics: dict[str, float], width: int = 24) -> str:
    """``name  value  [low, high]  n=..`` where the metric has an interval, else ``name  value``."""
    from .summarization.scoring import interval_names

    low, high, n = (metrics.get(k) for k in interval_names(name))
    interval = f"  [{low:.3f}, {high:.3f}]  n={n:.0f}" if low is not None and high is not None and n is not None else ""
    return f"  {name:<{width}} {metrics[name]:.3f}{interval}"


def _meta_eval(args: argparse.Namespace) -> int:
    from .meta import evaluation_rows, grounding_meta_evaluate, load_labelled, meta_evaluate

    data = Path(args.data)
    labelled = load_labelled(args.data)
    if not args.no_log:
        _tracking(args)
        from .tracking.agreement import log_meta_report, report_experiment

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
        metrics, confusion, signature, groups = grounding.metrics, grounding.confusion, grounding.signature, grounding.groups
        params = {"mgm.meta.data": data.name, "mgm.meta.mode": "grounding", "mgm.meta.split": args.split or "untrained splits", "mgm.meta.by": by}
    else:
        report = meta_evaluate(labelled, judge=_judge(args), sample=args.sample, seed=args.seed, progress=True)
        print(f"{data.name}: {int(report.metrics['rows'])} pairs; judge {report.result.signature}")
        for name in ("balanced_accuracy", "cohen_kappa", "spearman", "kendall", "judge_error_rate", "human_consistent_rate", "judge_aligned_rate"):
            print(_figure(name, report.metrics))
        print(report.confusion.to_string())
        if args.plot:
            report.figure().savefig(args.plot, dpi=110)
            print(f"confusion matrix plot: {args.plot}")
        metrics, confusion, signature, groups = report.metrics, report.confusion, report.result.signature, None
        params = {"mgm.meta.data": data.name, "mgm.meta.mode": "judge", "mgm.meta.sample": args.sample, "mgm.meta.seed": args.seed}
    if not args.no_log:
        run_id = log_meta_report(metrics, confusion, experiment_id=experiment_id, signature=signature, params=params, groups=groups)
        print(f"logged as run {run_id} (experiment {args.experiment})")
    return EXIT_OK


def _agreement(args: argparse.Namespace) -> int:
    from .tracking import judge_agreement
    from .tracking.agreement import log_agreement

    _tracking(args)
    report = judge_agreement(args.experiment, run_id=args.run_id, name=args.name, log=False)
    source = f"run {report.source_run_id}" if report.source_run_id else f"experiment {args.experiment or report.experiment_id}"
    if not report.counts["pairs_used"]:
        counts = ", ".join(f"{k} {v}" for k, v in report.counts.items() if v)
        raise ValueError(f"no trace of {source} has both a judge verdict and people's under {args.name!r} ({counts or 'no trace'})")
    print(f"agreement of the judge with people on {args.name!r}, {source}:")
    for name in ("balanced_accuracy", "cohen_kappa"):
        print(_figure(name, report.metrics))
    for key, value in report.counts.items():
        print(f"  {key:<24} {value}")
    print(report.confusion.to_string())
    if not args.no_log:
        print(f"logged as run {log_agreement(report)}")
    return EXIT_OK


def _monitor(args: argparse.Namespace) -> int:
    from .tracking import ClaimAlignment, Grounding, KeyPointCoverage, score_traces

    _tracking(args)
    judge = _judge(args)
    judges = [ClaimAlignment(judge), *([] if args.no_coverage else [KeyPointCoverage(judge)]), Grounding()]
    report = score_traces(args.experiment, judges, filter_string=args.filter, max_traces=args.max_traces)
    print(f"experiment {report.experiment_id}: {report.traces_seen} traces, {report.scored} scored now "
          f"({report.judge_errors} judge errors), {report.already_scored} already scored, {report.unusable} not a "
          f"source and a summary, {report.deferred} left for the next pass")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mgm", description="LLM-as-a-judge summarization metrics for MLflow.")
    commands = parser.add_subparsers(dest="command", required=True)

    def tracking_option(command: argparse.ArgumentParser) -> None:
        command.add_argument("--tracking-uri", default=None, help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI})")

    serve = commands.add_parser("serve", help="serve a local model (llama.cpp) on 127.0.0.1 as an OpenAI-compatible endpoint")
    serve.add_argument("model", nargs="?", default="smollm2-135m", help="smollm2-135m, gemma3-270m or a path to a .gguf file")
    serve.add_argument("--n-ctx", type=int, default=8192, help="context window in tokens (default 8192)")
    serve.set_defaults(run=_serve)

    demo = commands.add_parser("demo", help="the whole loop on local models: summarize, judge, log, compare, gate")
    demo.add_argument("--data", default=None, help="articles file (default: the eight that ship with the package); the BBC jsonl works as is")
    demo.add_argument("--limit", type=int, default=None, help="first N articles only")
    demo.add_argument("--store", default="mgm-demo", help="folder for the SQLite MLflow store and artifacts (default: ./mgm-demo)")
    demo.add_argument("--max-tokens", type=int, default=200, help="summary length limit for the candidates (default 200)")
    demo.add_argument("--concurrency", type=int, default=8, help="judge calls in flight, for a remote judge (default 8)")
    demo.set_defaults(run=_demo)

    evaluate = commands.add_parser(
        "evaluate", help="judge summaries in a file and log an MLflow evaluation run",
        description=(
            "Judge the summaries in a file and log an MLflow evaluation run: metrics, the per-row, per-claim and "
            "key-point tables and plots. The run goes to --experiment (default: $MLFLOW_EXPERIMENT_NAME, else mgm) in "
            f"the tracking store --tracking-uri (default: $MLFLOW_TRACKING_URI, else {DEFAULT_TRACKING_URI}); its "
            "artifacts go to that experiment's artifact location (for a new experiment in a local SQLite store, "
            "./mlruns/<experiment id>/<run id>/artifacts under the current folder), printed at the end."
        ),
    )
    evaluate.add_argument("data", help="a .csv, .jsonl, .json or .parquet file")
    evaluate.add_argument("--source-col", default="text", help="column with the source articles (default: text)")
    evaluate.add_argument("--summary-col", default="summary", help="column with the summaries (default: summary)")
    evaluate.add_argument("--reference-col", default=None, help="column with reference summaries (adds ROUGE, BLEU, chrF)")
    evaluate.add_argument("--id-col", default=None, help="column with row ids (to compare runs row by row)")
    evaluate.add_argument("--category-col", default=None, help="column with a category (per-category plots)")
    evaluate.add_argument("--model", default=None, help="generate the summaries first with this OpenAI-compatible model")
    evaluate.add_argument("--model-base-url", default=None, help="base URL of the candidate model's endpoint")
    evaluate.add_argument("--judge-model", default=None, help="judge model (default: $MGM_JUDGE_MODEL)")
    evaluate.add_argument("--judge-base-url", default=None, help="judge endpoint (default: $MGM_JUDGE_BASE_URL, else OpenAI)")
    evaluate.add_argument("--judge-context", type=int, default=None, help="the judge's context window in tokens (long sources are chunked)")
    evaluate.add_argument("--concurrency", type=int, default=8, help="judge calls in flight at once (default 8)")
    evaluate.add_argument("--no-coverage", action="store_true", help="skip key points and coverage")
    evaluate.add_argument(
        "--grounding-only", action="store_true",
        help="no judge at all: log the model-free grounding check (and the reference and length metrics when given)",
    )
    evaluate.add_argument("--ter", action="store_true", help="add TER against --reference-col (sacreBLEU; slow: about 0.8 s per row)")
    evaluate.add_argument("--limit", type=int, default=None, help="first N rows only")
    evaluate.add_argument("--estimate", action="store_true", help="print the judge calls, tokens and cost it expects, then exit (no judge call, no run)")
    evaluate.add_argument("--prices", default=None, metavar="IN,OUT[,CACHED]",
                          help="judge prices in USD per million prompt, completion [and cached prompt] tokens: the run's cost and --estimate's")
    evaluate.add_argument("--max-calls", type=int, default=None, help="judge calls the run may make at most (rows past it get the error budget)")
    evaluate.add_argument("--max-cost-usd", type=float, default=None, help="judge cost the run may reach at most, in USD (needs --prices)")
    evaluate.add_argument("--experiment", default=None, help=f"MLflow experiment name (default: $MLFLOW_EXPERIMENT_NAME, else {DEFAULT_EXPERIMENT})")
    evaluate.add_argument("--run-name", default=None)
    tracking_option(evaluate)
    evaluate.set_defaults(run=_evaluate)

    meta = commands.add_parser("meta-eval", help="agreement of the judge with human faithfulness labels")
    meta.add_argument("data", help="a labelled .jsonl (id, source, summary, label[, label_binary]), e.g. ../shared/data/faithfulness/frank.jsonl")
    meta.add_argument("--sample", type=int, default=None, help="N pairs, stratified by the binary label")
    meta.add_argument("--seed", type=int, default=0)
    meta.add_argument("--plot", default=None, help="save the confusion matrix as this PNG")
    meta.add_argument("--judge-model", default=None, help="judge model (default: $MGM_JUDGE_MODEL)")
    meta.add_argument("--judge-base-url", default=None, help="judge endpoint (default: $MGM_JUDGE_BASE_URL, else OpenAI)")
    meta.add_argument("--judge-context", type=int, default=None, help="the judge's context window in tokens")
    meta.add_argument("--concurrency", type=int, default=8)
    meta.add_argument("--grounding-only", action="store_true", help="measure the grounding check (no judge) instead of the judge")
    meta.add_argument("--split", default=None, help="with --grounding-only: only this split (default: every split the model was not trained on)")
    meta.add_argument("--by", default=None, help="with --grounding-only: figures per value of this column (default: domain or origin)")
    meta.add_argument("--experiment", default="mgm-meta-eval", help="MLflow experiment of the report's run (default: mgm-meta-eval)")
    meta.set_defaults(run=_meta_eval)

    agreement = commands.add_parser("agreement", help="agreement of the judge's feedback with people's on traces")
    source = agreement.add_mutually_exclusive_group()
    source.add_argument("--experiment", default=None, help="experiment (name or id) whose traces to read (default: $MLFLOW_EXPERIMENT_NAME)")
    source.add_argument("--run-id", default=None, help="read the traces of this run only (e.g. an evaluation run)")
    agreement.add_argument("--name", default="claim_alignment", help="feedback name (default: claim_alignment)")
    agreement.set_defaults(run=_agreement)
    for reporting in (meta, agreement):  # both log their report as a run
        reporting.add_argument("--no-log", action="store_true", help="print the report only; log no MLflow run")
        tracking_option(reporting)

    monitor = commands.add_parser("monitor", help="score an experiment's traces not yet scored (production monitoring)")
    monitor.add_argument("--experiment", default=None, help="experiment (name or id) whose traces to score (default: $MLFLOW_EXPERIMENT_NAME)")
    monitor.add_argument("--filter", default=None, help="an mlflow.search_traces filter string, e.g. \"trace.status = 'OK'\"")
    monitor.add_argument("--max-traces", type=int, default=None, help="score at most N traces now (the rest on the next pass)")
    monitor.add_argument("--judge-model", default=None, help="judge model (default: $MGM_JUDGE_MODEL)")
    monitor.add_argument("--judge-base-url", default=None, help="judge endpoint (default: $MGM_JUDGE_BASE_URL, else OpenAI)")
    monitor.add_argument("--judge-context", type=int, default=None, help="the judge's context window in tokens")
    monitor.add_argument("--concurrency", type=int, default=8, help="judge calls in flight at once (default 8)")
    monitor.add_argument("--no-coverage", action="store_true", help="claim alignment and grounding only")
    tracking_option(monitor)
    monitor.set_defaults(run=_monitor)

    compare = commands.add_parser("compare", help="compare evaluation runs (paired bootstrap against the first)")
    compare.add_argument("run_ids", nargs="+")
    compare.add_argument("--metric", action="append", help="a metric to show (repeatable; default: the main ones)")
    compare.add_argument("--allow-mixed-judges", action="store_true", help="compare runs judged with different signatures")
    compare.add_argument(
        "--allow-partial", action="store_true",
        help="compare even when fewer usable pairs (same id and source, judged on both sides) than half of the smaller run remain",
    )
    compare.add_argument("--log", action="store_true", help="also log the comparison as a run (table and plots) in the first run's experiment")
    tracking_option(compare)
    compare.set_defaults(run=_compare)

    gate = commands.add_parser("gate", help="register a model only if its evaluation run passes every rule")
    gate.add_argument("run_id")
    gate.add_argument("--model-uri", required=True)
    gate.add_argument("--name", required=True, help="registered model name")
    gate.add_argument("--rule", action="append", required=True, help='e.g. "alignment>=0.9" (repeatable)')
    gate.add_argument("--alias", default="champion")
    gate.add_argument("--beat-champion", action="store_true", help="also require a significant alignment gain over the alias holder")
    tracking_option(gate)
    gate.set_defaults(run=_gate)
    return parser


def _quiet_mlflow() -> None:
    """Our own progress bars and tables are the output; MLflow's info lines and artifact bars would drown them.
    Warnings are not filtered: the code that caused them is fixed instead (tests/test_quiet.py)."""
    import logging
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow  # noqa: F401  (MLflow configures its loggers on import: quieten them after that)

    logging.getLogger("mlflow").setLevel(logging.WARNING)


def _bad_input(error: Exception) -> bool:
    """Bad input or configuration: ours (ValueError and its kin), or MLflow saying a name is unknown or a value invalid."""
    from mlflow.exceptions import MlflowException

    from .judge import JudgeConfigError
    from .tracking.errors import is_bad_input

    if isinstance(error, MlflowException):  # MLflow says what went wrong through its error code
        return is_bad_input(error)
    return isinstance(error, (ValueError, FileNotFoundError, JudgeConfigError))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_mlflow()
    try:
        return args.run(args)
    except Exception as exc:
        if not _bad_input(exc):
            raise  # a bug: its traceback shows
        print(f"mgm {args.command}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
