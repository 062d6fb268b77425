"""mlflow_genai_metrics: LLM-as-a-judge summarization metrics, trustworthy and cheap, as first-class MLflow evaluations.

What a user calls is here; each subpackage exports its own (``judge``: the LLM client and its records;
``summarization``: the method, its results and comparisons; ``reference``: ROUGE, BLEU, chrF, TER; ``tracking``:
everything MLflow). The core imports nothing from MLflow. Every name below loads on first use, so importing one
subpackage (the grounding check's worker process, say) does not import the others.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    from .judge import Judge, JudgeConfigError
    from .stats import StatisticsOptions
    from .summarization import JudgingOptions, compare_results, grounding_metrics, judge_summaries, judge_summaries_frame
    from .tracking import ClaimAlignment, Grounding, KeyPointCoverage, SummarizerModel, compare_runs, evaluate_summaries, register_if_passing

_HOMES = {
    **dict.fromkeys(("Judge", "JudgeConfigError"), "judge"),
    "StatisticsOptions": "stats",
    **dict.fromkeys(("JudgingOptions", "compare_results", "grounding_metrics", "judge_summaries", "judge_summaries_frame"), "summarization"),
}
_TRACKING_NAMES = ("ClaimAlignment", "Grounding", "KeyPointCoverage", "SummarizerModel", "compare_runs", "evaluate_summaries",
                   "register_if_passing")

def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(f".{_HOMES[name]}", __name__), name)
    if name in _TRACKING_NAMES:
        return getattr(import_module(".tracking", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ClaimAlignment",
    "Grounding",
    "Judge",
    "JudgeConfigError",
    "JudgingOptions",
    "KeyPointCoverage",
    "StatisticsOptions",
    "SummarizerModel",
    "__version__",
    "compare_results",
    "compare_runs",
    "evaluate_summaries",
    "grounding_metrics",
    "judge_summaries",
    "judge_summaries_frame",
    "register_if_passing",
]
