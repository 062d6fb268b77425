"""The study, as an application: candidates summarize articles, a judge scores them, every candidate becomes an
MLflow run (with its model logged), the runs are compared, and a gate decides what gets registered.

``mgm demo`` runs it on the package's own articles with local models; ``examples/reproduce_study.py`` runs it on
the BBC corpus with any OpenAI-compatible candidates and judge.
"""

from .articles import demo_articles, load_articles, sample_summaries, stratified_sample
from .run import Candidate, StudyResult, local_store, run_study, run_url, ui_command
from .table import COMPARED, comparison_lines, format_table, judge_failure_summary, warning_lines

__all__ = [
    "COMPARED",
    "Candidate",
    "StudyResult",
    "comparison_lines",
    "demo_articles",
    "format_table",
    "judge_failure_summary",
    "load_articles",
    "local_store",
    "run_study",
    "run_url",
    "sample_summaries",
    "stratified_sample",
    "ui_command",
    "warning_lines",
]
