"""The BBC sample the cost benchmarks judge: articles stratified by category, with their reference summaries."""

from __future__ import annotations

from pathlib import Path

from mlflow_genai_metrics.study import load_articles, stratified_sample

__all__ = ["DATA", "bbc_rows"]

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"


def bbc_rows(articles: int, words: int | None = None) -> tuple[list[str], list[str]] | None:
    """``articles`` BBC texts and their reference summaries; None (after saying so) when the data is absent.
    ``words``: each text cut to its first N words (a smoke run on a real model, whose time goes with the prompt)."""
    if not DATA.exists():
        print(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
        return None
    sample = stratified_sample(load_articles(DATA), articles)
    texts = [" ".join(text.split()[:words]) for text in sample["text"]] if words else list(sample["text"])
    return texts, list(sample["reference"])
