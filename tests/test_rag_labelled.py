"""The faithfulness sets recast as retrieval (issue 28, 4): a labelled RAG set's shape, the right document's passages
known (``gold``), the cited-passage accuracy, and the answer judge measured against people through ``mgm meta-eval
--task rag`` on the evaluation splits only."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from conftest import SECRET_KEY, SHARED_DATA
from helpers import judge_for

from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.meta_evaluation import answers_meta_evaluate
from mlflow_genai_metrics.rag.labelled import cited_passage_accuracy, load_labelled_answers, recast_as_retrieval, split_passages
from mlflow_genai_metrics.testing import AnswersJudgeScript

SOURCES = {
    "a": "Anna won the race. She trained for a year. Her coach praised her. The crowd cheered. Rain fell later.",
    "b": "The bridge reopened in May. Engineers fixed the cracks. Traffic returned at once.",
    "c": "The museum bought a sword. A farmer found it. It goes on show in June.",
}


def _labelled() -> pd.DataFrame:
    return pd.DataFrame([
        {"id": key, "source": text, "summary": text.split(". ")[0] + ".", "human_binary": 1, "human_graded": 1.0, "split": "test"}
        for key, text in SOURCES.items()
    ])


def test_a_recast_row_holds_its_own_sources_passages_among_others_and_knows_which_they_are():
    recast = recast_as_retrieval(_labelled(), sentences_per_passage=2, distractors=2, seed=0).set_index("id")
    row = recast.loc["a"]
    own = split_passages(SOURCES["a"], 2)
    assert sorted(row["passages"][n - 1] for n in row["gold"]) == sorted(own)  # gold: the right document's passages, shuffled among others
    foreign = [p for n, p in enumerate(row["passages"], start=1) if n not in row["gold"]]
    assert len(foreign) == 2 and all(any(p in SOURCES[k] for k in ("b", "c")) for p in foreign)
    assert row["answer"] == "Anna won the race." and row["question"] and row["human_binary"] == 1
    again = recast_as_retrieval(_labelled().iloc[::-1], sentences_per_passage=2, distractors=2, seed=0).set_index("id")
    assert again.loc["a", "passages"] == row["passages"]  # a row's draw does not depend on the others' order
    assert recast_as_retrieval(_labelled(), sentences_per_passage=2, distractors=2, seed=1).set_index("id").loc["a", "passages"] != row["passages"]


def test_a_labelled_rag_set_drops_in_with_the_same_columns(tmp_path):
    path = tmp_path / "rag.jsonl"
    path.write_text(json.dumps({"id": 1, "question": "Who won?", "passages": ["Anna won."], "answer": "Anna.", "label": 1, "gold": [1]}) + "\n")
    loaded = load_labelled_answers(path)
    assert list(loaded.columns) == list(recast_as_retrieval(_labelled()).columns) and loaded.loc[0, "gold"] == [1]
    path.write_text(json.dumps({"id": 1, "question": "Who won?", "answer": "Anna.", "label": 1}) + "\n")
    with pytest.raises(ValueError, match=r"needs \['passages'\] in every row"):
        load_labelled_answers(path)


def test_cited_passage_accuracy_counts_supported_claims_with_a_found_quote_only():
    claims = pd.DataFrame({"id": ["a", "a", "a", "b"], "verdict": ["yes", "yes", "no", "yes"], "passage": [1, 3, 1, 2],
                           "quote_found": pd.array([True, True, True, False], dtype="boolean")})
    assert cited_passage_accuracy(claims, {"a": [1, 2], "b": [2]}) == (0.5, 2)
    accuracy, supported = cited_passage_accuracy(claims.iloc[2:3], {"a": [1]})
    assert math.isnan(accuracy) and supported == 0


def test_the_answer_judge_is_measured_against_people_with_its_cited_passage_accuracy(scripted_server):
    server = scripted_server(AnswersJudgeScript())
    labelled = recast_as_retrieval(_labelled(), sentences_per_passage=2, distractors=2).assign(human_binary=[1, 0, 1])
    report = answers_meta_evaluate(labelled, judge=judge_for(server))
    assert report.metrics["rows"] == 3 and report.metrics["judge_aligned_rate"] == 1.0  # every first sentence is supported
    assert report.metrics["cited_passage_accuracy"] == 1.0 and report.metrics["supported_claims"] == 3  # each from its own document
    assert report.metrics["balanced_accuracy"] == 0.5 and report.confusion.to_numpy().tolist() == [[0, 1], [0, 2]]


def test_mgm_meta_eval_task_rag_reads_only_the_evaluation_splits(scripted_server, tmp_path, capsys, monkeypatch):
    if not (SHARED_DATA / "faithfulness" / "frank.jsonl").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    server = scripted_server(AnswersJudgeScript())
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY, "MGM_JUDGE_MODEL": "scripted-judge",
                        "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    assert mgm(["meta-eval", str(SHARED_DATA / "faithfulness" / "frank.jsonl"), "--task", "rag", "--sample", "4", "--no-log"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("frank.jsonl recast as retrieval: 4 pairs; judge judge:scripted-judge|") and "cited_passage_accuracy" in out
    assert mgm(["meta-eval", str(SHARED_DATA / "faithfulness" / "frank.jsonl"), "--task", "rag", "--split", "valid", "--no-log"]) == 2
    assert "split 'valid' trained the grounding model" in capsys.readouterr().err
