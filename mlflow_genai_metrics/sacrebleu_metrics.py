"""Kept for one release; import from mlflow_genai_metrics.reference."""

from .reference.sacrebleu_metrics import (
    CORPUS_METRICS,
    PRIVATE_CALLS,
    check_sacrebleu,
    corpus_score,
    rouge_signature,
    sacrebleu_signatures,
    segment_scores,
)

__all__ = ["CORPUS_METRICS", "PRIVATE_CALLS", "check_sacrebleu", "corpus_score", "rouge_signature", "sacrebleu_signatures", "segment_scores"]
