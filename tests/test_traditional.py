"""traditional_metrics: the same numbers as rouge-score and sacreBLEU called directly, faster, offline."""

from __future__ import annotations

import inspect
import json
import math
import random
from importlib.metadata import version

import pytest
import sacrebleu
from conftest import SHARED_DATA
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF, TER

from mlflow_genai_metrics.reference import PRIVATE_CALLS, check_sacrebleu, corpus_scores, traditional_metrics, traditional_signatures
from mlflow_genai_metrics.text import lcs_length, split_sentences

BBC = SHARED_DATA / "bbc_news_summary.jsonl"


@pytest.fixture(scope="module")
def bbc_sample():
    if not BBC.exists():
        pytest.skip(f"the BBC News Summary data is not at {BBC} (it lives in ../shared/data, beside the project)")
    rows = [json.loads(line) for line in BBC.read_text().splitlines()]
    sample = random.Random(7).sample(rows, 60)
    # Predictions that overlap the reference in different ways: the article's lead, a shuffled reference, a stub.
    predictions = []
    for i, row in enumerate(sample):
        if i % 3 == 0:
            predictions.append(" ".join(row["body"].split()[:110]))
        elif i % 3 == 1:
            sentences = list(row["reference_summary_sentences"])
            random.Random(i).shuffle(sentences)
            predictions.append(" ".join(sentences[:3]))
        else:
            predictions.append(row["title"] + ". " + row["reference_summary_sentences"][0])
    return sample, predictions


def test_rouge_agrees_with_rouge_score_on_bbc_rows(bbc_sample):
    sample, predictions = bbc_sample
    references = [row["reference_summary_sentences"] for row in sample]
    ours = traditional_metrics(predictions, references, n_jobs=1).rows
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
    for i, (prediction, sentences) in enumerate(zip(predictions, references)):
        plain = scorer.score(" ".join(sentences), prediction)
        lsum = scorer.score("\n".join(sentences), "\n".join(split_sentences(prediction)))["rougeLsum"]
        for name in ("rouge1", "rouge2", "rougeL"):
            assert ours.loc[i, name] == pytest.approx(plain[name].fmeasure, abs=1e-12), (i, name)
        assert ours.loc[i, "rougeLsum"] == pytest.approx(lsum.fmeasure, abs=1e-12), i


def test_bleu_and_chrf_agree_with_sacrebleu_per_row_and_per_corpus(bbc_sample):
    sample, predictions = bbc_sample
    references = [" ".join(row["reference_summary_sentences"]) for row in sample]
    result = traditional_metrics(predictions, references, n_jobs=2)
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        assert result.rows.loc[i, "bleu"] == sacrebleu.sentence_bleu(prediction, [reference]).score, i
        assert result.rows.loc[i, "chrf"] == sacrebleu.sentence_chrf(prediction, [reference]).score, i
    assert result.metrics["bleu"] == sacrebleu.corpus_bleu(predictions, [references]).score
    assert result.metrics["chrf"] == sacrebleu.corpus_chrf(predictions, [references]).score
    mean_of_rows = sum(result.rows["bleu"]) / len(predictions)
    assert result.metrics["bleu"] != pytest.approx(mean_of_rows)  # the corpus score, not a mean of rows


def test_ter_agrees_with_sacrebleu_per_row_and_per_corpus(bbc_sample):
    sample, _ = bbc_sample
    # TER is slow on long texts (about 0.8 s per BBC summary): two-sentence pieces keep this test quick.
    predictions = [" ".join(row["reference_summary_sentences"][1:3]) for row in sample[:6]]
    references = [" ".join(row["reference_summary_sentences"][:2]) for row in sample[:6]]
    result = traditional_metrics(predictions, references, ter=True, n_jobs=1)
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        assert result.rows.loc[i, "ter"] == sacrebleu.sentence_ter(prediction, [reference]).score, i
    assert result.metrics["ter"] == sacrebleu.corpus_ter(predictions, [references]).score


def test_parallel_and_single_process_give_identical_rows(bbc_sample):
    sample, predictions = bbc_sample
    references = [row["reference_summary_sentences"] for row in sample]
    one = traditional_metrics(predictions, references, n_jobs=1)
    two = traditional_metrics(predictions, references, n_jobs=2)
    assert one.rows.equals(two.rows) and one.metrics == two.metrics


def test_lengths_and_compression_ratio():
    result = traditional_metrics(["one two three", "four five"], sources=["a b c d e f", "g h i j"])
    assert list(result.rows["summary_words"]) == [3, 2]
    assert list(result.rows["compression_ratio"]) == [0.5, 0.5]
    assert result.metrics["summary_words"] == 2.5
    assert "rouge1" not in result.rows and result.signatures == {}  # no references, no reference metrics


def test_ter_is_computed_only_when_asked():
    result = traditional_metrics(["the cat sat"], ["the cat sat down"])
    assert "ter" not in result.rows and "ter" not in result.metrics
    assert "ter" not in result.statistics and "ter" not in result.signatures


# Short texts, so that what follows runs without the shared data.
HYPOTHESES = ["The cat sat on the mat.", "A dog barked loudly at night!", "Hello there, my friend.", "Nothing matches", ""]
REFERENCES = ["The cat sat on a mat.", "The dog barked at night.", "Hello, my dear friend.", "Entirely other words", "Empty."]
VERSION = f"sacreBLEU {sacrebleu.__version__}"


@pytest.mark.parametrize("name, metric", [("bleu", BLEU), ("chrf", CHRF), ("ter", TER)])
def test_per_row_statistics_are_sacrebleus_own_segment_statistics(name, metric):
    result = traditional_metrics(HYPOTHESES, REFERENCES, ter=True, n_jobs=1)
    own = metric()._extract_corpus_statistics(HYPOTHESES, [REFERENCES])
    assert result.statistics[name] == own, f"{VERSION}: {name} segment statistics changed"


@pytest.mark.parametrize("cls, method, parameters", PRIVATE_CALLS)
def test_the_private_sacrebleu_calls_keep_the_parameters_we_pass(cls, method, parameters):
    found = getattr(getattr(sacrebleu.metrics, cls), method, None)
    implemented = callable(found) and not getattr(found, "__isabstractmethod__", False)
    assert implemented, f"{VERSION} has no {cls}.{method}: see mlflow_genai_metrics/reference/sacrebleu_metrics.py"
    assert tuple(inspect.signature(found).parameters)[1:] == parameters, f"{VERSION} changed {cls}.{method}'s parameters"


def test_corpus_scores_from_summed_statistics_equal_sacrebleus_corpus_score():
    result = traditional_metrics(HYPOTHESES, REFERENCES, ter=True, n_jobs=1)
    expected = {
        "bleu": BLEU().corpus_score(HYPOTHESES, [REFERENCES]).score,
        "chrf": CHRF().corpus_score(HYPOTHESES, [REFERENCES]).score,
        "ter": TER().corpus_score(HYPOTHESES, [REFERENCES]).score,
    }
    assert {name: result.metrics[name] for name in expected} == expected, f"{VERSION}: a corpus score changed"


def test_the_sum_of_parts_as_floats_gives_the_corpus_scores():
    # Spark sums each partition's statistics in a float column: the sums of parts are the sums of the whole.
    result = traditional_metrics(HYPOTHESES, REFERENCES, ter=True, n_jobs=1)
    summed = {
        name: [float(sum(column[:2])) + float(sum(column[2:])) for column in zip(*segments)]
        for name, segments in result.statistics.items()
    }
    assert corpus_scores(summed) == {name: result.metrics[name] for name in ("bleu", "chrf", "ter")}


@pytest.mark.parametrize(
    "rows",
    [
        slice(0, 2), slice(1, 4), slice(2, 5), slice(4, 5),  # a few rows at a time, the last with an empty hypothesis
        "empty references",  # TER with no reference words: 100 with edits, 0 without (sacreBLEU's own rule)
        "nothing at all",
    ],
)
def test_corpus_scores_from_summed_statistics_equal_sacrebleus_corpus_score_on_any_rows(rows):
    if rows == "empty references":
        hypotheses, references = ["Some words here", ""], ["", ""]
    elif rows == "nothing at all":
        hypotheses, references = [""], [""]
    else:
        hypotheses, references = HYPOTHESES[rows], REFERENCES[rows]
    result = traditional_metrics(hypotheses, references, ter=True, n_jobs=1)
    summed = {name: [sum(column) for column in zip(*segments)] for name, segments in result.statistics.items()}
    expected = {name: metric().corpus_score(hypotheses, [references]).score for name, metric in (("bleu", BLEU), ("chrf", CHRF), ("ter", TER))}
    assert corpus_scores(summed) == expected, f"{VERSION}: {rows}"


def test_a_missing_private_sacrebleu_call_is_refused_naming_the_version(monkeypatch):
    monkeypatch.delattr(sacrebleu.metrics.CHRF, "_compute_score_from_stats")
    with pytest.raises(RuntimeError, match=rf"sacreBLEU {sacrebleu.__version__} lacks CHRF\._compute_score_from_stats"):
        check_sacrebleu()


def test_the_result_carries_sacrebleus_signatures_of_the_metrics_computed():
    result = traditional_metrics(HYPOTHESES, REFERENCES, n_jobs=1)
    expected = {}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF())):
        metric.corpus_score(HYPOTHESES, [REFERENCES])
        expected[name] = str(metric.get_signature())
    assert {name: result.signatures[name] for name in ("bleu", "chrf")} == expected
    assert set(result.signatures) == {"rouge", "bleu", "chrf"}


def test_ter_true_gives_ters_signature_and_statistics():
    result = traditional_metrics(HYPOTHESES, REFERENCES, ter=True, n_jobs=1)
    metric = TER()
    metric.corpus_score(HYPOTHESES, [REFERENCES])
    assert result.signatures["ter"] == str(metric.get_signature())
    assert len(result.statistics["ter"]) == len(HYPOTHESES) and corpus_scores(
        {"ter": [sum(column) for column in zip(*result.statistics["ter"])]}
    ) == {"ter": result.metrics["ter"]}


def test_the_rouge_signature_names_rouge_scores_version_the_stemmer_and_the_lsum_split():
    assert traditional_signatures()["rouge"] == (
        f"rouge-score:{version('rouge-score')}|stem:porter|nltk:{version('nltk')}|lsum:lines-else-rule"
    )


def test_traditional_signatures_are_those_a_result_carries():
    assert traditional_signatures(ter=True) == traditional_metrics(HYPOTHESES, REFERENCES, ter=True, n_jobs=1).signatures
    assert traditional_signatures(ter=False) == traditional_metrics(HYPOTHESES, REFERENCES, n_jobs=1).signatures


def test_an_empty_prediction_scores_zero_not_an_error():
    result = traditional_metrics([""], ["The council approved the budget."])
    assert result.rows.loc[0, "rouge1"] == 0.0 and result.rows.loc[0, "rougeLsum"] == 0.0


def test_bad_rows_are_named():
    with pytest.raises(ValueError, match="row 1: prediction is NoneType"):
        traditional_metrics(["fine", None], ["a", "b"])
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        traditional_metrics(["a", "b"], ["a"])


def test_lcs_length_matches_the_textbook_definition():
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
    assert lcs_length([], ["a"]) == 0
    rng = random.Random(1)
    for _ in range(200):
        a = [rng.choice("abc") for _ in range(rng.randint(1, 12))]
        b = [rng.choice("abc") for _ in range(rng.randint(1, 12))]
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
        assert lcs_length(a, b) == table[-1][-1]


def test_sentences_are_split_without_nltk_data():
    assert split_sentences('He said "stop." Then he left! Why? Because.\nNew line') == [
        'He said "stop."', "Then he left!", "Why?", "Because.", "New line"
    ]


def test_judge_summaries_adds_traditional_metrics_when_references_are_given(scripted_server):
    from helpers import judge_for

    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.testing import SummarizationJudgeScript

    server = scripted_server(SummarizationJudgeScript())
    article = "The council approved the budget. The mayor welcomed it."
    result = judge_summaries([article], ["The council approved the budget."], judge=judge_for(server),
                             references=["The council approved the budget on Monday."], coverage=False)
    for name in ("rouge1", "rougeLsum", "bleu", "chrf", "summary_words", "compression_ratio"):
        assert name in result.rows and not math.isnan(result.metrics[name])


def test_rouge_lsum_of_texts_that_come_one_sentence_a_line_is_rouge_score_s():
    """The rule also split inside a line ("Dr. Brown", "U.S."): 0.6957 against rouge-score's 0.5217."""

    prediction = "Dr. Brown met the minister on Monday.\nThey talked about the budget."
    reference = "The minister met Dr. Brown.\nThe budget was discussed on Monday."
    expected = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True).score(reference, prediction)["rougeLsum"].fmeasure
    for given in (reference, reference.split("\n")):
        assert traditional_metrics([prediction], [given]).rows["rougeLsum"][0] == pytest.approx(expected), given
