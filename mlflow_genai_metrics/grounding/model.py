"""The shipped grounding model: gradient-boosted trees in a versioned JSON file, scored with numpy.

The file (``grounding-v2.json`` beside this module) is written by ``scripts/train_grounding.py`` (not shipped) from a
scikit-learn ``HistGradientBoostingClassifier``: its baseline, every tree's nodes, the features in order, the
calibration of its output on the training mix (Platt scaling of the trees' log-odds, fitted out of fold on people's
labels of FRANK valid, SummEdits evaluation and perturbed BBC summaries: ``calibrated_on``), the two
``lexical_support`` thresholds of the suspect rule, how they were fixed, the tag of the word vectors its features
read, and a few training rows with their calibrated predictions (``check``), which the loader must reproduce.
``grounded`` is ``grounding >= 0.5``: half of that calibrated score, not a threshold tuned on one set; on data unlike
the training mix the share it calls grounded can be far from people's (docs/metrics.md). No pickle: the file is
text, diffable, and its hash is part of the model's tag (``grounding:v2-8bb9``), so an edited file changes the tag
even if nobody bumped its version.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

# The only human-labelled data the model may learn from; every other split is for measuring it.
TRAINING_SPLITS = {"frank": "valid", "summedits": "evaluation"}
MODEL_FILE = Path(__file__).resolve().with_name("grounding-v2.json")


def model_tag(path: str | Path = MODEL_FILE) -> str:
    """``grounding:<version>-<first 4 hex digits of the file's SHA-256>``. The shipped model's is the loaded model's
    (the file read once per process: parsing it costs milliseconds, and a scorer's feedback names it on every row)."""
    if path is MODEL_FILE:
        return load_model().tag
    data = Path(path).read_bytes()
    return _tag(data, json.loads(data))


def _tag(data: bytes, spec: dict[str, Any]) -> str:
    return f"grounding:{spec['version']}-{hashlib.sha256(data).hexdigest()[:4]}"


@dataclass(frozen=True)
class GroundingModel:
    """Trees as padded arrays (tree x node); rows go through each tree together, split node by node."""

    tag: str
    features: tuple[str, ...]
    threshold: float  # grounded = 1 when grounding >= threshold (0.5 of a score calibrated on the training mix: ``calibrated_on``)
    support_low: float  # a "yes" on a claim below this is suspect
    support_high: float  # a "no" or "idk" on a claim above this is suspect
    baseline: float
    calibration: tuple[float, float]  # (a, b): P(consistent) = expit(a * log-odds + b)
    feature: np.ndarray
    split: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    is_leaf: np.ndarray
    value: np.ndarray
    meta: dict[str, Any]
    exits: _Exits | None = None  # the same trees in the form ``raw`` reads (None: a tree too wide for it)

    @classmethod
    def from_dict(cls, spec: dict[str, Any], tag: str) -> GroundingModel:
        trees = spec["trees"]
        width = max(len(tree["value"]) for tree in trees)

        def padded(name: str, dtype: type, fill: Any) -> np.ndarray:
            array = np.full((len(trees), width), fill, dtype=dtype)
            for row, tree in enumerate(trees):
                array[row, : len(tree[name])] = tree[name]
            return array

        return cls(
            tag=tag,
            features=tuple(spec["features"]),
            threshold=float(spec["threshold"]),
            support_low=float(spec["suspect"]["support_low"]),
            support_high=float(spec["suspect"]["support_high"]),
            baseline=float(spec["baseline"]),
            calibration=(float(spec["calibration"]["a"]), float(spec["calibration"]["b"])),
            feature=padded("feature", np.int64, 0),
            split=padded("threshold", np.float64, 0.0),
            left=padded("left", np.int64, 0),
            right=padded("right", np.int64, 0),
            missing_left=padded("missing_left", bool, True),
            is_leaf=padded("is_leaf", bool, True),
            value=padded("value", np.float64, 0.0),
            meta={k: v for k, v in spec.items() if k != "trees"},
            exits=_Exits.of(trees),
        )

    def raw(self, features: np.ndarray) -> np.ndarray:
        """Log-odds of "consistent" per row, summed tree by tree in scikit-learn's order, rows in chunks that bound
        the memory. Each row's leaf in every tree comes from all the trees' split tests at once (``_Exits``: a few
        numpy steps per chunk, about 5 us a row); a tree too wide for that is walked a level at a time."""
        features = np.asarray(features, dtype=np.float64).reshape(-1, len(self.features))
        raw = np.zeros(len(features), dtype=np.float64)
        raw += self.baseline
        for start in range(0, len(features), _CHUNK):
            chunk = features[start:start + _CHUNK]
            leaves = self.exits.leaf_values(chunk) if self.exits is not None else self._leaf_values(chunk)
            # baseline + tree 0 + tree 1 + ..., one addition at a time in that order: a cumulative sum is sequential
            # by definition (a plain sum may pair the terms up), and one numpy step instead of one per tree.
            terms = np.concatenate([raw[None, start:start + _CHUNK], leaves])
            raw[start:start + _CHUNK] = np.cumsum(terms, axis=0)[-1]
        return raw

    def _leaf_values(self, features: np.ndarray) -> np.ndarray:
        """(trees x rows) each row's leaf value in each tree, walking every tree a level at a time. scikit-learn's
        rule at a node: a missing value follows missing_go_to_left, else x <= threshold goes left."""
        trees = np.arange(self.feature.shape[0])[:, None]
        rows = np.arange(len(features))[None, :]
        node = np.zeros((len(trees), len(features)), dtype=np.int64)
        for _ in range(self.feature.shape[1]):  # a tree is never deeper than its nodes
            leaf = self.is_leaf[trees, node]
            if leaf.all():
                break
            x = features[rows, self.feature[trees, node]]
            left = np.where(np.isnan(x), self.missing_left[trees, node], x <= self.split[trees, node])
            node = np.where(leaf, node, np.where(left, self.left[trees, node], self.right[trees, node]))
        return self.value[trees, node]

    def predict(self, features: np.ndarray) -> np.ndarray:
        """P(consistent) per row, calibrated: the grounding score, in [0, 1]."""
        a, b = self.calibration
        return np.array([logistic(x) for x in (a * self.raw(features) + b).tolist()], dtype=np.float64)


def logistic(x: float) -> float:
    """``scipy.special.expit`` of one value, bit for bit: 1 / (1 + exp(-x)) with the C library's ``exp``, as
    scipy's kernel computes it. Here so that the grounding worker never imports ``scipy.special`` (a third of a
    second of its start-up, more than its first hundred rows take); a row's scores are a few dozen values."""
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:  # exp(-x) past the largest double: C's exp gives infinity, and 1 / inf is 0
        return 0.0


# Rows scored at once: a chunk's (rows x split nodes) arrays stay in the CPU's cache (measured, 200 trees: 8.5 us a
# row in chunks of 64, 16.8 in chunks of 1,024); each row's sum is its own, so the chunks change no bit.
_CHUNK = 64


@dataclass(frozen=True)
class _Exits:
    """The trees as their split nodes and, per node, the leaves of its left branch, numbered left to right (a bit
    each): a row's leaf in a tree is the leftmost one that no node the row leaves by the right rules out (the exit
    leaf of QuickScorer, Lucchese et al. 2015: the leaf the walk from the root reaches, for any tree)."""

    feature: np.ndarray  # (nodes x trees) the feature each split node tests (padding: 0)
    split: np.ndarray  # its threshold (padding: any)
    missing_left: np.ndarray  # where a missing value goes
    left_leaves: np.ndarray  # the leaves of its left branch, as bits (padding: none)
    value: np.ndarray  # (trees x leaves) the leaves' values, left to right
    starts: np.ndarray  # (trees x 1) where each tree's leaves start in ``value`` read flat

    @classmethod
    def of(cls, trees: list[dict[str, Any]]) -> _Exits | None:
        nodes, values = [], []
        for tree in trees:
            order: list[int] = []  # leaves, left to right
            below: dict[int, list[int]] = {}  # node -> positions (in ``order``) of the leaves under it

            def visit(node: int, tree: dict[str, Any] = tree, order: list[int] = order, below: dict = below) -> None:
                start = len(order)
                if tree["is_leaf"][node]:
                    order.append(node)
                else:
                    visit(tree["left"][node])
                    visit(tree["right"][node])
                below[node] = list(range(start, len(order)))

            visit(0)
            splits = [n for n in range(len(tree["value"])) if n in below and not tree["is_leaf"][n]]
            nodes.append([(tree["feature"][n], tree["threshold"][n], tree["missing_left"][n],
                           sum(1 << p for p in below[tree["left"][n]])) for n in splits])
            values.append([tree["value"][leaf] for leaf in order])
        width = max(len(v) for v in values)
        if width > 64:
            return None
        bits = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if np.dtype(t).itemsize * 8 >= width)
        depth = max(1, max(len(n) for n in nodes))
        padded = [n + [(0, 0.0, True, 0)] * (depth - len(n)) for n in nodes]
        return cls(  # (nodes x trees): the tests of a node's rank in every tree are side by side in memory
            feature=np.array([[f for f, _, _, _ in n] for n in padded], dtype=np.int64).T.copy(),
            split=np.array([[s for _, s, _, _ in n] for n in padded], dtype=np.float64).T.copy(),
            missing_left=np.array([[m for _, _, m, _ in n] for n in padded], dtype=bool).T.copy(),
            left_leaves=np.array([[b for _, _, _, b in n] for n in padded], dtype=bits).T.copy(),
            value=np.array([v + [0.0] * (width - len(v)) for v in values], dtype=np.float64),
            starts=(np.arange(len(values)) * width)[:, None],
        )

    def leaf_values(self, features: np.ndarray) -> np.ndarray:
        """(trees x rows) each row's leaf value in each tree, by scikit-learn's rule at a node: a missing value
        follows missing_go_to_left, else x <= threshold goes left."""
        x = np.take(np.ascontiguousarray(features.T), self.feature, axis=0)  # (nodes x trees x rows)
        right = x > self.split[..., None]
        if np.isnan(x).any():
            right = np.where(np.isnan(x), ~self.missing_left[..., None], right)
        ruled_out = np.bitwise_or.reduce(right * self.left_leaves[..., None], axis=0)  # (trees x rows)
        remaining = ~ruled_out
        lowest = remaining & (~remaining + 1)  # the leftmost leaf not ruled out, as its bit
        position = np.frexp(lowest.astype(np.float64))[1] - 1
        return np.take(self.value, position + self.starts)


@lru_cache(maxsize=4)
def _load(path: str) -> GroundingModel:
    from .readable import RULE
    from .vectors import vectors_tag

    data = Path(path).read_bytes()
    spec = json.loads(data)
    if spec.get("word_vectors") != vectors_tag():
        raise ValueError(f"{path} was trained on word vectors {spec.get('word_vectors')}, but the package ships "
                         f"{vectors_tag()}: retrain it (scripts/train_grounding.py)")
    if spec.get("readable") != RULE:
        raise ValueError(f"{path} was written for the readable-text rule {spec.get('readable')}, but the package has "
                         f"{RULE}: retrain it (scripts/train_grounding.py), so that the tag changes with the rule")
    return GroundingModel.from_dict(spec, _tag(data, spec))


def calibrated_on(model: GroundingModel | None = None) -> str:
    """The data ``grounding`` (and its 0.5 cut, ``grounded``) was calibrated on, in words, from the model's own
    record of its training: a score for ranking and comparing systems on the same data; on data unlike this mix the
    share it calls grounded can be far from people's (docs/metrics.md)."""
    training = (model or load_model()).meta.get("training", {})
    sets = [f"{name.upper() if name == 'frank' else 'SummEdits' if name == 'summedits' else name} "
            f"({where.split(' split ')[-1]})" for name, where in training.get("data", {}).items()]
    perturbed = training.get("perturbed", {})
    if perturbed:
        sets.append(f"{perturbed.get('rows', 0):,} BBC summaries with planted errors and faithful rewrites")
    return ", ".join(sets) or "its training rows"


def calibration_note(where: str | None = None) -> str:
    """What every scored ``grounding`` says beside it (a card's rationale, a classic evaluation's justification):
    the data it was calibrated on (``calibrated_on``) and what that makes it."""
    return (f"Calibrated on {where or calibrated_on()}: a score for comparing systems on the same data, not a "
            "probability that holds on data unlike these.")


def load_model(path: str | Path = MODEL_FILE) -> GroundingModel:
    """The model in ``path`` (default: the shipped one), read once per process."""
    # The shipped model's path is resolved once (MODEL_FILE): resolving it per row cost 5% of the worker's time.
    return _load(str(path if path is MODEL_FILE else Path(path).resolve()))


def __getattr__(name: str) -> str:
    # Read on first use, so the training script can run before the model file exists.
    if name == "MODEL_TAG":
        return model_tag()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
