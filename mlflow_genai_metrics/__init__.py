"""mlflow_genai_metrics: LLM-as-a-judge summarization metrics, trustworthy and cheap, as first-class MLflow evaluations.

The core (``judge``, scoring) imports nothing from MLflow; everything MLflow-specific lives in one subpackage.
"""

from .judge import (
    Judge,
    JudgeConfigError,
    JudgeError,
    JudgeReply,
    JudgeRequest,
    Message,
    Prices,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "Message",
    "Prices",
    "Usage",
    "__version__",
]
