"""Reference-based metrics, offline: ROUGE (rouge-score), BLEU, chrF and TER (sacreBLEU) and lengths per row, corpus
scores from the rows' summed sufficient statistics, and their paired comparison.

``traditional`` scores rows (``traditional_metrics``); ``sacrebleu_metrics`` wraps sacreBLEU's metric objects.
"""

from .sacrebleu_metrics import (
    CORPUS_METRICS,
    PRIVATE_CALLS,
    check_sacrebleu,
    corpus_score,
    rouge_signature,
    sacrebleu_signatures,
    segment_scores,
)
from .traditional import (
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

__all__ = [
    "CORPUS_METRICS",
    "PRIVATE_CALLS",
    "ROUGE_TYPES",
    "TRADITIONAL_COLUMNS",
    "TraditionalResult",
    "check_sacrebleu",
    "corpus_score",
    "corpus_scores",
    "paired_corpus_difference",
    "reference_key",
    "rouge_signature",
    "sacrebleu_signatures",
    "segment_scores",
    "statistics_column",
    "traditional_metrics",
    "traditional_signatures",
]
