"""mlflow_genai_metrics: LLM-as-a-judge summarization metrics, trustworthy and cheap, as first-class MLflow evaluations.

The core (``judge``, ``summarization``, ``reference``, ``stats``) imports nothing from MLflow; everything
MLflow-specific lives in one subpackage.
"""

from ._version import __version__

from .generate import summarize
from .judge import (
    BatchFilesWritten,
    BatchOptions,
    Judge,
    JudgeConfigError,
    JudgeError,
    JudgeReply,
    JudgeRequest,
    Message,
    Prices,
    TextAnswer,
    Usage,
)
from .summarization import (
    Comparison,
    InsufficientPairsError,
    SignatureMismatchError,
    SourceMismatchError,
    SummarizationResult,
    compare_results,
    estimate_cost,
    judge_summaries,
    judge_summaries_frame,
)
from .summarization.grounding_only import GroundingResult, grounding_metrics
from .reference import TraditionalResult, traditional_metrics

# The MLflow layer loads on first use, so that judging without MLflow never pays for importing it.
_TRACKING_NAMES = {
    "summarization_metrics",
    "summarization_scorers",
    "compare_runs",
    "SummarizerModel",
    "register_if_passing",
    "GateResult",
    "log_result",
    "ClaimAlignment",
    "KeyPointCoverage",
    "Grounding",
    "evaluate_summaries",
    "log_summary_results",
    "score_traces",
}


def __getattr__(name: str):
    if name in _TRACKING_NAMES:
        from . import tracking

        return getattr(tracking, name)
    raise AttributeError(f"module 'mlflow_genai_metrics' has no attribute {name!r}")

__all__ = [
    "BatchFilesWritten",
    "BatchOptions",
    "ClaimAlignment",
    "Comparison",
    "GateResult",
    "Grounding",
    "InsufficientPairsError",
    "SummarizerModel",
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "KeyPointCoverage",
    "Message",
    "Prices",
    "SignatureMismatchError",
    "SourceMismatchError",
    "SummarizationResult",
    "TextAnswer",
    "TraditionalResult",
    "Usage",
    "__version__",
    "compare_results",
    "compare_runs",
    "estimate_cost",
    "evaluate_summaries",
    "GroundingResult",
    "grounding_metrics",
    "log_result",
    "log_summary_results",
    "register_if_passing",
    "score_traces",
    "judge_summaries",
    "judge_summaries_frame",
    "summarize",
    "summarization_metrics",
    "summarization_scorers",
    "traditional_metrics",
]
