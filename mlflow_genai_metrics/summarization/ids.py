"""Row ids in the one form they are stored and compared in: text.

Artifacts (Parquet, JSON) hold ids as text, so ``1`` and ``"1"`` are the same id once a run is logged. Every id is
therefore canonicalised once, here, and two ids that would become the same text are refused when a run is made,
not discovered when two runs are compared.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import pandas as pd
from pandas.api.types import is_scalar


def canonical_id(value: Any) -> str:
    """The text an id is stored and compared as: ``1``, ``1.0`` and ``"1"`` -> ``"1"``; ``1.5`` -> ``"1.5"``.

    Raises ``ValueError`` for a missing (None, NaN, ``pd.NA``, ``NaT``) or infinite id, and ``TypeError`` for a
    boolean.
    """
    if value is None or (is_scalar(value) and not isinstance(value, (str, numbers.Real)) and pd.isna(value)):
        raise ValueError("the id is missing")
    if isinstance(value, str):
        return value
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        raise TypeError(f"a boolean ({value!r}) cannot be a row id")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            raise ValueError("the id is missing (NaN)")
        if math.isinf(number):
            raise ValueError(f"the id {value!r} is not finite")
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)
