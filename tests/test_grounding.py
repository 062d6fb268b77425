"""The grounding check: the shipped model file, what lowers a summary's grounding, the suspect rule, and
``grounding_metrics`` (validation, determinism, the cache, the aggregates)."""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import stat

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA
from helpers import same_metrics

import mlflow_genai_metrics
from mlflow_genai_metrics import grounding_metrics
from mlflow_genai_metrics.grounding import (
    MODEL_FILE,
    lexical_support,
    lexical_supports,
    load_model,
    model_tag,
    score_pairs,
    support_thresholds,
    suspect,
)
from mlflow_genai_metrics.grounding.cache import CACHE_FILE
from mlflow_genai_metrics.grounding.features import SourceIndex, row_features, summary_features
from mlflow_genai_metrics.grounding.readable import RULE
from mlflow_genai_metrics.grounding.vectors import VECTORS_FILE, vectors_tag

SOURCE = (
    "The city council of Leeds approved a budget of 45 million pounds on Tuesday. The mayor, Anna Clarke, said the "
    "money would pay for new schools and two hospitals. Opposition leader Tom Baker voted against the plan, saying "
    "taxes would rise. Work on the first school will start in March, officials said."
)
FAITHFUL = (
    "The city council of Leeds approved a budget of 45 million pounds on Tuesday. The mayor, Anna Clarke, said the "
    "money would pay for new schools and two hospitals."
)


def grounding_of(summary: str, source: str = SOURCE) -> float:
    return score_pairs([source], [summary])[0].grounding


def test_shipped_model_scores_exactly_as_scikit_learn_did_at_training():
    spec = json.loads(MODEL_FILE.read_text())
    check = spec["check"]
    scores = load_model().predict(np.array(check["features"]))
    assert len(check["predictions"]) >= 4
    assert np.max(np.abs(scores - np.array(check["predictions"]))) <= 1e-12


def test_features_of_the_check_rows_are_those_the_model_was_trained_on():
    """Feature code that drifted from the shipped model's training would silently change every score."""
    folder = SHARED_DATA / "faithfulness"
    if not folder.exists():
        pytest.skip(f"the labelled sets are not at {folder} (../shared/data beside the project)")
    check = json.loads(MODEL_FILE.read_text())["check"]
    frames = {name: pd.read_json(folder / f"{name}.jsonl", lines=True).set_index("id") for name in ("frank", "summedits")}
    for key, stored in zip(check["ids"], check["features"]):
        name, row_id = key.split(":", 1)
        row = frames[name].loc[row_id]
        index = SourceIndex(row["source"])
        # The meaning features are float32 sums from numpy's BLAS, whose kernel depends on the CPU: the same code gives
        # up to 1.2e-7 apart on a SkylakeX OpenBLAS kernel and on the machine that stored them. A drift of the feature
        # code moves them by far more than 1e-6.
        assert np.allclose(row_features(summary_features(row["summary"], index), index), stored, rtol=0, atol=1e-6), key


def test_model_tag_carries_the_version_and_changes_with_the_file(tmp_path):
    copy = tmp_path / MODEL_FILE.name
    shutil.copy(MODEL_FILE, copy)
    assert model_tag(copy) == model_tag() == load_model().tag
    assert model_tag().startswith("grounding:v2-") and len(model_tag().split("-")[-1]) == 4
    spec = json.loads(copy.read_text())
    spec["trees"][0]["value"][-1] += 1e-9
    copy.write_text(json.dumps(spec))
    assert model_tag(copy) != model_tag()


def test_the_shipped_models_tag_is_read_once_per_process(monkeypatch):
    # A scorer's feedback names the model on every row: parsing the 160 kB file each time cost 4 ms a row.
    load_model()
    reads = []
    real_read = pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: reads.append(self) or real_read(self))
    assert [model_tag() for _ in range(3)] == [load_model().tag] * 3
    assert reads == []  # a path given is still read, the shipped model's never again
    assert model_tag(str(MODEL_FILE)) == load_model().tag and reads == [MODEL_FILE]


def test_a_model_trained_on_other_word_vectors_is_refused(tmp_path):
    spec = json.loads(MODEL_FILE.read_text())
    assert spec["word_vectors"] == vectors_tag()
    copy = tmp_path / MODEL_FILE.name
    copy.write_text(json.dumps({**spec, "word_vectors": "words:v1-0000"}))
    with pytest.raises(ValueError, match="trained on word vectors words:v1-0000"):
        load_model(copy)


def test_a_model_written_for_another_readable_text_rule_is_refused(tmp_path):
    spec = json.loads(MODEL_FILE.read_text())
    assert spec["readable"] == RULE
    copy = tmp_path / MODEL_FILE.name
    copy.write_text(json.dumps({**spec, "readable": "readable:v0"}))
    with pytest.raises(ValueError, match="readable-text rule readable:v0"):
        load_model(copy)


def test_grounding_is_calibrated_and_grounded_is_its_half():
    spec = json.loads(MODEL_FILE.read_text())
    assert spec["threshold"] == load_model().threshold == 0.5
    assert spec["calibration"]["a"] > 0  # Platt scaling keeps the trees' order
    for name in ("frank", "summedits"):
        assert spec["training"]["per_set"][name]["out_of_fold_calibration_error"] < 0.1


def test_faithful_summary_is_grounded():
    result = score_pairs([SOURCE], [FAITHFUL])[0]
    assert result.grounded == 1 and result.grounding >= load_model().threshold


def test_planted_wrong_number_lowers_grounding():
    assert grounding_of(FAITHFUL.replace("45 million", "60 million")) < grounding_of(FAITHFUL)


def test_swapped_entity_lowers_grounding():
    assert grounding_of(FAITHFUL.replace("Leeds", "Bristol")) < grounding_of(FAITHFUL)
    assert grounding_of(FAITHFUL.replace("Anna Clarke", "Tom Baker")) < grounding_of(FAITHFUL)  # another of its names


def test_invented_sentence_lowers_grounding():
    invented = FAITHFUL + " The budget was criticised by the Prime Minister in Parliament last year."
    assert grounding_of(invented) < grounding_of(FAITHFUL)


def test_reasoning_quotes_the_least_supported_sentence_and_why():
    result = score_pairs([SOURCE], [FAITHFUL.replace("45 million", "60 million")])[0]
    assert '"The city council of Leeds approved a budget of 60 million pounds on Tuesday."' in result.reasoning
    assert "numbers or dates the source lacks" in result.reasoning and "60" in result.reasoning.splitlines()[1]
    one = score_pairs([SOURCE], ["The city council of Leeds approved a budget."])[0]
    assert one.reasoning.splitlines()[0].endswith("; 1 sentence.")  # a count reads as English: 1 sentence, 2 sentences


def test_summary_with_no_sentence_has_no_grounding():
    result = score_pairs([SOURCE], ["  ...  "])[0]
    assert result.grounding is None and result.grounded is None and "no sentence" in result.reasoning


@pytest.mark.parametrize("summary", ["It is.", "The the the of and.", "a", "It was not, and it is."])
def test_a_summary_of_function_words_alone_has_no_grounding(summary):
    """Nothing to hold against the source: every share of the features is 1 of nothing, and such summaries scored
    0.57-0.58, grounded, above faithful one-sentence summaries (0.24-0.43), so a summarizer answering "It is." was
    grounded on every row. Now not checked, and said so (an ``UNREADABLE`` card)."""
    result = score_pairs([SOURCE], [summary])[0]
    assert (result.grounding, result.grounded) == (None, None)
    assert result.reasoning == ("Not checked: the summary has no content word, number or date, only function words: "
                                "nothing to hold against the source.")
    assert math.isnan(lexical_support(summary, SOURCE))  # as a claim: no support, never suspect
    assert not suspect("no", lexical_support(summary, SOURCE))


def test_a_sentence_of_function_words_beside_others_leaves_the_summary_scored_as_before():
    """Only a summary with nothing to check at all goes unscored: a row with one such sentence among others is scored
    as the model was trained (every row of BBC and the four labelled sets scores as before: 9,626 compared)."""
    beside = score_pairs([SOURCE], [f"{FAITHFUL} It is."])[0]
    assert beside.grounding is not None and beside.reasoning.splitlines()[0].endswith("; 3 sentences.")


def test_yes_on_an_invented_claim_is_suspect_and_on_a_copied_claim_is_not():
    invented = lexical_support("The Prime Minister criticised the budget in Parliament.", SOURCE)
    copied = lexical_support("The city council of Leeds approved a budget of 45 million pounds on Tuesday.", SOURCE)
    assert suspect("yes", invented) and not suspect("yes", copied)


def test_no_on_a_copied_claim_is_suspect_and_on_an_invented_claim_is_not():
    invented = lexical_support("The Prime Minister criticised the budget in Parliament.", SOURCE)
    copied = lexical_support("The city council of Leeds approved a budget of 45 million pounds on Tuesday.", SOURCE)
    assert suspect("no", copied) and suspect("idk", copied) and not suspect("no", invented)


def test_suspect_thresholds_come_from_the_model_file_and_are_ordered():
    spec = json.loads(MODEL_FILE.read_text())["suspect"]
    assert support_thresholds() == (spec["support_low"], spec["support_high"])
    assert 0 < spec["support_low"] < spec["support_high"] < 1
    assert not suspect("yes", math.nan)
    with pytest.raises(ValueError, match="yes, no or idk"):
        suspect("maybe", 0.5)


def test_lexical_supports_of_many_claims_equal_each_alone():
    claims = ["The mayor is Anna Clarke.", "Tom Baker voted against the plan.", "...", "Taxes were cut."]
    many = lexical_supports(claims, [SOURCE] * len(claims))
    assert math.isnan(many[2])
    assert [m for i, m in enumerate(many) if i != 2] == [lexical_support(c, SOURCE) for i, c in enumerate(claims) if i != 2]


def test_grounding_metrics_is_exported_from_the_package():
    assert mlflow_genai_metrics.grounding_metrics is grounding_metrics
    assert "grounding_metrics" in mlflow_genai_metrics.__all__


def test_grounding_metrics_names_bad_rows():
    with pytest.raises(ValueError) as raised:
        grounding_metrics([SOURCE, "", SOURCE], [FAITHFUL, FAITHFUL, 7], ids=["a", "b", "c"])
    message = str(raised.value)
    assert "row 1 (id 'b'): the source is empty" in message and "row 2 (id 'c'): the summary is not text" in message


@pytest.mark.parametrize("blank", ["\u200b\u200b", "\x00", "\ufeff", "...", "- -"])
def test_a_source_with_no_letter_or_digit_is_refused_naming_its_row(blank):
    """Zero-width spaces, NUL, a byte-order mark or punctuation alone were scored (0.019, not grounded) and counted
    in the aggregates, where a source of spaces was refused."""
    with pytest.raises(ValueError, match=r"row 1 \(id 'b'\): the source has no letter or digit"):
        grounding_metrics([SOURCE, blank], [FAITHFUL, FAITHFUL], ids=["a", "b"])


def test_a_summary_scores_the_same_whatever_its_unicode_form_or_the_invisible_marks_inside_its_words():
    """Decomposed accents (NFD) and a soft hyphen or zero-width space inside a word split it into pieces the source
    lacks: a summary in decomposed form scored 0.018 against 0.278 ("names the source lacks: Mu, Zu")."""
    import unicodedata

    source = "Zürich's mayor Müller opened the new bridge on Friday. It cost 40 million francs. Critics said it was late."
    summary = "Müller opened the bridge in Zürich on Friday."
    rows = [summary, unicodedata.normalize("NFD", summary), summary.replace("bridge", "bri\u00addge"),
            summary.replace("Müller", "Mül\u200bler")]
    found = grounding_metrics([source] * 4, rows, ids=["nfc", "nfd", "soft hyphen", "zero width"]).rows
    assert found["grounding"].nunique() == 1 and found["grounded"].nunique() == 1, found[["id", "grounding"]]  # (the reasoning quotes each as written)


def test_numbers_are_compared_at_their_exact_value():
    """Numbers were keyed at six significant digits: 8,336,815 against the source's 8,336,817 scored as the right
    figure, and any two numbers past a float's range were one infinity. "5m", "5 million" and "5,000,000" stay one."""
    from mlflow_genai_metrics.grounding.words import analyse_sentences

    def keys(text):
        return [token.key for sentence in analyse_sentences(text) for token in sentence.tokens if token.kind == "number"]

    assert keys("8,336,815 8,336,817 1e999 9" + "0" * 400) == ["8336815", "8336817", "1", "999", "9" + "0" * 400]
    assert len(set(keys("5m, 5 million, 5,000,000 and 5000000.0"))) == 1
    source = "The census counted 8,336,817 people in the city last year. The mayor welcomed the figure."
    found = grounding_metrics([source] * 2, ["The census counted 8,336,817 people.", "The census counted 8,336,815 people."]).rows
    assert found["grounding"].iloc[1] < found["grounding"].iloc[0] and "8,336,815" in found["grounding_reasoning"].iloc[1]


def rows_and_metrics(**options):
    summaries = [FAITHFUL, FAITHFUL.replace("45", "60"), FAITHFUL + " The Prime Minister resigned.", ""]
    return grounding_metrics([SOURCE] * 4, summaries, ids=["ok", "number", "invented", "empty"], **options)


def test_grounding_metrics_rows_and_aggregates():
    result = rows_and_metrics()
    rows = result.rows.set_index("id")
    assert list(result.rows.columns) == ["id", "source_key", "grounding", "grounded", "grounding_reasoning"]
    assert pd.isna(rows.loc["empty", "grounding"]) and pd.isna(rows.loc["empty", "grounded"])
    m = result.metrics
    assert m["grounding_n"] == m["grounded_rate_n"] == 3.0  # the empty summary counts in neither
    assert m["grounding"] == pytest.approx(rows["grounding"].dropna().mean())
    assert math.isnan(m["grounding_ci_low"]) and math.isnan(m["grounding_ci_high"])  # a mean of 3 rows: no interval holds
    assert m["grounded_rate"] == pytest.approx(rows["grounded"].dropna().mean())
    assert 0 < m["grounded_rate_ci_low"] < m["grounded_rate_ci_high"] < 1  # Wilson: never collapses to a point
    assert result.model_tag == model_tag()


def test_grounding_metrics_is_deterministic():
    first, second = rows_and_metrics(cache=False), rows_and_metrics(cache=False)
    pd.testing.assert_frame_equal(first.rows, second.rows)
    assert same_metrics(first.metrics, second.metrics)


def test_a_rerun_reads_the_cache_and_recomputes_nothing(tmp_path):
    first = rows_and_metrics(cache_dir=tmp_path)
    again = rows_and_metrics(cache_dir=tmp_path)
    assert (first.computed_rows, first.cache_hits) == (4, 0)
    assert (again.computed_rows, again.cache_hits) == (0, 4)
    pd.testing.assert_frame_equal(first.rows, again.rows)
    assert same_metrics(first.metrics, again.metrics)


def test_without_the_cache_every_row_is_computed(tmp_path):
    rows_and_metrics(cache_dir=tmp_path)
    assert rows_and_metrics(cache_dir=tmp_path, cache=False).computed_rows == 4


def test_grounding_cache_is_owner_only(tmp_path):
    folder = tmp_path / "cache"
    rows_and_metrics(cache_dir=folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / CACHE_FILE).stat().st_mode) == 0o600


def test_the_model_vectors_and_stem_table_are_package_data():
    import fnmatch
    import tomllib
    from pathlib import Path

    package = Path(mlflow_genai_metrics.__file__).parent
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["mlflow_genai_metrics"]
    from mlflow_genai_metrics.grounding.words import STEM_TABLE

    for shipped in (MODEL_FILE, VECTORS_FILE, STEM_TABLE):
        assert shipped.exists() and any(fnmatch.fnmatch(shipped.relative_to(package).as_posix(), glob) for glob in globs), shipped


def test_scoring_does_not_import_mlflow():
    import subprocess
    import sys

    code = ("import sys\nfrom mlflow_genai_metrics import grounding_metrics\n"
            "grounding_metrics(['The council met.'], ['The council met.'], cache=False)\n"
            "print('mlflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_a_word_is_spelt_by_its_longest_pieces_or_not_at_all():
    from mlflow_genai_metrics.grounding.vectors import load_vectors, word_vector, wordpiece

    ids = {"un": 1, "u": 2, "##believ": 3, "##able": 4, "##a": 5}
    assert wordpiece("unbelievable", ids) == [1, 3, 4]  # "un", not "u": the longest piece that matches
    assert wordpiece("unbelievablez", ids) is None  # no piece spells the "z"
    table = load_vectors()
    assert table.pieces("the") == [table.rows["the"]] and word_vector("日本語") is None  # the table keeps no other script
    for word, synonym, unrelated in (("film", "movie", "tax"), ("purchase", "buy", "election"), ("said", "stated", "goal")):
        assert float(word_vector(word) @ word_vector(synonym)) > 0.5 > float(word_vector(word) @ word_vector(unrelated))


def test_the_trees_walked_all_at_once_give_each_rows_leaf_as_a_walk_node_by_node_does():
    from mlflow_genai_metrics.grounding import load_model

    model = load_model()
    rng = np.random.default_rng(7)
    features = rng.normal(size=(40, len(model.features)))
    features[rng.random(features.shape) < 0.2] = np.nan  # missing values take each node's missing side

    def walked(row: np.ndarray) -> float:  # one row, one tree at a time, as scikit-learn's rule says
        total = model.baseline
        for tree in range(model.feature.shape[0]):
            node = 0
            while not model.is_leaf[tree, node]:
                x = row[model.feature[tree, node]]
                left = bool(model.missing_left[tree, node]) if np.isnan(x) else x <= model.split[tree, node]
                node = model.left[tree, node] if left else model.right[tree, node]
            total += model.value[tree, node]
        return total

    together = model.raw(features)
    assert together == pytest.approx([walked(row) for row in features], abs=1e-12)
    assert [model.raw(row[None, :])[0] for row in features] == together.tolist()  # a batch of one row gives the same


def test_a_word_of_a_hundred_thousand_letters_scores_at_once_as_bert_reads_it():
    # the greedy word-piece split is cubic in a word's length: 8,000 letters took 14-37 s, 100,000 never returned
    import time

    from mlflow_genai_metrics.grounding.vectors import MAX_WORD_CHARS, load_vectors, word_vector, wordpiece

    rows = load_vectors().rows
    assert wordpiece("ha" * 50, rows) is not None and wordpiece("ha" * 50 + "h", rows) is None  # BERT's 100 characters
    grounding_metrics(["The council met."], ["The council met."])  # the model and vectors loaded before the clock starts
    started = time.process_time()
    assert word_vector("ha" * 50_000) is None
    result = grounding_metrics(["The council approved the budget. Critics laughed."], ["Critics laughed: " + "ha" * 50_000 + "."])
    assert time.process_time() - started < 1.0, "a 100,000-letter word must not stall the grounding check"
    assert len(result.rows) == 1 and MAX_WORD_CHARS == 100


def test_the_calibration_is_scipy_s_expit_bit_for_bit():
    """``model.logistic`` stands in for ``scipy.special.expit`` (so the worker never imports scipy.special): the
    same double for every value, the extremes included."""
    from scipy.special import expit

    from mlflow_genai_metrics.grounding.model import logistic

    rng = np.random.default_rng(47)
    values = np.concatenate([rng.normal(0, 4, 200_000), rng.uniform(-800, 800, 20_000),
                             [0.0, -0.0, 709.0, -709.0, 709.8, -709.8, 745.2, -745.2, 1e308, -1e308, np.inf, -np.inf]])
    ours = np.array([logistic(v) for v in values.tolist()])
    assert np.array_equal(ours, expit(values))
    assert math.isnan(logistic(math.nan))


def test_rows_scored_together_or_alone_get_the_same_scores_across_chunks():
    """The trees score rows in chunks (``model._CHUNK``): a matrix spanning several chunks scores each row exactly
    as that row alone does."""
    from mlflow_genai_metrics.grounding import model as model_module

    model = load_model()
    rows = 3 * model_module._CHUNK + 5
    features = np.random.default_rng(46).random((rows, len(model.features)))
    features[::7, 3] = np.nan  # missing values take their own branch
    together = model.predict(features)
    alone = np.concatenate([model.predict(features[i:i + 1]) for i in range(rows)])
    assert together.shape == (rows,) and np.array_equal(together, alone)
