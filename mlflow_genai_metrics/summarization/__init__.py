"""The summarization judgement: claims, yes/no/idk verification against the source, key-point coverage, and the
metrics of ``docs/metrics.md``. Imports nothing from MLflow."""

from .api import judge_summaries, judge_summaries_frame
from .chunking import combine_verdicts, split_source
from .comparison import (
    Comparison,
    InsufficientPairsError,
    SignatureMismatchError,
    SourceMismatchError,
    compare_results,
)
from .estimate import CostEstimate, estimate_cost
from .grounding_only import GroundingResult, grounding_metrics
from .options import JudgingOptions
from .records import CheckedClaim, CoveredKeyPoint, RowJudgement
from .result import SummarizationResult

__all__ = [
    "CheckedClaim",
    "Comparison",
    "CostEstimate",
    "CoveredKeyPoint",
    "GroundingResult",
    "InsufficientPairsError",
    "JudgingOptions",
    "RowJudgement",
    "SignatureMismatchError",
    "SourceMismatchError",
    "SummarizationResult",
    "combine_verdicts",
    "compare_results",
    "estimate_cost",
    "grounding_metrics",
    "judge_summaries",
    "judge_summaries_frame",
    "split_source",
]
