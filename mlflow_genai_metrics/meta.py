"""Kept for one release: meta-evaluation is ``mlflow_genai_metrics.meta_evaluation``."""

from .meta_evaluation import (
    GroundingMetaReport,
    MetaReport,
    agreement,
    binary_agreement,
    confusion_frame,
    evaluation_rows,
    grounding_meta_evaluate,
    load_labelled,
    meta_evaluate,
    stratified_labelled_sample,
    untrained_rule_scores,
)

__all__ = [
    "GroundingMetaReport",
    "MetaReport",
    "agreement",
    "binary_agreement",
    "confusion_frame",
    "evaluation_rows",
    "grounding_meta_evaluate",
    "load_labelled",
    "meta_evaluate",
    "stratified_labelled_sample",
    "untrained_rule_scores",
]
