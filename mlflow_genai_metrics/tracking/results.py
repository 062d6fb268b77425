"""``log_results``: the full report of a run plain ``mlflow.genai.evaluate`` made with our scorers.

    evaluation = mlflow.genai.evaluate(data, scorers=[ClaimAlignment(judge), KeyPointCoverage(cheap), Grounding()])
    log_results(evaluation.run_id, [ClaimAlignment(judge), KeyPointCoverage(cheap), Grounding()])

In plain ``mlflow.genai.evaluate`` our scorers give their cards and MLflow aggregates their values itself
(``claim_alignment/mean``, ...); they keep no row and log nothing else. ``log_results`` then reads the run's traces
once MLflow's trace writers are done, judges them again with the scorers' judge (its cache answers what was asked:
no call when it is on), checks they are the rows MLflow evaluated (the ``num_rows`` of the dataset it logged as the
run's input) and logs every figure with its interval and n, the tables, the signature and the plots; or, when rows
are missing, nothing but the run's ``mgm.error`` tag and ``RunRowsMismatch`` with both counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .answer_judges import _AnswerScorer, log_answer_results
from .evaluate import log_summary_results


def log_results(run_id: str, judges: Sequence[Any], *, data: Any = None) -> Any:
    """Log the full report of ``run_id`` (see the module's docstring); ``judges``: scorers of one kind and one judge,
    summaries' (``ClaimAlignment``, ``KeyPointCoverage``, ``Grounding``) or answers' (``answer_scorers(...)``);
    ``data``: what was evaluated, so that rows MLflow did not store are named by their ids. Returns the result
    (``SummarizationResult`` or ``rag.AnswersResult``). The report signs one judge: scorers made with different
    Judges (a cheaper one for coverage) give their cards in the plain run, and their report one judge at a time."""
    judges = list(judges or [])
    if judges and all(isinstance(j, _AnswerScorer) for j in judges):
        return log_answer_results(run_id, judges, data)
    return log_summary_results(run_id, judges, data)
