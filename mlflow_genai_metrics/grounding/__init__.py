"""A model-free grounding check: how much of a summary its source supports, with no judge call.

    from mlflow_genai_metrics import grounding_metrics        # rows in -> grounding per row, aggregates
    from mlflow_genai_metrics.grounding import lexical_support, suspect, MODEL_TAG
    result = grounding_metrics(articles, summaries)          # .rows: grounding, grounded, grounding_reasoning
    support = lexical_support("The council cut taxes.", article)
    suspect("yes", support)                                   # True: the judge said yes to what the source lacks

Features of each summary sentence against the source (``features``), combined by a small gradient-boosted model
trained on human labels and shipped as a versioned JSON file (``model``; its tag ``MODEL_TAG``, e.g.
``grounding:v2-8bb9``, belongs in a run's signature); ``cache`` keeps results on disk. Tables of rows go through
``summarization`` (``grounding_metrics``, ``judge_summaries``), which uses this package, never the other way
round. Core: imports nothing from MLflow.
"""

from .cache import GroundingCache, cached_groundings, cached_supports
from .features import ROW_FEATURES, SENTENCE_FEATURES
from .model import MODEL_FILE, GroundingModel, load_model, model_tag
from .scoring import RowGrounding, lexical_support, lexical_supports, score_pairs, support_thresholds, suspect

__all__ = [
    "MODEL_FILE",
    "MODEL_TAG",
    "ROW_FEATURES",
    "SENTENCE_FEATURES",
    "GroundingCache",
    "GroundingModel",
    "RowGrounding",
    "cached_groundings",
    "cached_supports",
    "lexical_support",
    "lexical_supports",
    "load_model",
    "model_tag",
    "score_pairs",
    "suspect",
    "support_thresholds",
]


def __getattr__(name: str) -> str:
    if name == "MODEL_TAG":  # the shipped file's tag, read on first use
        return model_tag()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
