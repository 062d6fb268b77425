"""Texts the grounding check cannot read get no score and a reason, and their verdicts are never suspect."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mlflow_genai_metrics import grounding_metrics
from mlflow_genai_metrics.grounding import lexical_supports, suspect
from mlflow_genai_metrics.grounding.readable import unreadable

ENGLISH = ("The city council approved the new budget on Monday after a long debate. The mayor said the plan would "
           "fund two new schools and repair the roads in the north of the city.")
# The same news in each language: a faithful summary and an invented one.
OTHER = {
    "Chinese": ("市议会周一在长时间辩论后批准了新预算。市长说，该计划将资助两所新学校并修复城市北部的道路。",
                "市议会批准了新预算。", "市议会否决了预算，市长辞职了。", "Chinese or Japanese ideographs (CJK)"),
    "Japanese": ("市議会は月曜日、長い議論の末に新しい予算を承認した。市長は、この計画で新しい学校を二つ建て、北部の道路を直すと述べた。",
                 "市議会は新しい予算を承認した。", "市議会は予算を否決し、市長は辞任した。", "Japanese (kanji and kana)"),
    "Arabic": ("وافق مجلس المدينة على الميزانية الجديدة يوم الاثنين بعد نقاش طويل. وقال رئيس البلدية إن الخطة ستمول مدرستين جديدتين وتصلح الطرق في شمال المدينة.",
               "وافق مجلس المدينة على الميزانية الجديدة.", "رفض مجلس المدينة الميزانية واستقال رئيس البلدية.", "Arabic"),
}


@pytest.mark.parametrize("language", sorted(OTHER))
def test_summaries_in_another_script_get_no_score_and_a_reason(language):
    source, faithful, invented, script = OTHER[language]
    rows = grounding_metrics([source, source], [faithful, invented]).rows
    for position in (0, 1):
        assert pd.isna(rows.loc[position, "grounding"]) and pd.isna(rows.loc[position, "grounded"])
        assert f"written mostly in {script}" in rows.loc[position, "grounding_reasoning"]


@pytest.mark.parametrize("language", sorted(OTHER))
def test_claims_in_another_script_have_no_support_and_no_verdict_on_them_is_suspect(language):
    source, faithful, invented, _ = OTHER[language]
    supports = lexical_supports([faithful, invented], [source, source])
    assert all(math.isnan(s) for s in supports)
    assert not any(suspect(verdict, s) for s in supports for verdict in ("yes", "no", "idk"))


def test_an_english_summary_of_a_source_in_another_script_is_not_scored():
    source = OTHER["Chinese"][0]
    [reason] = grounding_metrics([source], ["The council approved the budget."]).rows["grounding_reasoning"]
    assert "the source is written mostly in Chinese or Japanese ideographs" in reason


def test_latin_script_in_another_language_is_not_read_as_english():
    french = ("Le conseil municipal a approuvé lundi le nouveau budget après un long débat. Le maire a déclaré que le "
              "plan financerait deux nouvelles écoles et la réparation des routes du nord de la ville.")
    assert unreadable(french).startswith("not English")
    assert unreadable(ENGLISH) is None
    assert unreadable("jordan spieth , brandt snedeker , " * 10) is None  # names, repeated: English, if poor


def test_english_with_a_few_foreign_words_and_short_texts_are_read():
    assert unreadable("Mr Müller met Zhou Enlai (周恩来) in Beijing, the report said.") is None
    assert unreadable("Council approves budget") is None  # too short to test for language: English is assumed
    assert unreadable("") is None
    [score] = grounding_metrics([ENGLISH], ["Mr Müller said the council approved the new budget."]).rows["grounding"]
    assert 0 <= score <= 1
