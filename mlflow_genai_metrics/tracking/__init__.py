"""Everything MLflow-specific: custom metrics for ``mlflow.models.evaluate``, scorers for ``mlflow.genai.evaluate``,
run artifacts, run comparison, the candidate-model wrapper and the registration gate. It only adapts the core's
results into MLflow objects."""

from .agreement import AgreementReport, judge_agreement
from .classic import summarization_metrics
from .compare import EvaluatedRun, compare_runs, load_run
from .gate import GateResult, Rule, RuleOutcome, parse_rules, register_if_passing
from .genai import summarization_scorers
from .model import SummarizerModel
from .run_logging import ARTIFACT_DIR, SIGNATURE_TAG, log_result, log_spark_result

__all__ = [
    "ARTIFACT_DIR",
    "SIGNATURE_TAG",
    "AgreementReport",
    "EvaluatedRun",
    "GateResult",
    "Rule",
    "RuleOutcome",
    "SummarizerModel",
    "compare_runs",
    "judge_agreement",
    "load_run",
    "log_result",
    "log_spark_result",
    "parse_rules",
    "register_if_passing",
    "summarization_metrics",
    "summarization_scorers",
]
