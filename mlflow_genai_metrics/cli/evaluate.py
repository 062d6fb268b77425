"""``mgm evaluate``: judge the summaries in a file and log an MLflow evaluation run.

The table's rows go through ``evaluate_summaries`` (``mlflow.genai.evaluate``): the run has one trace per row and
one card per judge per row, which people can label (``mgm agreement``), and its figures are the rows of this
evaluation. What it prints is read from the evaluation in memory, values to 3 significant digits."""

from __future__ import annotations

import argparse
import logging
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
    method_arguments,
    method_options,
    positive_int,
    set_experiment,
    set_tracking,
    tracking_option,
)
from .run_output import report_evaluation


class _SaidByTheCommand(logging.Filter):
    """Leaves out the warning a run without figures is logged with: the command prints that sentence itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("no results logged for run ")


_SAID_BY_THE_COMMAND = _SaidByTheCommand()


def evaluate(args: argparse.Namespace) -> int:
    import mlflow

    from ..judge import preflight
    from ..tables import read_table, table_records
    from ..tracking.evaluate import RunRowsMismatch, evaluate_summaries, named_rows
    from ..tracking.genai import parse_row, unique_ids
    from ..tracking.model import SummariesFailed

    method = method_arguments(args)  # a bad --stability, --order-check or --examples: said before the data is read or a judge made
    texts = {"summary": (args.source_col, args.summary_col, args.reference_col), "rag": (args.question_col, args.answer_col, args.expected_col),
             "rewrite": (args.input_col, args.rewrite_col, args.instruction_col)}[args.task]
    data = read_table(args.data, text_columns=[column for column in (*texts, args.id_col, getattr(args, "category_col", None)) if column])
    if data.empty:
        raise ValueError(f"{args.data} has no rows: nothing to evaluate")
    if args.limit is not None:
        data = data.head(args.limit)
    from .tasks import evaluate_rag, evaluate_rewrites, refuse_other_tasks

    if args.task != "summary":
        return (evaluate_rag if args.task == "rag" else evaluate_rewrites)(args, data)
    refuse_other_tasks(args)
    missing = [c for c in (args.source_col, args.summary_col if not args.model else None, args.reference_col, args.id_col, args.category_col) if c and c not in data.columns]
    if missing:
        raise ValueError(f"{args.data} has no column {missing}; it has {list(data.columns)}")
    if args.grounding_only and (args.judge_model or args.judge_base_url or args.judge_context):
        raise ValueError("--grounding-only asks no judge: leave out --judge-model, --judge-base-url and --judge-context")
    if args.batch_dir:
        folder_argument(args.batch_dir, "--batch-dir")
    if args.estimate:
        return estimate(args, data, method)
    # rows whose ids repeat: refused before a run is started (evaluate_summaries would refuse them inside it)
    records = table_records(data, source_col=args.source_col, summary_col=None, id_col=args.id_col)
    unique_ids(named_rows(records, lambda record: parse_row(record["inputs"], None), "id"))
    set_tracking(args)
    experiment = set_experiment(args)
    judge = None if args.grounding_only else make_judge(args, batch_files=True)  # None: the grounding check alone, no judge call
    if judge is not None:  # a wrong model, a refused key or no endpoint: said before a run is started or a summary written
        preflight(judge)
    if args.model:  # the candidate's endpoint likewise, before a run is started or the candidate logged
        from ..generate import check_generator

        check_generator(args.model, args.model_base_url, fix=f"--model {args.model} and --model-base-url")
    said = logging.getLogger("mlflow_genai_metrics.tracking.rows")
    said.addFilter(_SAID_BY_THE_COMMAND)  # RunRowsMismatch's sentence is printed below, once
    try:
        with mlflow.start_run(run_name=args.run_name) as run:
            data, model_id = candidate_summaries(args, data) if args.model else (data, None)
            records = table_records(data, source_col=args.source_col, summary_col=args.summary_col, id_col=args.id_col,
                                    category_col=args.category_col, reference_col=args.reference_col)
            judges = evaluation_judges(judge, coverage=not args.no_coverage, **method)
            evaluation = evaluate_summaries(records, judges, model_id=model_id, all_metrics=args.all_metrics, ter=args.ter)
    except (RunRowsMismatch, SummariesFailed) as error:  # the run ended FAILED (a mismatch: tagged mgm.error, the same sentence)
        print(f"mgm evaluate: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_EVALUATION_FAILED
    finally:
        said.removeFilter(_SAID_BY_THE_COMMAND)
    return report_evaluation(run, experiment, evaluation, f"{len(data)} rows")


def candidate_summaries(args: argparse.Namespace, data):
    """``--model``: the candidate logged with the active run (tag ``mgm.candidate``) and its summaries written into
    ``--summary-col``; returns the table and the logged model's id, which the evaluation links to the run."""
    import mlflow

    from ..tracking import SummarizerModel

    candidate = SummarizerModel(args.model, args.model_base_url, input_col=args.source_col)
    info = candidate.log(name="summarizer")
    mlflow.set_tag("mgm.candidate", args.model)
    print(f"logged candidate {args.model} as {info.model_uri}")
    return data.assign(**{args.summary_col: candidate.predict(None, data)}), info.model_id


def estimate(args: argparse.Namespace, data, method: dict) -> int:
    """``--estimate``: the prompts judging would send, counted and priced (claims verified as ``method`` says); no
    judge call, no run."""
    from ..judge import Prices, environment_context_window
    from ..summarization.estimate import estimate_cost

    if args.model or args.grounding_only:
        raise ValueError("--estimate counts the judge's prompts for the summaries in the file: leave out --model and --grounding-only")
    prices = Prices.coerce(args.prices)
    if prices is not None and (args.batch or args.batch_dir):  # a batch's calls cost the batch price
        prices = prices.batch()
    print(estimate_cost(data[args.source_col], data[args.summary_col], coverage=not args.no_coverage, prices=prices,
                        context_window=args.judge_context or environment_context_window(args.judge_model),
                        **method).format())
    return EXIT_OK


def evaluation_judges(judge, *, coverage: bool, **method) -> list:
    """``ClaimAlignment``, ``KeyPointCoverage`` (unless ``coverage=False``) and ``Grounding`` on ``judge``, claims
    verified as ``method`` says (``stability``, ``order_check``, ``examples``); ``Grounding`` alone when there is no
    judge (``method`` then refused: nothing is verified)."""
    from ..summarization.method import Method
    from ..tracking import Grounding, summarization_scorers

    if judge is None:
        given = [name for name, value in method.items() if value != Method.model_fields[name].default]
        if given:
            raise ValueError(f"--grounding-only asks no judge, so no claim is verified: leave out {', '.join('--' + k.replace('_', '-') for k in given)}")
        return [Grounding()]
    return summarization_scorers(judge, coverage=coverage, **method)


def add_commands(commands) -> None:
    """Add this module's subcommands to ``mgm``'s parser."""
    evaluate_parser = commands.add_parser(
        "evaluate", help="judge summaries in a file and log an MLflow evaluation run",
        description=(
            "Judge the summaries in a file and log an MLflow evaluation run (mlflow.genai.evaluate): one trace per "
            "row with one card per judge, which people can label (mgm agreement), the headline metrics with their "
            "intervals, the per-row, per-claim and key-point tables and plots. The run goes to --experiment (default: $MLFLOW_EXPERIMENT_NAME, else mgm) in "
            f"the tracking store --tracking-uri (default: $MLFLOW_TRACKING_URI, else {DEFAULT_TRACKING_URI}); its "
            "artifacts go to that experiment's artifact location: for an experiment mgm creates in a local SQLite "
            f"store, {ARTIFACTS_FOLDER}/<experiment>/<run id>/artifacts beside the database file (an existing "
            "experiment keeps its own). Both are printed at the end."
        ),
    )
    evaluate_parser.add_argument("data", help="a .csv, .jsonl, .json or .parquet file, one row per summary (or answer, with --task rag)")
    evaluate_parser.add_argument("--task", choices=("summary", "rag", "rewrite"), default="summary",
                                 help="summary: summaries against their sources (default); rag: answers against the passages retrieved for "
                                      "their questions, claim by claim with the passage and quote cited (docs/rag.md); rewrite: rewrites "
                                      "against their inputs and instruction (docs/rewrites.md)")
    evaluate_parser.add_argument("--question-col", default="question", help="--task rag: column with the questions")
    evaluate_parser.add_argument("--passages-col", default="passages", help="--task rag: column with each row's retrieved passages (a list of texts; in a CSV, a JSON list)")
    evaluate_parser.add_argument("--answer-col", default="answer", help="--task rag: column with the answers")
    evaluate_parser.add_argument("--expected-col", default=None, help="--task rag: column with expected answers: adds context sufficiency and answer recall (default: none)")
    evaluate_parser.add_argument("--input-col", default="input", help="--task rewrite: column with the texts that were rewritten")
    evaluate_parser.add_argument("--rewrite-col", default="rewrite", help="--task rewrite: column with the rewrites")
    evaluate_parser.add_argument("--instruction", default=None, help="--task rewrite: the instruction every rewrite was written to")
    evaluate_parser.add_argument("--instruction-col", default=None, help="--task rewrite: column with each row's instruction")
    evaluate_parser.add_argument("--source-col", default="text", help="column with the source articles")
    evaluate_parser.add_argument("--summary-col", default="summary", help="column with the summaries; --model writes them there")
    evaluate_parser.add_argument("--reference-col", default=None, help="column with reference summaries: adds ROUGE, BLEU and chrF (default: none)")
    evaluate_parser.add_argument("--id-col", default=None, help="column with row ids, to compare runs row by row (default: the row number)")
    evaluate_parser.add_argument("--category-col", default=None, help="column with a category, for per-category plots (default: none)")
    evaluate_parser.add_argument("--model", default=None, help="generate the summaries first with this OpenAI-compatible model, logged with the run (default: read them from --summary-col)")
    evaluate_parser.add_argument("--model-base-url", default=None, help="base URL of the candidate model's endpoint (default: as the judge's, $MGM_JUDGE_BASE_URL, else $OPENAI_BASE_URL, else OpenAI)")
    judge_options(evaluate_parser)
    method_options(evaluate_parser)
    evaluate_parser.add_argument("--no-coverage", action="store_true", help="skip key points and coverage")
    evaluate_parser.add_argument(
        "--grounding-only", action="store_true",
        help="no judge at all: log the model-free grounding check (and the reference and length metrics when given)",
    )
    evaluate_parser.add_argument("--ter", action="store_true", help="add TER against --reference-col, printed and in the run's report table, a run metric with --all-metrics (sacreBLEU; slow: about 0.8 s per row)")
    evaluate_parser.add_argument("--all-metrics", action="store_true",
                                 help="log every figure as a run metric (default: the headline figures with their intervals and n, and the judge's calls and cost; every figure is in the run's report table either way)")
    evaluate_parser.add_argument("--limit", type=positive_int, default=None, metavar="N", help="first N rows only (default: every row)")
    evaluate_parser.add_argument("--estimate", action="store_true", help="print the judge calls, tokens and cost it expects, then exit (no judge call, no run)")
    evaluate_parser.add_argument("--experiment", default=None, help=f"MLflow experiment name (default: $MLFLOW_EXPERIMENT_NAME, else {DEFAULT_EXPERIMENT})")
    evaluate_parser.add_argument("--run-name", default=None, help="the MLflow run's name (default: one MLflow makes up)")
    tracking_option(evaluate_parser)
    evaluate_parser.set_defaults(run=evaluate)
