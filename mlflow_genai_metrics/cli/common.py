"""What every ``mgm`` command shares: exit codes, the tracking store and experiment, the judge, a figure line."""

from __future__ import annotations

import argparse

__all__ = [
    "DEFAULT_EXPERIMENT", "DEFAULT_TRACKING_URI", "EXIT_EVALUATION_FAILED", "EXIT_GATE_FAILED", "EXIT_OK", "EXIT_USAGE",
    "figure", "make_judge", "set_experiment", "set_tracking", "tracking_option",
]

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_EVALUATION_FAILED = EXIT_GATE_FAILED  # one code for "the work ran and its verdict is no"
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "mgm"


def tracking_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--tracking-uri", default=None, help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {DEFAULT_TRACKING_URI})")


def set_tracking(args: argparse.Namespace) -> None:
    import os

    import mlflow

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri((None if args.tracking_uri else os.environ.get("MLFLOW_REGISTRY_URI")) or uri)


def set_experiment(args: argparse.Namespace):
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


def make_judge(args: argparse.Namespace):
    from ..judge import Judge

    return Judge(args.judge_model, args.judge_base_url, max_concurrency=args.concurrency, context_window=args.judge_context,
                 prices=getattr(args, "prices", None), max_calls=getattr(args, "max_calls", None), max_cost_usd=getattr(args, "max_cost_usd", None))


def figure(name: str, metrics: dict[str, float], width: int = 24) -> str:
    """``name  value  [low, high]  n=..`` where the metric has an interval, else ``name  value``."""
    from ..summarization.scoring import interval_names

    low, high, n = (metrics.get(k) for k in interval_names(name))
    interval = f"  [{low:.3f}, {high:.3f}]  n={n:.0f}" if low is not None and high is not None and n is not None else ""
    return f"  {name:<{width}} {metrics[name]:.3f}{interval}"
