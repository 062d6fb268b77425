"""Two shortcuts of the grounding check give the values of the full computation, bit for bit: a summary sentence that
is one of its source's own sentences, and its own best-matching one (``features._own_sentence``: most sentences of an
extractive summary), and a claim that repeats a summary's sentence scored against the same index (its support kept by
``scoring._known_supports``)."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA

from mlflow_genai_metrics.grounding import features as features_module
from mlflow_genai_metrics.grounding import lexical_supports, score_pairs
from mlflow_genai_metrics.grounding import scoring as scoring_module
from mlflow_genai_metrics.grounding.features import SourceIndex, _own_sentence, sentence_features
from mlflow_genai_metrics.grounding.words import split_sentences

# Names side by side, numbers with units, a negation, a sentence repeated, one whose words an earlier one all holds
# (not its own best sentence), one with no informative word, and symbols.
SOURCE = (
    "Leeds City Council approved a budget of 45 million pounds on Tuesday, after Anna Clarke spoke. "
    "The budget was not approved by the Opposition leader Tom Baker, who said taxes would rise 5% in 2025. "
    "The council approved a budget. "
    "It is what it is. "
    "Work on the first school will start in March, officials said - at a cost of $3.5m. "
    "The council approved a budget. "
    "Clarke said: \"We didn't fail, we won't fail.\""
)


def _bbc_sources(count: int) -> list[str]:
    path = SHARED_DATA / "bbc_news_summary.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()[:count]]


def test_own_sentences_have_the_features_the_full_computation_gives(monkeypatch):
    shortcuts = 0
    for source in [SOURCE, *_bbc_sources(60)]:
        index = SourceIndex(source)
        shortcuts += sum(_own_sentence(s.text, {t.key for t in s.tokens if t.info is not None}, index)
                         for s in index.sentences if any(t.info is not None for t in s.tokens))
        quick = [sentence_features(s, index) for s in index.sentences]
        with monkeypatch.context() as patched:  # no sentence is the source's own: every feature computed
            patched.setattr(SourceIndex, "sentence_at", lambda self, text: -1)
            full_index = SourceIndex(source)
            full = [sentence_features(s, full_index) for s in full_index.sentences]
        assert quick == full
    assert shortcuts > 0


def test_the_shortcut_is_taken_only_by_a_sentence_that_is_its_own_best():
    index = SourceIndex(SOURCE)
    keys = [{t.key for t in s.tokens if t.info is not None} for s in index.sentences]
    own = [_own_sentence(s.text, k, index) if k else None for s, k in zip(index.sentences, keys)]
    # the first sentence holds all the informative words of the short one (and of its repeat) and of the last one
    assert own == [True, True, False, None, True, False, False]


def test_a_claim_repeating_a_summary_sentence_takes_its_support(monkeypatch):
    summary = " ".join(split_sentences(SOURCE)[:3]) + " Taxes will fall."
    claims = split_sentences(summary)
    alone = lexical_supports(claims, [SOURCE] * len(claims))
    scored = []
    single_rows = scoring_module.single_rows
    monkeypatch.setattr(scoring_module, "single_rows", lambda sentences, index: scored.extend(sentences) or single_rows(sentences, index))
    indexes: dict[str, SourceIndex] = {}
    score_pairs([SOURCE], [summary], indexes=indexes)
    assert lexical_supports(claims, [SOURCE] * len(claims), indexes=indexes) == alone
    assert scored == []  # every claim is a sentence the summary's scoring gave a support
    other = lexical_supports(["Taxes will rise."], [SOURCE], indexes=indexes)
    assert [s.text for s in scored] == ["Taxes will rise."] and other == lexical_supports(["Taxes will rise."], [SOURCE])


@pytest.mark.parametrize("text", ["The council approved a budget.", "It is what it is.", "Tom Baker said taxes would rise."])
def test_a_summary_of_source_sentences_scores_as_before(text):
    # the full computation, every sentence forced through it, against the shortcut's
    quick = score_pairs([SOURCE], [text])
    original = features_module._own_sentence
    try:
        features_module._own_sentence = lambda *args: False
        full = score_pairs([SOURCE], [text])
    finally:
        features_module._own_sentence = original
    assert quick == full
