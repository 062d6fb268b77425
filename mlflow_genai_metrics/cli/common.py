"""What every ``mgm`` command shares: exit codes, the help layout, the tracking store and experiment (artifacts
beside a local SQLite store), the judge's options, a figure line."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_EVALUATION_FAILED = EXIT_GATE_FAILED  # one code for "the work ran and its verdict is no"
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "mgm"
ARTIFACTS_FOLDER = "mlartifacts"  # beside a local SQLite store, as `mlflow server` names its own


class DefaultsShown(argparse.HelpFormatter):
    """Help that ends with ``(default: X)`` where an argument has a default and its help does not already say it
    (a help that says ``default`` names it in its own words, e.g. an environment variable); None and False, the
    defaults of "not given" and of a flag, are not shown."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def positive_int(text: str) -> int:
    """An argparse type: a whole number above 0. ``--limit 0`` would judge every row and ``--limit -2`` drop the
    last two (``DataFrame.head``), so either is refused with argparse's exit code 2, like any malformed argument."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (a cost cap or a poll interval of 0, a negative one or NaN means
    nothing a run can keep to)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, not {text!r}")
    return value


def share(text: str) -> float:
    """An argparse type: a share, a number from 0 to 1 (``--order-check 0.2``: a fifth of the rows)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, not {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, not {text!r}")
    return value


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535 (a socket refuses anything else with an ``OverflowError``)."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, not {text!r}")
    return value


def folder_argument(path: str | Path, option: str) -> Path:
    """``path`` as a folder to write in: a file of that name is refused naming ``option``, before any work
    (``mkdir`` would fail on it with ``FileExistsError`` once the run is under way)."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option} {folder} is a file, not a folder: give a folder (it is made when missing)")
    return folder


def tracking_option(command: argparse.ArgumentParser) -> None:
    """``--tracking-uri``."""
    command.add_argument("--tracking-uri", default=None, help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else {DEFAULT_TRACKING_URI})")


def judge_options(command: argparse.ArgumentParser, *, leave_out: Collection[str] = (), settings_type: Any = None) -> None:
    """The flag each judge setting declares (of ``JudgeSettings``, else ``settings_type``; not those in ``leave_out``),
    with its help and default (``$VARIABLE``: read from the environment), an ``int`` or ``float`` above 0 (a share,
    0 to 1, for a setting declared ``le=1``). A setting
    whose options declare flags (``batch``: ``BatchOptions``) is a switch beside them. Read by ``judge_arguments``."""
    for setting, options in _flagged(settings_type, leave_out):
        if options:
            command.add_argument(setting.flag, action="store_true", help=setting.help)
        for flag in options or [setting]:
            text = f"{flag.help} (default: ${flag.env})" if flag.env and f"${flag.env}" not in flag.help else flag.help
            kind = share if any(getattr(limit, "le", None) == 1 for limit in flag.field.metadata) else \
                {int: positive_int, float: positive_number}.get(flag.kind, str)
            command.add_argument(flag.flag, type=kind, help=text, default=None if flag.env else flag.default, metavar=flag.metavar)


def judge_arguments(args: argparse.Namespace, *, settings_type: Any = None) -> dict[str, Any]:
    """The ``Judge`` keywords the flags of ``judge_options`` give in ``args``. A switch's options are made when it is
    on or when an option without a default is given (``--batch-dir`` implies ``--batch``)."""
    given = {}
    for setting, options in _flagged(settings_type, ()):
        if hasattr(args, setting.dest):
            value = getattr(args, setting.dest)
            if options:
                values = {option.name: getattr(args, option.dest) for option in options}
                on = value or any(values[option.name] is not None for option in options if option.default is None)
                value = setting.model(**values) if on else None
            given[setting.name] = value
    return given


def method_options(command: argparse.ArgumentParser, *, leave_out: Collection[str] = ()) -> None:
    """The method's flags (``--stability``, ``--order-check``, ``--examples``: ``summarization.method.Method``), as
    ``judge_options`` adds the judge's. Read by ``method_arguments``."""
    from ..summarization.method import Method

    judge_options(command, leave_out=leave_out, settings_type=Method)


def method_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The method's keywords (``stability=3``) the flags of ``method_options`` give in ``args``, checked and read (a
    bad value, an examples file that cannot be read: refused here, under its flag, before any judge is made; the file
    read once, its ``ExampleSet`` handed on)."""
    from ..summarization.method import Method

    return dict(Method(**judge_arguments(args, settings_type=Method)))


def _flagged(settings_type: Any, leave_out: Collection[str]) -> list[tuple[Any, list[Any]]]:
    """Each judge setting with a flag, and the flagged settings of its model (none: a plain value, such as ``Prices``)."""
    from ..judge import JudgeSettings, declared

    return [(s, [o for o in declared(s.model) if o.flag] if s.model else []) for s in declared(settings_type or JudgeSettings)
            if s.flag and s.name not in leave_out]


def set_tracking(args: argparse.Namespace) -> None:
    import os

    import mlflow

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    database = local_database(uri)
    if database is not None and database.is_dir():  # MLflow would retry opening it for minutes, then raise
        raise ValueError(f"the MLflow tracking store {uri} names a folder, not a SQLite database file")
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri((None if args.tracking_uri else os.environ.get("MLFLOW_REGISTRY_URI")) or uri)


def local_database(tracking_uri: str) -> Path | None:
    """The database file of a local SQLite store (``sqlite:///path/mlflow.db``); None for any other store."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = tracking_uri.removeprefix("sqlite:///").split("?")[0]
    if not database or database == ":memory:":
        return None
    return Path(database)


def local_artifacts_root(tracking_uri: str) -> Path | None:
    """``mlartifacts`` beside the database of a local SQLite store (``sqlite:///path/mlflow.db``); None for any
    other store, whose server or configuration decides where artifacts go."""
    database = local_database(tracking_uri)
    return None if database is None else database.resolve().parent / ARTIFACTS_FOLDER


def prepare_experiment(name: str) -> None:
    """Create experiment ``name`` when it is missing from a local SQLite store, with its artifacts in
    ``mlartifacts/<name>`` beside the database instead of MLflow's ``./mlruns`` under whatever folder the command
    ran in. An existing experiment keeps its location, and another store is left to MLflow."""
    import mlflow
    from mlflow.exceptions import MlflowException

    root = local_artifacts_root(mlflow.get_tracking_uri())
    if root is None or mlflow.get_experiment_by_name(name) is not None:
        return
    try:
        mlflow.create_experiment(name, artifact_location=str(root / re.sub(r"[^A-Za-z0-9._-]+", "_", name)))
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":  # another process made it first: theirs stands
            raise


def set_experiment(args: argparse.Namespace):
    """--experiment, else ``$MLFLOW_EXPERIMENT_NAME`` (or ``$MLFLOW_EXPERIMENT_ID``) as MLflow itself reads them, else
    mgm; a new one in a local SQLite store keeps its artifacts beside the database (``prepare_experiment``)."""
    import os

    import mlflow

    if os.environ.get("MLFLOW_EXPERIMENT_ID") and not (args.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME")):
        return mlflow.set_experiment(experiment_id=os.environ["MLFLOW_EXPERIMENT_ID"])
    name = args.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    prepare_experiment(name)
    return mlflow.set_experiment(name)


def make_judge(args: argparse.Namespace, *, batch_files: bool = False):
    """The ``Judge`` the judge flags in ``args`` describe (``judge_arguments``); ``batch_files``: the command takes
    ``--batch-dir`` and ``--batch-command``, which goes with it."""
    if batch_files and args.batch_command and not args.batch_dir:
        raise ValueError("--batch-command runs on the files of --batch-dir: give --batch-dir too")
    from ..judge import Judge

    return Judge(**judge_arguments(args))


def figure(name: str, metrics: dict[str, float], width: int = 24) -> str:
    """``name  value  [low, high]  n=..`` where the metric has an interval; a sentence instead of ``nan`` where the
    value or its interval is missing; ``name  value`` for a figure that has none."""
    from ..summarization.scoring import interval_names

    value = metrics[name]
    low, high, n = (metrics.get(k) for k in interval_names(name))
    missing = value is None or math.isnan(value)
    if n is None:
        return f"  {name:<{width}} {'undefined (no row, or rows that do not vary)' if missing else f'{value:.3f}'}"
    if missing:
        why = ("people's labels or the judge's verdicts are all of one class, so it is undefined"
               if n and name.endswith(("balanced_accuracy", "cohen_kappa")) else "no row to stand on")
        return f"  {name:<{width}} undefined  n={n:.0f}: {why}"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return (f"  {name:<{width}} {value:.3f}  no interval  n={n:.0f}: too few rows for one that holds its coverage, "
                "or rows that all agree")
    return f"  {name:<{width}} {value:.3f}  [{low:.3f}, {high:.3f}]  n={n:.0f}"
