"""MLflow's own output quieted while an ``mgm`` command runs: our progress bars, tables and lines are the output.

MLflow prints some lines straight to stderr (``Successfully registered model 'x'.``, ``Created version '1' ...``:
``mgm gate`` says what it registered itself), a block on stdout after each ``mlflow.genai.evaluate`` ("Evaluation
completed", the run's id: ``mgm`` prints each run's id and URL), and logs INFO lines and its artifact progress bars; its warnings
still show, but for the known ones below, which say nothing a user must act on. Everything is restored when the
command ends, so a notebook or a test that calls ``main`` keeps MLflow's usual output.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator

KNOWN_WARNINGS = (
    # `mgm gate RUN --model-uri runs:/RUN/summarizer`: MLflow 3 keeps a logged model under models:/m-..., registers
    # that one and says so; the gate prints what it registered
    re.compile(r"has no artifacts at artifact path .* registering model based on models:/"),
)


class _Unknown(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(pattern.search(message) for pattern in KNOWN_WARNINGS)


class _Nowhere:
    """Where MLflow's direct prints go meanwhile (its logger keeps a stream of its own)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def _replaced(module, name: str, value) -> Iterator[None]:
    getattr(module, name)  # AttributeError when MLflow has no such function
    original = module.__dict__[name]
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow's warnings and errors only, the known warnings left out, for the duration."""
    progress = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow  # noqa: F401  (MLflow configures its loggers on import: quieten them after that)
    from mlflow.utils import logging_utils

    # eprint looks its stream up at each call, while MLflow's log handler holds the stream it was made with; the
    # stream's own on/off switch is no use: MLflow's imports turn it back on
    printed = logging_utils.MLFLOW_LOGGING_STREAM
    logger = logging.getLogger("mlflow")
    level, handlers, known = logger.level, list(logger.handlers), _Unknown()
    logging_utils.MLFLOW_LOGGING_STREAM = _Nowhere()
    stack = contextlib.ExitStack()
    with contextlib.suppress(ImportError, AttributeError):  # another MLflow: its block shows, nothing breaks
        from mlflow.genai.evaluation import base as genai_evaluation

        # The block mlflow.genai.evaluate prints on stdout after each run ("Evaluation completed ... Run ID"): mgm
        # prints each run's id and URL itself, and the block would land in the middle of its tables.
        stack.enter_context(_replaced(genai_evaluation, "display_evaluation_output", lambda run_id: None))
    logger.setLevel(logging.WARNING)
    for handler in handlers:
        handler.addFilter(known)  # a handler's filter sees its child loggers' records too; the logger's would not
    try:
        yield
    finally:
        stack.close()
        logging_utils.MLFLOW_LOGGING_STREAM = printed
        for handler in handlers:
            handler.removeFilter(known)
        logger.setLevel(level)
        if progress is None:
            os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)
