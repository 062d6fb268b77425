"""Labelled answers from passages, to measure the answer judge against people: a general loader (question, passages,
answer, label, and the passages that hold the answer), and the faithfulness sets recast as retrieval.

No human-labelled RAG set is on this machine, so the summaries' sets (``../shared/data/faithfulness``) stand in: each
source is split into passages of a few sentences, shuffled among passages drawn from other documents of the same
set, and the summary is the answer to a fixed question; people's label of the summary is the answer's. The
passages of the right document are the row's ``gold`` (1-based numbers): a supported claim whose cited passage is
not among them cites the wrong document (``cited_passage_accuracy``).

    labelled = recast_as_retrieval(load_labelled("../shared/data/faithfulness/frank.jsonl"), seed=0)
    labelled = load_labelled_answers("my_rag_set.jsonl")   # a labelled RAG set drops in: same columns
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..text import split_sentences

RECAST_QUESTION = "What do the retrieved passages report?"
COLUMNS = ("id", "question", "passages", "answer", "human_binary", "human_graded", "gold", "split")


def split_passages(text: str, sentences_per_passage: int = 3) -> list[str]:
    """``text`` as passages of ``sentences_per_passage`` sentences, in order (the whole text when it has fewer)."""
    sentences = split_sentences(text) or [text]
    return [" ".join(sentences[i:i + sentences_per_passage]) for i in range(0, len(sentences), sentences_per_passage)]


def recast_as_retrieval(labelled: pd.DataFrame, *, sentences_per_passage: int = 3, distractors: int = 3, seed: int = 0,
                        question: str = RECAST_QUESTION) -> pd.DataFrame:
    """Each labelled summary (``tables.load_labelled``'s frame) as an answer from retrieved passages: its source's
    passages and ``distractors`` passages of other sources of the set, shuffled (seeded per row, so a row's passages
    do not depend on the sample it is in); ``gold`` the numbers of its own source's passages."""
    own = {source: split_passages(source, sentences_per_passage) for source in labelled["source"].unique()}
    sources = sorted(own)
    rows = []
    for record in labelled.to_dict(orient="records"):
        draw = random.Random(f"{seed}:{record['id']}")
        others = [s for s in sources if s != record["source"]]
        foreign = [passage for s in draw.sample(others, min(distractors, len(others))) for passage in [draw.choice(own[s])]]
        passages = [(text, True) for text in own[record["source"]]] + [(text, False) for text in foreign]
        draw.shuffle(passages)
        rows.append({
            "id": record["id"], "question": question, "passages": [text for text, _ in passages], "answer": record["summary"],
            "human_binary": int(record["human_binary"]), "human_graded": float(record["human_graded"]),
            "gold": [number for number, (_, right) in enumerate(passages, start=1) if right], "split": record.get("split"),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def load_labelled_answers(path: str | Path) -> pd.DataFrame:
    """A labelled RAG set: JSONL of ``{"id", "question", "passages": [...], "answer", "label"[, "label_binary"],
    "gold": [1-based numbers of the passages that hold the answer], "split"}``, as ``recast_as_retrieval`` makes."""
    records = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    missing = sorted({c for c in ("id", "question", "passages", "answer", "label") for r in records if c not in r})
    if missing:
        raise ValueError(f"{path}: a labelled RAG set needs {missing} in every row")
    return pd.DataFrame([{
        "id": r["id"], "question": r["question"], "passages": list(r["passages"]), "answer": r["answer"],
        "human_binary": int(r.get("label_binary", r["label"] >= 1)), "human_graded": float(r["label"]),
        "gold": list(r.get("gold") or []), "split": r.get("split"),
    } for r in records], columns=list(COLUMNS))


def cited_passage_accuracy(claims: pd.DataFrame, gold: dict[str, Sequence[int]]) -> tuple[float, int]:
    """The share of supported claims (yes, quote found) whose cited passage is one of its row's ``gold`` passages,
    and how many such claims there were (NaN of 0)."""
    supported = claims[(claims["verdict"] == "yes") & (claims["quote_found"] == True)]  # noqa: E712 (a nullable boolean)
    right = sum(int(passage) in set(gold.get(str(row_id), ())) for row_id, passage in zip(supported["id"].astype(str), supported["passage"]))
    return (right / len(supported) if len(supported) else float("nan")), len(supported)
