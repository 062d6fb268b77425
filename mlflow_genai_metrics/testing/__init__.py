"""Test support that ships with the package: a scripted OpenAI-compatible judge server for deterministic
verdicts and fault injection, and deterministic judges for summaries and for answers from passages to run behind it (used by this project's
tests and benchmarks, and usable in yours). The server needs the `testing` extra
(``pip install "mlflow_genai_metrics[testing]"``); the scripts and records import without it."""

from .answers_judge import AnswersJudgeScript
from .batch_endpoints import ScriptedBatches
from .script import Fault, LoggedRequest, Reply, ScriptedRequest, count_tokens
from .scripted_server import ScriptedJudgeServer
from .summarization_judge import SummarizationJudgeScript, marked_sections, pass_of

__all__ = [
    "AnswersJudgeScript",
    "Fault",
    "LoggedRequest",
    "Reply",
    "ScriptedBatches",
    "ScriptedJudgeServer",
    "ScriptedRequest",
    "SummarizationJudgeScript",
    "count_tokens",
    "marked_sections",
    "pass_of",
]
