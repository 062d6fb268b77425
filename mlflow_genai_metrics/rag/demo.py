"""The four answers from passages that ship with the package (``data/rag_demo.jsonl``; see ``data/README.md``)."""

from __future__ import annotations

from importlib.resources import files
from io import StringIO

import pandas as pd


def demo_answers() -> pd.DataFrame:
    """Columns ``id``, ``question``, ``passages`` (a list of texts per row), ``answer``, ``expected``, ``planted``:
    one faithful row and three with a planted fault (a contradiction, an answer off the question, an invented fact
    over passages that lack the answer)."""
    text = files("mlflow_genai_metrics").joinpath("data/rag_demo.jsonl").read_text(encoding="utf-8")
    return pd.read_json(StringIO(text), lines=True, dtype=False)
