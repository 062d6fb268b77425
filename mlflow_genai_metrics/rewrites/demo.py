"""The rewrites that ship with the package (``data/rewrite_demo.jsonl``; see ``data/README.md``)."""

from __future__ import annotations

from importlib.resources import files
from io import StringIO

import pandas as pd


def demo_rewrites() -> pd.DataFrame:
    """Columns ``id``, ``instruction``, ``input``, ``rewrite``, ``planted``: one faithful rewrite that follows its
    instruction and three with a planted fault (a new fact, a lost key point, the instruction ignored)."""
    text = files("mlflow_genai_metrics").joinpath("data/rewrite_demo.jsonl").read_text(encoding="utf-8")
    return pd.read_json(StringIO(text), lines=True, dtype=False)
