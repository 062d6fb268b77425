"""The study's articles: the eight that ship with the package, or a file of them, and a stratified sample."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pandas as pd

from ..tables import read_table

__all__ = ["demo_articles", "load_articles", "stratified_sample"]


def demo_articles() -> pd.DataFrame:
    """The eight short articles that ship with the package (written for it; see ``data/README.md``)."""
    text = files("mlflow_genai_metrics").joinpath("data/demo_articles.jsonl").read_text(encoding="utf-8")
    return pd.read_json(pd.io.common.StringIO(text), lines=True)


def load_articles(path: str | Path | None = None) -> pd.DataFrame:
    """The demo articles, or a file with ``text`` (and optional ``id``, ``category``, reference) columns.

    The BBC file works as is: ``reference_summary_sentences`` becomes the ``reference`` (sentences joined by
    spaces), falling back to ``reference_summary``.
    """
    if path is None:
        frame = demo_articles()
    else:
        frame = read_table(path)
    if "text" not in frame.columns:
        raise ValueError(f"{path}: the articles need a 'text' column; it has {list(frame.columns)}")
    if "id" not in frame.columns:
        frame = frame.assign(id=[str(i) for i in range(len(frame))])
    if "category" not in frame.columns:
        frame = frame.assign(category="all")
    if "reference" not in frame.columns:
        if "reference_summary_sentences" in frame.columns:
            frame = frame.assign(reference=frame["reference_summary_sentences"].map(" ".join))
        elif "reference_summary" in frame.columns:
            frame = frame.assign(reference=frame["reference_summary"])
    return frame


def stratified_sample(frame: pd.DataFrame, n: int, *, by: str = "category", seed: int = 0) -> pd.DataFrame:
    """``n`` rows, split across ``by`` in proportion (at least one each), after dropping duplicate texts."""
    unique = frame.drop_duplicates(subset=["text"]).reset_index(drop=True)
    unique = unique.assign(_norm=unique["text"].str.split().str.join(" ")).drop_duplicates(subset=["_norm"]).drop(columns="_norm")
    if n >= len(unique):
        return unique.reset_index(drop=True)
    shares = unique[by].value_counts(normalize=True)
    quotas = {c: max(1, int(round(share * n))) for c, share in shares.items()}
    while sum(quotas.values()) > n:  # rounding overshoot: trim the largest groups
        quotas[max(quotas, key=quotas.get)] -= 1
    while sum(quotas.values()) < n:
        quotas[max(shares.index, key=lambda c: shares[c] * n - quotas[c])] += 1
    parts = [unique[unique[by] == c].sample(n=min(q, (unique[by] == c).sum()), random_state=seed) for c, q in quotas.items()]
    return pd.concat(parts).sort_values("id").reset_index(drop=True)
