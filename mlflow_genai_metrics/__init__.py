"""mlflow_genai_metrics: LLM-as-a-judge summarization metrics, trustworthy and cheap, as first-class MLflow evaluations.

The core (``judge``, ``summarization``, ``traditional``, ``stats``) imports nothing from MLflow; everything
MLflow-specific lives in one subpackage.
"""

__version__ = "0.1.0"

from .generate import summarize
from .judge import (
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
    SignatureMismatchError,
    SummarizationResult,
    compare_results,
    judge_summaries,
    judge_summaries_frame,
)
from .traditional import TraditionalResult, traditional_metrics

__all__ = [
    "Comparison",
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "Message",
    "Prices",
    "SignatureMismatchError",
    "SummarizationResult",
    "TextAnswer",
    "TraditionalResult",
    "Usage",
    "__version__",
    "compare_results",
    "judge_summaries",
    "judge_summaries_frame",
    "summarize",
    "traditional_metrics",
]
