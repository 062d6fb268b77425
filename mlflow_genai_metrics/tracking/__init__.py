"""Everything MLflow-specific: custom metrics for ``mlflow.models.evaluate``, scorers for ``mlflow.genai.evaluate``,
run artifacts, run comparison, the candidate-model wrapper and the registration gate. It only adapts the core's
results into MLflow objects."""

from ..summarization.gating import Rule
from .agreement import AgreementReport, judge_agreement
from .align import AlignmentReport, align_judge
from .answer_judges import AnswerFaithfulness, AnswerRelevance, ContextSufficiency, answer_scorers, evaluate_answers
from .classic import summarization_metrics
from .compare import EvaluatedRun, compare_runs, load_run
from .evaluate import AnswerEvaluation, Evaluation, SummaryEvaluation, evaluate, evaluate_rewrites, evaluate_summaries, log_results
from .gate import GateResult, RuleOutcome, parse_rules, register_if_passing
from .judge_sets import rewrite_scorers, summarization_scorers
from .judges import ClaimAlignment, Grounding, InstructionFollowing, JudgeSpec, KeyPointCoverage
from .labels import LabelSample, PeopleReport, label_sample, people_estimate
from .model import SummarizerModel
from .monitor import MonitorReport, score_traces
from .one_call import make_claim_judge
from .run_logging import ARTIFACT_DIR, SIGNATURE_TAG, log_result, log_spark_result

__all__ = [
    "ARTIFACT_DIR", "SIGNATURE_TAG", "AgreementReport", "AlignmentReport", "AnswerEvaluation", "AnswerFaithfulness", "AnswerRelevance",
    "ClaimAlignment", "ContextSufficiency", "EvaluatedRun", "Evaluation", "GateResult", "Grounding", "InstructionFollowing",
    "JudgeSpec", "KeyPointCoverage", "LabelSample", "MonitorReport", "PeopleReport", "Rule", "RuleOutcome", "SummarizerModel", "SummaryEvaluation",
    "align_judge", "answer_scorers", "compare_runs", "evaluate", "evaluate_answers", "evaluate_rewrites", "evaluate_summaries", "judge_agreement", "label_sample", "load_run", "log_result", "log_spark_result",
    "log_results", "make_claim_judge", "parse_rules", "people_estimate", "register_if_passing", "rewrite_scorers", "score_traces", "summarization_metrics",
    "summarization_scorers",
]
