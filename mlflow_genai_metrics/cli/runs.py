"""``mgm compare`` and ``mgm gate``: evaluation runs compared, and a model registered only if its run passes."""

from __future__ import annotations

import argparse

from .common import EXIT_GATE_FAILED, EXIT_OK, judge_options, make_judge, method_options, set_tracking, tracking_option


def compare(args: argparse.Namespace) -> int:
    from ..summarization.run_table import DECISION_METRIC, disagreements
    from ..tracking import compare_runs

    set_tracking(args)
    table = compare_runs(
        args.run_ids, metrics=args.metric or None, allow_mixed_judges=args.allow_mixed_judges, allow_partial=args.allow_partial,
        log=args.log,
    )
    columns = [
        "run_name", "metric", "value", "ci_low", "ci_high", "n", "difference_vs_first", "difference_ci_low", "difference_ci_high",
        "p_holm", "p_value", "better", "pairs", "pairs_dropped_for_errors",
    ]
    # every column and row, figures to 4 significant digits, blanks where a figure does not apply (the first run)
    print(table[columns].to_string(index=False, na_rep="", float_format=lambda v: f"{v:.4g}"))
    for note in dict.fromkeys(n for n in table["note"] if n):
        print(f"note: {note}")
    for _, row in table[table["metric_note"] != ""].iterrows():
        print(f"note: {row['run_name']} {row['metric']}: {row['metric_note']}")
    for line in disagreements(table):
        print(f"note: {line}")
    print("p_holm: the test of each metric's kind against the first run (two-sided), Holm-adjusted over every metric and run "
          f"shown: read this one; p_value: the raw p beside it. Decisions (mgm gate) read {DECISION_METRIC} by default.")
    if args.log:
        print(f"comparison logged as run {table.attrs['comparison_run_id']}")
    return EXIT_OK


def gate(args: argparse.Namespace) -> int:
    from ..tracking import register_if_passing

    set_tracking(args)
    if args.champion_data and not args.beat_champion:
        raise ValueError("--champion-data is judged again to beat the champion: give --beat-champion too")
    judge = make_judge(args) if args.champion_data else None  # the candidate's judge, given by the same flags as mgm evaluate's
    try:
        result = register_if_passing(
            args.model_uri, args.name, run_id=args.run_id, rules=args.rule, alias=args.alias, beat_champion=args.beat_champion,
            beat_metric=args.beat_metric or "strict_alignment", require_stability=args.require_stability,
            champion_data=args.champion_data, judge=judge, examples=args.examples,
        )
    finally:
        if judge is not None:
            judge.close()
    print(result)
    return EXIT_OK if result.passed else EXIT_GATE_FAILED


def add_commands(commands) -> None:
    """Add this module's subcommands to ``mgm``'s parser."""
    compare_parser = commands.add_parser("compare", help="compare evaluation runs (paired tests against the first)")
    compare_parser.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="evaluation runs (the run ids mgm evaluate prints); the first is the baseline")
    compare_parser.add_argument("--metric", action="append", help="a metric to show (repeatable; default: the main ones)")
    compare_parser.add_argument("--allow-mixed-judges", action="store_true", help="compare runs judged with different signatures")
    compare_parser.add_argument(
        "--allow-partial", action="store_true",
        help="compare even when fewer usable pairs (same id and source, judged on both sides) than half of either run remain",
    )
    compare_parser.add_argument("--log", action="store_true", help="also log the comparison as a run (table and plots) in the first run's experiment")
    tracking_option(compare_parser)
    compare_parser.set_defaults(run=compare)
    gate_parser = commands.add_parser("gate", help="register a model only if its evaluation run passes every rule")
    gate_parser.add_argument("run_id", metavar="RUN_ID", help="the evaluation run whose metrics the rules read")
    gate_parser.add_argument(
        "--model-uri", required=True,
        help="the model to register: models:/m-... as mgm evaluate --model prints it (runs:/RUN_ID/summarizer works too)",
    )
    gate_parser.add_argument("--name", required=True, help="registered model name")
    gate_parser.add_argument("--rule", action="append", required=True, help='e.g. "alignment>=0.9" (repeatable)')
    gate_parser.add_argument("--alias", default="champion", help="alias moved to the new version when it passes")
    gate_parser.add_argument(
        "--beat-champion", action="store_true",
        help="also require being significantly better than the alias holder (one-sided, in each metric's direction)",
    )
    gate_parser.add_argument(
        "--beat-metric", action="append",
        help="a metric the champion must be beaten on (repeatable, Holm-adjusted together; default: strict_alignment)",
    )
    gate_parser.add_argument(
        "--require-stability", action="store_true",
        help="the beat rules must hold with the candidate's unstable claims counted as contradicted (judge it with --stability K)",
    )
    gate_parser.add_argument(
        "--champion-data", default=None, metavar="FILE",
        help="the champion's outputs (the table its evaluation read: id, text, summary): judged again with the candidate's "
             "judge (the --judge-* flags, as mgm evaluate was given them) and compared against that, so a judge that "
             "changed since the champion was evaluated judges both sides; the cache answers what has not changed",
    )
    judge_options(gate_parser, leave_out=("batch",))
    method_options(gate_parser, leave_out=("stability", "order_check"))  # the candidate's stability is in its signature
    tracking_option(gate_parser)
    gate_parser.set_defaults(run=gate)
