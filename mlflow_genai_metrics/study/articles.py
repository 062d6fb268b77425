"""The study's articles: the eight that ship with the package (and a summary of each to judge), or a file of them,
and a stratified sample."""

from __future__ import annotations

from importlib.resources import files
from io import StringIO
from pathlib import Path

import pandas as pd

from ..tables import is_missing, read_table


def _shipped(name: str) -> pd.DataFrame:
    text = files("mlflow_genai_metrics").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return pd.read_json(StringIO(text), lines=True, dtype=False)  # ids stay text ("business/01")


def demo_articles() -> pd.DataFrame:
    """The eight short articles that ship with the package (written for it; see ``data/README.md``)."""
    return _shipped("demo_articles.jsonl")


def sample_summaries() -> pd.DataFrame:
    """The eight demo articles with a summary of each to judge: columns ``id``, ``category``, ``text`` (the
    article), ``reference`` and ``summary``. Half the summaries are faithful; the others each carry one planted
    fault (a contradiction, an invented fact), listed in ``data/README.md``. ``python -m
    mlflow_genai_metrics.study.sample FILE`` writes them to a file."""
    return _shipped("sample_summaries.jsonl")


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
        if "reference_summary_sentences" in frame.columns:  # a row without them: its reference_summary, else none
            joined = frame["reference_summary_sentences"].map(lambda sentences: None if is_missing(sentences) else " ".join(sentences))
            if "reference_summary" in frame.columns:
                joined = joined.where(joined.notna(), frame["reference_summary"])
            frame = frame.assign(reference=joined)
        elif "reference_summary" in frame.columns:
            frame = frame.assign(reference=frame["reference_summary"])
    return frame


def stratified_sample(frame: pd.DataFrame, n: int, *, by: str = "category", seed: int = 0) -> pd.DataFrame:
    """``n`` rows, split across ``by`` in proportion (at least one each; rows without a value are a group of their
    own), after dropping duplicate texts; in the order of their ids."""
    unique = frame.drop_duplicates(subset=["text"]).reset_index(drop=True)
    unique = unique.assign(_norm=unique["text"].str.split().str.join(" ")).drop_duplicates(subset=["_norm"]).drop(columns="_norm")
    if n >= len(unique):
        return unique.reset_index(drop=True)
    # a missing or blank value is a group: value_counts and == left those rows out of every sample, unsaid
    strata = unique[by].map(lambda value: _NO_VALUE if is_missing(value) or (isinstance(value, str) and not value.strip()) else value)
    shares = strata.value_counts(normalize=True)
    quotas = {c: max(1, int(round(share * n))) for c, share in shares.items()}
    while sum(quotas.values()) > n:  # rounding overshoot: trim the largest groups
        quotas[max(quotas, key=quotas.get)] -= 1
    while sum(quotas.values()) < n:
        quotas[max(shares.index, key=lambda c: shares[c] * n - quotas[c])] += 1
    parts = [unique[strata == c].sample(n=min(q, (strata == c).sum()), random_state=seed) for c, q in quotas.items()]
    sample = pd.concat(parts)
    try:
        return sample.sort_values("id").reset_index(drop=True)
    except TypeError:  # ids of mixed kinds (1 and "b7"): in the order of their text
        return sample.sort_values("id", key=lambda ids: ids.astype(str)).reset_index(drop=True)


_NO_VALUE = object()  # the group of the rows without a value, in ``stratified_sample``
