"""The cards of a plain ``mlflow.genai.evaluate`` run, as ``log_results`` reads them beside its report: the judges' own
cards (another judge's refused), what they spent (added to the run's usage and to each row's), and where MLflow's
own aggregates of them and the report count a row differently (said on the run)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from mlflow.entities import AssessmentSourceType
from mlflow.tracing.constant import AssessmentMetadataKey
from mlflow.tracking import MlflowClient

from .feedback import CACHED_TOKENS_KEY, CALLS_KEY
from .judges import _TaskScorer
from .run_logging import WARNING_TAG_PREFIX

_SPENT = {"judge/calls": CALLS_KEY, "judge/prompt_tokens": AssessmentMetadataKey.JUDGE_INPUT_TOKENS, "judge/cached_prompt_tokens": CACHED_TOKENS_KEY,
          "judge/completion_tokens": AssessmentMetadataKey.JUDGE_OUTPUT_TOKENS, "judge/cost_usd": AssessmentMetadataKey.JUDGE_COST}
_ROW_COLUMNS = {"judge/calls": "judge_calls", "judge/prompt_tokens": "judge_prompt_tokens", "judge/completion_tokens": "judge_completion_tokens",
                "judge/cost_usd": "judge_cost_usd"}  # the rows table's usage columns (scoring.USAGE_COLUMNS)


def the_judges_cards(traces: list[Any], ours: list[_TaskScorer]) -> list[tuple[str, Any]]:
    """The cards ``ours`` made on the run's traces, by trace id (people's labels under a judge's name are not cards).
    A card another judge made under one of these names is refused (``ValueError``) before anything is judged: the
    report would sign and count the judge it was given beside the evaluation's cards and spend (a run evaluated with
    one judge model and reported with another was logged as the second's)."""
    sources = {judge.name: judge.source().source_id for judge in ours}
    cards, other = [], {}
    for trace in traces:
        for card in trace.info.assessments or []:
            if card.name not in sources or card.source is None or card.source.source_type == AssessmentSourceType.HUMAN:
                continue
            if card.source.source_id != sources[card.name]:
                other.setdefault(card.name, card.source.source_id)
                continue
            cards.append((trace.info.trace_id, card))
    if other:
        made = "; ".join(f"{name} by {source!r}, not {sources[name]!r}" for name, source in sorted(other.items()))
        raise ValueError(f"the run's cards were made by other judges than the ones given to log_results ({made}): pass the judges "
                         "the evaluation used, so that the report signs the judge whose cards the run holds")
    return cards


CARDS_DIFFER = "cards_differ"  # the warning's kind: mgm.warning.cards_differ


def say_where_the_cards_and_the_report_differ(run_id: str, cards: list[tuple[str, Any]], rows: list[Any], table: pd.DataFrame) -> None:
    """The run says, as a warning tag, where its figures and MLflow's own aggregates of the cards (``cards``: the
    scorers' cards by trace id) count a row differently, instead of two silent answers: a row whose card failed in the
    evaluation (a judge or configuration error; a failure of the endpoint is not cached, so the report asked again and was answered)
    counts in the report's figures (judge_error_rate 0 beside an error card); a row whose card has a value but whose
    report failed (one of its passes did, a coverage pass beside a valid claim card) counts in none of them."""
    failed = {trace_id for trace_id, card in cards if card.error is not None and card.error.error_code in ("JUDGE_ERROR", "JUDGE_CONFIG_ERROR")}
    valued = {trace_id for trace_id, card in cards if card.error is None and card.value is not None}
    answered = set(table.loc[table["error"].fillna("").astype(str) == "", "id"].astype(str))
    judged_now = sorted(str(row.row.id) for row in rows if row.trace_id in failed and str(row.row.id) in answered)
    dropped = sorted(str(row.row.id) for row in rows if row.trace_id in valued and str(row.row.id) not in answered)
    said = []
    if judged_now:
        said.append(f"{len(judged_now)} row(s) whose card shows a judge error in the evaluation were judged again by log_results and "
                    f"answered (ids {', '.join(judged_now[:20])}{' ...' if len(judged_now) > 20 else ''}): the run's figures count "
                    "their verdicts, MLflow's own aggregates of the cards do not")
    if dropped:
        said.append(f"{len(dropped)} row(s) whose card has a value failed in log_results' judging (ids {', '.join(dropped[:20])}"
                    f"{' ...' if len(dropped) > 20 else ''}): MLflow's own aggregates of the cards count them, the run's figures "
                    "leave them out (a failed row is in no figure) and count them in judge_error_rate")
    if said:
        MlflowClient().set_tag(run_id, f"{WARNING_TAG_PREFIX}{CARDS_DIFFER}", "; ".join(said))


def add_the_cards_spend(result: Any, cards: list[tuple[str, Any]], rows: list[Any]) -> None:
    """The run's judge usage is what its evaluation spent, on the scorers' ``cards`` (each carries its own calls'
    tokens and cost), and what this report asked on top (nothing from the cache): the report alone once logged
    judge/cost_usd 0 and judge/calls 0 after an evaluation of 16 calls. Each row's usage columns in ``result.rows``
    gain its own cards' spend, so that they add up to the run's figures as on every other path (they once held the
    report's own: 0 calls a row beside judge/calls 12)."""
    metrics, table = result.metrics, result.rows
    row_of = {parsed.trace_id: str(parsed.row.id) for parsed in rows}
    position = {row_id: at for at, row_id in enumerate(table["id"].astype(str))} if "id" in table else {}
    for metric, key in _SPENT.items():
        spent = [(trace_id, float(card.metadata[key])) for trace_id, card in cards if (card.metadata or {}).get(key) is not None]
        if not spent or (metric == "judge/cost_usd" and metric not in metrics):  # a cost only where the judge has prices
            continue
        metrics[metric] = metrics.get(metric, 0.0) + sum(value for _, value in spent)
        column = _ROW_COLUMNS.get(metric)
        if column is None or column not in table:
            continue
        per_row = np.zeros(len(table))
        for trace_id, value in spent:
            if (at := position.get(row_of.get(trace_id, ""))) is not None:
                per_row[at] += value
        if metric == "judge/cost_usd":
            table[column] = table[column].astype(float).fillna(0.0) + per_row
        else:
            table[column] = table[column] + per_row.astype(np.int64)
