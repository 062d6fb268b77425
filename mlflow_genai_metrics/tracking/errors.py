"""Which MLflow errors are the caller's input rather than a fault: an unknown run, model, version or alias, or a
value MLflow calls invalid."""

from __future__ import annotations

from mlflow.exceptions import MlflowException

# MLflow's codes for "no such run / experiment / model / version / alias" and "not a valid value".
BAD_INPUT_CODES = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"})


def is_bad_input(error: BaseException) -> bool:
    """True for an ``MlflowException`` whose code says the request named something unknown or invalid; any other
    MLflow error (a store that failed, an internal error) is not the caller's input."""
    return isinstance(error, MlflowException) and error.error_code in BAD_INPUT_CODES
