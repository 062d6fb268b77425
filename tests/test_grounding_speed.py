"""The grounding check made faster (issue 47) gives the scores it gave before: pinned scores, reasoning and features
computed with the code before the change, and each shortcut checked against the plain computation it replaces."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import SHARED_DATA

from mlflow_genai_metrics.grounding import lexical_supports, load_model, score_pairs, words
from mlflow_genai_metrics.grounding import readable as readable_module
from mlflow_genai_metrics.grounding.features import (
    ROW_FEATURES,
    SourceIndex,
    _best_sentences,
    _lcs_length,
    feature_rows,
    row_features,
    summary_features,
    texts_features,
)
from mlflow_genai_metrics.grounding.model import GroundingModel
from mlflow_genai_metrics.grounding.vectors import padded_word_matrix, row_sums
from mlflow_genai_metrics.grounding.words import split_sentences
from mlflow_genai_metrics.text import lcs_length
from mlflow_genai_metrics.text import split_sentences as text_split_sentences

SOURCE = (
    "The city council of Leeds approved a budget of 45 million pounds on Tuesday. The mayor, Anna Clarke, said the "
    "money would pay for new schools and two hospitals. Opposition leader Tom Baker voted against the plan, saying "
    "taxes would rise. Work on the first school will start in March, officials said."
)
SUMMARIES = [
    "The city council of Leeds approved a budget of 45 million pounds on Tuesday. The mayor, Anna Clarke, said the money would pay for new schools and two hospitals.",
    "The city council of Leeds approved a budget of 60 million pounds on Tuesday.",
    "Tom Baker approved a budget of 45 million pounds. Anna Clarke voted against the plan.",
    "The council did not approve the budget. Taxes would fall, officials said.",
    "Leeds councillors endorsed spending on classrooms and clinics, while critics warned of higher levies in spring.",
    "Mayor Tom Clarke said work on the first hospital starts in April 2025.",
    "The council approved the budget.",
]
CLAIMS = ["The council approved a budget of 45 million pounds.", "Anna Clarke is the mayor.", "Taxes will fall.",
          "Work starts in June.", "Officials praised the stadium."]
# Computed by the code before the change (grounding:v2-973e, commit 4fd7b4d), on the machine the change was made on.
GROUNDINGS = [0.6996073162477148, 0.09101144470169423, 0.2228777533541191, 0.055318639752412684, 0.03342790002799903,
              0.05084303710895688, 0.4268697266503779]
SUPPORTS = [0.4386688646809453, 0.2725195013647163, 0.14389740809547769, 0.2318492140806331, 0.1843668781976533]
# ... but where one source sentence holds every word of the weakest sentence: that was "spread out (the best-matching
# source sentence holds 100% of them)", a reason contradicting itself.
REASONS = [
    'Least supported (support 0.55): "The mayor, Anna Clarke, said the money would pay for new schools and two hospitals." -- nothing the check can name is missing: one source sentence holds all its words, in their order',
    'Least supported (support 0.09): "The city council of Leeds approved a budget of 60 million pounds on Tuesday." -- numbers or dates the source lacks (or has with another unit): 60',
    'Least supported (support 0.30): "Anna Clarke voted against the plan." -- its words are in the source but spread out (the best-matching source sentence holds 50% of them)',
    'Least supported (support 0.10): "The council did not approve the budget." -- a negation the best-matching source sentences lack',
    'Least supported (support 0.03): "Leeds councillors endorsed spending on classrooms and clinics, while critics warned of higher levies in spring." -- numbers or dates the source lacks (or has with another unit): spring; words the source lacks: councillors, endorsed, spending, classrooms, clinics, critics',
    'Least supported (support 0.05): "Mayor Tom Clarke said work on the first hospital starts in April 2025." -- numbers or dates the source lacks (or has with another unit): 2025, April, first',
    'Least supported (support 0.43): "The council approved the budget." -- nothing the check can name is missing: one source sentence holds all its words, in their order',
]
# The row features of the summary of new words (the word vectors' nearest-neighbour path), from the same code.
NOVEL_FEATURES = [0.09090909090909091, 0.09090909090909091, 0.09090909090909091, 0.09090909090909091,
                  0.09090909090909091, 0.09090909090909091, 10.0, 10.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0,
                  0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.1, 0.1, 0.4783113503997976, 0.4783113503997976, 0.0, 0.0,
                  0.42265135049819946, 0.42265135049819946, 1.0, 2.833213344056216, 0.3076923076923077]
# BBC rows (``text``, reference sentences joined by spaces): id position -> grounding, from the same code.
BBC_GROUNDINGS = {983: 0.096881270273348, 1463: 0.09883126821810496, 345: 0.7946002426265006, 1591: 0.833027479159303,
                  7: 0.7884591687235492, 333: 0.8027961966446229, 2224: 0.7804140416913932}
# The meaning features are float32 products from numpy's BLAS, whose kernel depends on the CPU (see test_grounding's
# check rows): compared to 1e-6; every other feature, and the scores, to the last bit here.
MEANING = [i for i, name in enumerate(ROW_FEATURES) if name.startswith(("meaning_", "weakest_meaning"))]


def test_scores_and_reasoning_are_those_before_the_speed_up():
    rows = score_pairs([SOURCE] * len(SUMMARIES), SUMMARIES)
    assert np.allclose([r.grounding for r in rows], GROUNDINGS, rtol=0, atol=1e-9)
    assert [r.reasoning.split("\n")[1] for r in rows] == REASONS
    assert np.allclose(lexical_supports(CLAIMS, [SOURCE] * len(CLAIMS)), SUPPORTS, rtol=0, atol=1e-9)


def test_the_reason_for_a_sentence_whose_words_the_source_holds_says_where_it_holds_them():
    """A sentence whose every word one source sentence holds was "spread out (... holds 100% of them)"."""
    source = ["The council approved the budget on Monday. Taxes will rise next year, officials said."]
    why = [score_pairs(source, [summary])[0].reasoning.split(" -- ")[1] for summary in (
        "The council approved the budget on Monday.", "On Monday the budget was approved by the council.",
        "Officials said the council approved taxes.")]
    assert why == ["nothing the check can name is missing: one source sentence holds all its words, in their order",
                   "its words are all in one source sentence, in another order (25% of them in the source's order)",
                   "its words are in the source but spread out (the best-matching source sentence holds 50% of them)"]


def test_features_of_a_summary_of_new_words_are_those_before_the_speed_up():
    index = SourceIndex(SOURCE)
    found = row_features(summary_features(SUMMARIES[4], index), index)
    other = [i for i in range(len(ROW_FEATURES)) if i not in MEANING]
    assert [found[i] for i in other] == [NOVEL_FEATURES[i] for i in other]
    assert np.allclose([found[i] for i in MEANING], [NOVEL_FEATURES[i] for i in MEANING], rtol=0, atol=1e-6)


def test_bbc_scores_are_those_before_the_speed_up():
    path = SHARED_DATA / "bbc_news_summary.jsonl"
    if not path.exists():
        pytest.skip(f"the BBC data is not at {path} (../shared/data beside the project)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    chosen = [rows[i] for i in BBC_GROUNDINGS]
    scores = score_pairs([r["text"] for r in chosen], [" ".join(r["reference_summary_sentences"]) for r in chosen])
    assert np.allclose([s.grounding for s in scores], list(BBC_GROUNDINGS.values()), rtol=0, atol=1e-9)


def test_feature_rows_are_row_features_of_the_summary_and_of_each_sentence():
    index = SourceIndex(SOURCE)
    for summary in SUMMARIES:
        sentences = summary_features(summary, index)
        expected = np.array([row_features(sentences, index)] + [row_features([s], index) for s in sentences])
        assert np.array_equal(feature_rows(sentences, index), expected)
        assert np.array_equal(feature_rows(sentences, index, alone=False), expected[:1])


def test_trees_scored_at_once_give_the_walk_from_the_root_including_missing_values():
    model = load_model()
    assert model.exits is not None
    rng = np.random.default_rng(0)
    check = np.array(model.meta["check"]["features"], dtype=np.float64)
    for rows in (1, 3, 9, 1500):
        features = check[rng.integers(0, len(check), rows)] * rng.uniform(0.8, 1.2, (rows, check.shape[1]))
        features[::4, rng.integers(0, check.shape[1])] = np.nan
        assert np.array_equal(model.exits.leaf_values(features), model._leaf_values(features))
        walked = model.baseline + np.zeros(rows)
        for leaf in model._leaf_values(features):  # tree by tree, as scikit-learn adds them
            walked += leaf
        assert np.array_equal(model.raw(features), walked)


def test_a_tree_too_wide_for_the_bit_masks_is_walked():
    leaves = 70
    tree = {"feature": [0] * (2 * leaves - 1), "threshold": [float(i) for i in range(2 * leaves - 1)],
            "left": [], "right": [], "missing_left": [True] * (2 * leaves - 1), "is_leaf": [], "value": []}
    for node in range(2 * leaves - 1):  # a chain: each split node's left child is a leaf
        split = node % 2 == 0 and node < 2 * leaves - 2
        tree["left"].append(node + 1 if split else 0)
        tree["right"].append(node + 2 if split else 0)
        tree["is_leaf"].append(not split)
        tree["value"].append(float(node))
    spec = {"features": ROW_FEATURES, "threshold": 0.5, "suspect": {"support_low": 0.1, "support_high": 0.9},
            "baseline": 0.0, "calibration": {"a": 1.0, "b": 0.0}, "trees": [tree]}
    model = GroundingModel.from_dict(spec, "grounding:test")
    assert model.exits is None
    features = np.zeros((3, len(ROW_FEATURES)))
    features[:, 0] = [-1.0, 5.0, 500.0]
    assert model.raw(features).tolist() == [1.0, 7.0, 138.0]


def test_sentence_sums_at_once_equal_numpy_sums_sentence_by_sentence():
    words = "council budget schools hospital mayor taxes plan officials march leeds pounds money".split()
    _, padded = padded_word_matrix(words)
    rng = random.Random(0)
    groups = [[rng.randrange(len(padded) - 1) for _ in range(rng.randrange(0, 30))] for _ in range(150)]
    sums = row_sums(padded, groups)
    for group, found in zip(groups, sums):
        assert np.array_equal(found, padded[group].sum(0) if group else np.zeros(padded.shape[1], dtype=np.float32))


def test_sentences_are_split_as_the_text_module_splits_them():
    rng = random.Random(1)
    letters = "aB .!?'\"\u201d\u2019)]\n\t\r\x0b\xa0\u2028\x85 .?!"
    texts = [SOURCE, *SUMMARIES] + ["".join(rng.choice(letters) for _ in range(rng.randrange(40))) for _ in range(20000)]
    for text in texts:
        assert split_sentences(text) == text_split_sentences(text), repr(text)


def test_best_sentences_and_order_match_their_plain_definitions():
    rng = random.Random(2)
    for _ in range(3000):
        count = rng.randrange(0, 70)
        sentences = [{rng.randrange(12) for _ in range(rng.randrange(6))} for _ in range(count)]
        keys = {rng.randrange(14) for _ in range(rng.randrange(8))}
        masks = [sum(1 << i for i, s in enumerate(sentences) if key in s) for key in keys]
        best, overlap, second, together = _best_sentences([m for m in masks if m], count)
        if not count:
            assert (best, overlap, second, together) == (-1, 0, -1, 0)
            continue
        overlaps = [len(keys & s) for s in sentences]
        assert (best, overlap) == (overlaps.index(max(overlaps)), max(overlaps))
        gains = [len((keys - sentences[best]) & s) if i != best else 0 for i, s in enumerate(sentences)]
        assert (second, together) == ((gains.index(max(gains)) if max(gains) else -1), overlap + max(gains))
        a, b = [str(rng.randrange(5)) for _ in range(rng.randrange(9))], [str(rng.randrange(5)) for _ in range(rng.randrange(9))]
        assert _lcs_length(a, b) == lcs_length(a, b) and _lcs_length(a, a) == len(a)


def test_a_source_is_read_once_for_its_summary_and_its_claims(monkeypatch):
    read = []
    unreadable = readable_module.unreadable
    monkeypatch.setattr(readable_module, "unreadable", lambda text: read.append(text) or unreadable(text))
    indexes: dict[str, SourceIndex] = {}
    score_pairs([SOURCE], [SUMMARIES[0]], indexes=indexes)
    supports = lexical_supports(CLAIMS, [SOURCE] * len(CLAIMS), indexes=indexes)
    assert read.count(SOURCE) == 1 and len(indexes) == 1
    assert np.allclose(supports, SUPPORTS, rtol=0, atol=1e-9)
    foreign = "Le conseil a voté le budget de la ville et les écoles de la région pour les enfants et les parents du quartier."
    assert np.isnan(lexical_supports(["Le conseil a voté."], [foreign], indexes=indexes)[0])
    assert foreign not in indexes


def test_a_word_with_an_apostrophe_is_analysed_as_before():
    """The whole word is stemmed only when it is a negation, function, number or date word (as before, when it was
    stemmed first and its stem dropped for a content word's tail)."""
    for word in ["council's", "didn't", "Monday's", "it's", "won\u2019t", "one's", "first's", "million's", "isn't",
                 "O'Neill", "rock'n'roll", "year\u2019s", "can't", "d'amuro", "ain't", "they're"]:
        lower = word.lower()
        key, kind = words._word(lower)
        if kind == "content":
            key, kind = words._word(lower.replace("\u2019", "'").split("'", 1)[0])
        token = words._word_token(word)
        assert (token.key, token.kind) == (key, kind), word


def test_claims_scored_together_equal_each_scored_alone():
    index = SourceIndex(SOURCE)
    together = lexical_supports(CLAIMS + SUMMARIES[:2], [SOURCE] * (len(CLAIMS) + 2))
    alone = [lexical_supports([claim], [SOURCE])[0] for claim in CLAIMS + SUMMARIES[:2]]
    assert together == alone
    texts = CLAIMS + SUMMARIES
    assert [[s.values for s in found] for found in texts_features(texts, index)] == \
        [[s.values for s in summary_features(text, SourceIndex(SOURCE))] for text in texts]


def test_a_sentence_scored_against_an_index_is_read_from_it_not_scored_again(monkeypatch):
    from mlflow_genai_metrics.grounding import features

    calls = []
    plain = features.sentence_features
    monkeypatch.setattr(features, "sentence_features", lambda sentence, *a, **k: calls.append(sentence.text) or plain(sentence, *a, **k))
    index = SourceIndex(SOURCE)
    summary = SUMMARIES[0] + " " + SUMMARIES[2]
    sentences = split_sentences(summary)
    first = score_pairs([SOURCE], [summary], indexes={SOURCE: index})
    assert sorted(calls) == sorted(sentences)
    # The claims repeat two of the summary's sentences word for word (one reflowed), and add one it lacks; a second
    # summary of the same source shares a sentence with the first.
    claims = [sentences[1], "  ".join(sentences[2].split()) + "\n", CLAIMS[2]]
    supports = lexical_supports(claims, [SOURCE] * 3, indexes={SOURCE: index})
    second = score_pairs([SOURCE], [SUMMARIES[6] + " " + sentences[0]], indexes={SOURCE: index})
    assert sorted(calls) == sorted([*sentences, CLAIMS[2], SUMMARIES[6]])
    # ... with the values they have on an index of their own, bit for bit
    assert supports == [lexical_supports([claim], [SOURCE])[0] for claim in claims]
    assert first == score_pairs([SOURCE], [summary]) and second == score_pairs([SOURCE], [SUMMARIES[6] + " " + sentences[0]])
    assert [s.values for s in texts_features([summary], index)[0]] == [s.values for s in summary_features(summary, SourceIndex(SOURCE))]
