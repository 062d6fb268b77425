"""A statement the judge lists twice, differing only in case, spacing, punctuation or Unicode form, is one statement:
a claim verified and counted once, a key point one place in coverage's denominator."""

from __future__ import annotations

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.summarization.statements import distinct_statements
from mlflow_genai_metrics.testing import SummarizationJudgeScript

SOURCE = "The club won its match. The final score was 2-0. The striker scored twice."


def test_near_duplicate_key_points_count_once_in_coverage(scripted_server):
    points = ["The club won its match.", "the club  won its match", "The club won its match!",
              "The \ufb01nal score was 2-0.", "The final score was 2-0", "The striker scored twice."]  # \ufb01: the fi ligature
    server = scripted_server(SummarizationJudgeScript(key_points={SOURCE: points}))
    result = judge_summaries([SOURCE], ["The club won its match."], judge=judge_for(server), grounding=False, resamples=10)
    assert result.key_points["key_point"].tolist() == ["The club won its match.", "The \ufb01nal score was 2-0.", "The striker scored twice."]
    assert result.rows.loc[0, "coverage"] == pytest.approx(1 / 3)  # one of three points covered, not three of six


def test_near_duplicate_claims_are_verified_once(scripted_server):
    summary = "The club won its match. The club won its match!"
    script = SummarizationJudgeScript(claims={summary: ["The club won its match.", "THE CLUB WON ITS MATCH!", "The striker scored twice."]})
    result = judge_summaries([SOURCE], [summary], judge=judge_for(scripted_server(script)), grounding=False, resamples=10)
    assert result.claims["claim"].tolist() == ["The club won its match.", "The striker scored twice."]
    assert result.claims["duplicates_removed"].tolist() == [1, 0]


def test_a_minus_sign_before_a_number_makes_another_statement():
    kept, removed = distinct_statements(["It was -5 degrees.", "It was 5 degrees.", "It was \u22125 degrees"])
    assert kept == ["It was -5 degrees.", "It was 5 degrees."] and removed == [1, 0]


def test_punctuation_of_any_script_is_dropped_and_symbols_are_kept():
    # ASCII texts take a table, others each character's category: the same key either way. '%' is punctuation
    # (Po), '$' and '+' are symbols (Sc, Sm); the guillemets and the ideographic full stop are punctuation too.
    kept, removed = distinct_statements(["Prices rose 5%.", "prices rose 5%", "\u00abPrices rose 5\uff05\u00bb", "Prices rose 5\u3002",
                                         "Prices rose 5$", "Prices rose 5+", "Pr\u00efces rose 5$"])
    assert kept == ["Prices rose 5%.", "Prices rose 5$", "Prices rose 5+", "Pr\u00efces rose 5$"] and removed == [3, 0, 0, 0]
