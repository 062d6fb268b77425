"""Kept for one release; import from mlflow_genai_metrics.reference (``split_sentences`` and ``lcs_length`` from
mlflow_genai_metrics.text)."""

from .reference.traditional import (
    ROUGE_TYPES,
    TRADITIONAL_COLUMNS,
    TraditionalResult,
    corpus_scores,
    paired_corpus_difference,
    reference_key,
    statistics_column,
    traditional_metrics,
    traditional_signatures,
)
from .text import lcs_length, split_sentences

__all__ = [
    "ROUGE_TYPES", "TRADITIONAL_COLUMNS", "TraditionalResult", "corpus_scores", "lcs_length", "paired_corpus_difference",
    "reference_key", "split_sentences", "statistics_column", "traditional_metrics", "traditional_signatures",
]
