"""``mgm evaluate``: judge the summaries in a file and log an MLflow evaluation run."""

from __future__ import annotations

import argparse
import math
import sys

from .common import (
    ARTIFACTS_FOLDER,
    DEFAULT_EXPERIMENT,
    DEFAULT_TRACKING_URI,
    EXIT_EVALUATION_FAILED,
    EXIT_OK,
    folder_argument,
    judge_options,
    make_judge,
    positive_int,
    positive_number,
    set_experiment,
    set_tracking,
    tracking_option,
)

__all__ = ["add_commands", "evaluate", "warning_lines"]


def evaluate(args: argparse.Namespace) -> int:
    import mlflow

    from ..summarization.metrics import METRICS
    from ..summarization.scoring import interval_names
    from ..tables import read_table
    from ..tracking import summarization_metrics

    data = read_table(args.data)
    if data.empty:  # mlflow.models.evaluate would fail on it with an IndexError of its own, before any metric runs
        raise ValueError(f"{args.data} has no rows: nothing to evaluate")
    missing = [c for c in (args.source_col, args.summary_col if not args.model else None, args.reference_col, args.id_col, args.category_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    if args.limit is not None:
        data = data.head(args.limit)
    if args.grounding_only and (args.judge_model or args.judge_base_url or args.judge_context):
        raise ValueError("--grounding-only asks no judge: leave out --judge-model, --judge-base-url and --judge-context")
    if args.batch_dir:
        folder_argument(args.batch_dir, "--batch-dir")
    if args.estimate:  # the prompts it would send, counted: no judge call, no run
        from ..judge.settings import environment_context_window
        from ..summarization.estimate import estimate_cost

        if args.model or args.grounding_only:
            raise ValueError("--estimate counts the judge's prompts for the summaries in the file: leave out --model and --grounding-only")
        from ..judge import Prices

        prices = Prices.coerce(args.prices)
        if prices is not None and (args.batch or args.batch_dir):  # a batch's calls cost the batch price
            prices = prices.batch()
        print(estimate_cost(data[args.source_col], data[args.summary_col], coverage=not args.no_coverage, prices=prices,
                            context_window=args.judge_context or environment_context_window(args.judge_model)).format())
        return EXIT_OK
    set_tracking(args)
    experiment = set_experiment(args)
    judge = None if args.grounding_only else make_judge(args)  # None: the grounding check alone, no judge call
    if judge is not None and (args.batch or args.batch_dir):
        judge = judge.batched(poll_s=args.batch_poll_s, files_dir=args.batch_dir, command=args.batch_command)
    elif args.batch_command:
        raise ValueError("--batch-command runs on the files of --batch-dir: give --batch-dir too")
    with mlflow.start_run(run_name=args.run_name) as run:
        if args.model:
            from ..tracking import SummarizerModel

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
    headline = [spec.name for spec in METRICS.aggregates() if spec.headline]
    headline.insert(headline.index("alignment") + 1, "strict_alignment")  # every claim supported: what the default gates read
    shown = headline + ["grounding", "grounded_rate", "judge/suspect_rate", "rougeL", "judge/calls"]
    print(f"run {run.info.run_id} ({len(data)} rows) in experiment {experiment.name!r} of {mlflow.get_tracking_uri()}")
    print(f"artifacts: {run.info.artifact_uri}")
    for name in shown:
        if name in evaluation.metrics:
            low_name, high_name, n_name = interval_names(name)
            low, high, n = (evaluation.metrics.get(key) for key in (low_name, high_name, n_name))
            if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
                interval = f"  [{low:.3f}, {high:.3f}]"
            elif n is not None:  # too few rows (or all alike) for an interval that holds its coverage
                interval = f"  (no interval from {n:.0f} row{'s' if n != 1 else ''})"
            else:
                interval = ""
            print(f"  {name:<28} {evaluation.metrics[name]:.4g}{interval}")
    for line in warning_lines(run.info.run_id):
        print(line)
    if evaluation.metrics.get("judge_error_rate") == 1.0:
        return evaluation_failed(run.info.run_id, len(data))
    return EXIT_OK


def warning_lines(run_id: str) -> list[str]:
    """``WARNING: <sentence>`` for each warning the run was logged with (its ``mgm.warning.*`` tags)."""
    from mlflow.tracking import MlflowClient

    from ..tracking.run_logging import WARNING_TAG_PREFIX

    tags = MlflowClient().get_run(run_id).data.tags
    return [f"WARNING: {tags[key]}" for key in sorted(tags) if key.startswith(WARNING_TAG_PREFIX)]


def evaluation_failed(run_id: str, rows: int) -> int:
    """Every row a judge failure: no judge metric stands on anything, so the run is marked FAILED and mgm exits 1."""
    from mlflow.tracking import MlflowClient

    from ..study import judge_failure_summary
    from ..tracking import load_run

    errors = load_run(run_id).rows["error"]
    first = next((e for e in errors.fillna("").astype(str) if e), "")
    MlflowClient().set_terminated(run_id, status="FAILED")
    detail = f"; the first error: {' '.join(first.split())}" if first else ""
    print(f"mgm evaluate: the judge failed on every row, {judge_failure_summary(errors) or rows}: run {run_id} marked FAILED{detail}", file=sys.stderr)
    return EXIT_EVALUATION_FAILED


def add_commands(commands) -> None:
    """Add this module's subcommands to ``mgm``'s parser."""
    evaluate_parser = commands.add_parser(
        "evaluate", help="judge summaries in a file and log an MLflow evaluation run",
        description=(
            "Judge the summaries in a file and log an MLflow evaluation run: metrics, the per-row, per-claim and "
            "key-point tables and plots. The run goes to --experiment (default: $MLFLOW_EXPERIMENT_NAME, else mgm) in "
            f"the tracking store --tracking-uri (default: $MLFLOW_TRACKING_URI, else {DEFAULT_TRACKING_URI}); its "
            "artifacts go to that experiment's artifact location: for an experiment mgm creates in a local SQLite "
            f"store, {ARTIFACTS_FOLDER}/<experiment>/<run id>/artifacts beside the database file (an existing "
            "experiment keeps its own). Both are printed at the end."
        ),
    )
    evaluate_parser.add_argument("data", help="a .csv, .jsonl, .json or .parquet file, one row per summary")
    evaluate_parser.add_argument("--source-col", default="text", help="column with the source articles")
    evaluate_parser.add_argument("--summary-col", default="summary", help="column with the summaries; --model writes them there")
    evaluate_parser.add_argument("--reference-col", default=None, help="column with reference summaries: adds ROUGE, BLEU and chrF (default: none)")
    evaluate_parser.add_argument("--id-col", default=None, help="column with row ids, to compare runs row by row (default: the row number)")
    evaluate_parser.add_argument("--category-col", default=None, help="column with a category, for per-category plots (default: none)")
    evaluate_parser.add_argument("--model", default=None, help="generate the summaries first with this OpenAI-compatible model, logged with the run (default: read them from --summary-col)")
    evaluate_parser.add_argument("--model-base-url", default=None, help="base URL of the candidate model's endpoint (default: as the judge's, $MGM_JUDGE_BASE_URL, else $OPENAI_BASE_URL, else OpenAI)")
    judge_options(evaluate_parser)
    evaluate_parser.add_argument("--no-coverage", action="store_true", help="skip key points and coverage")
    evaluate_parser.add_argument(
        "--grounding-only", action="store_true",
        help="no judge at all: log the model-free grounding check (and the reference and length metrics when given)",
    )
    evaluate_parser.add_argument("--ter", action="store_true", help="add TER against --reference-col (sacreBLEU; slow: about 0.8 s per row)")
    evaluate_parser.add_argument("--limit", type=positive_int, default=None, metavar="N", help="first N rows only (default: every row)")
    evaluate_parser.add_argument("--estimate", action="store_true", help="print the judge calls, tokens and cost it expects, then exit (no judge call, no run)")
    evaluate_parser.add_argument("--prices", default=None, metavar="IN,OUT[,CACHED]",
                                 help="judge prices in USD per million prompt, completion [and cached prompt] tokens: the run's cost and --estimate's (default: no cost)")
    evaluate_parser.add_argument("--max-calls", type=positive_int, default=None, help="judge calls the run may make at most; rows past it get the error budget (default: no limit)")
    evaluate_parser.add_argument("--max-cost-usd", type=positive_number, default=None, help="judge cost the run may reach at most, in USD; needs --prices (default: no limit)")
    evaluate_parser.add_argument("--batch", action="store_true",
                                 help="ask the judge through OpenAI's Batches API (half the price; answers within 24 h; a rerun resumes the batches)")
    evaluate_parser.add_argument("--batch-poll-s", type=positive_number, default=30.0, metavar="S", help="seconds between looks at a submitted batch (default: 30.0)")
    evaluate_parser.add_argument("--batch-dir", default=None, metavar="DIR",
                                 help="batch mode without the Batches API: write the batch files here, for vLLM's run_batch (implies --batch)")
    evaluate_parser.add_argument("--batch-command", default=None, metavar="CMD",
                                 help="run this on each batch file, {input} and {output} replaced by their paths, e.g. "
                                      "'vllm run_batch -i {input} -o {output} --model M' (default: stop, saying what to run)")
    evaluate_parser.add_argument("--experiment", default=None, help=f"MLflow experiment name (default: $MLFLOW_EXPERIMENT_NAME, else {DEFAULT_EXPERIMENT})")
    evaluate_parser.add_argument("--run-name", default=None, help="the MLflow run's name (default: one MLflow makes up)")
    tracking_option(evaluate_parser)
    evaluate_parser.set_defaults(run=evaluate)
