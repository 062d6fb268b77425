"""traditional_metrics: the same numbers as rouge-score and sacreBLEU called directly, faster, offline."""

from __future__ import annotations

import json
import math
import random

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from mlflow_genai_metrics import traditional_metrics
from mlflow_genai_metrics.traditional import lcs_length, split_sentences

from conftest import SHARED_DATA

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
        assert result.rows.loc[i, "bleu"] == pytest.approx(sacrebleu.sentence_bleu(prediction, [reference]).score)
        assert result.rows.loc[i, "chrf"] == pytest.approx(sacrebleu.sentence_chrf(prediction, [reference]).score)
    assert result.metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(predictions, [references]).score)
    assert result.metrics["chrf"] == pytest.approx(sacrebleu.corpus_chrf(predictions, [references]).score)
    mean_of_rows = sum(result.rows["bleu"]) / len(predictions)
    assert result.metrics["bleu"] != pytest.approx(mean_of_rows)  # the corpus score, not a mean of rows


def test_ter_agrees_with_sacrebleu_per_row_and_per_corpus(bbc_sample):
    sample, _ = bbc_sample
    # TER is slow on long texts (about 0.8 s per BBC summary): two-sentence pieces keep this test quick.
    predictions = [" ".join(row["reference_summary_sentences"][1:3]) for row in sample[:6]]
    references = [" ".join(row["reference_summary_sentences"][:2]) for row in sample[:6]]
    result = traditional_metrics(predictions, references, ter=True, n_jobs=1)
    for i, (prediction, reference) in enumerate(zip(predictions, references)):
        assert result.rows.loc[i, "ter"] == pytest.approx(sacrebleu.sentence_ter(prediction, [reference]).score)
    assert result.metrics["ter"] == pytest.approx(sacrebleu.corpus_ter(predictions, [references]).score)


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
    assert "rouge1" not in result.rows  # no references, no reference metrics


def test_ter_is_computed_only_when_asked():
    result = traditional_metrics(["the cat sat"], ["the cat sat down"])
    assert "ter" not in result.rows and "ter" not in result.metrics


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
    from mlflow_genai_metrics import judge_summaries
    from mlflow_genai_metrics.testing import SummarizationJudgeScript

    from helpers import judge_for

    server = scripted_server(SummarizationJudgeScript())
    article = "The council approved the budget. The mayor welcomed it."
    result = judge_summaries([article], ["The council approved the budget."], judge=judge_for(server),
                             references=["The council approved the budget on Monday."], coverage=False)
    for name in ("rouge1", "rougeLsum", "bleu", "chrf", "summary_words", "compression_ratio"):
        assert name in result.rows and not math.isnan(result.metrics[name])
