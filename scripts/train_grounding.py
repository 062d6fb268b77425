"""Train the grounding model and write the shipped model file (the only place scikit-learn is fitted).

    .venv/bin/python scripts/train_grounding.py         # writes mlflow_genai_metrics/grounding/grounding-v2.json

A development script, not part of the package (it is not in the wheel).

Training data, and nothing else: ``frank.jsonl`` split ``valid`` and ``summedits.jsonl`` split ``evaluation``
from ``../shared/data/faithfulness`` (the evaluation splits, FRANK ``test``, SummEdits ``test`` and both QAGS
sets, are never read here). The binary label is people's: 1 = fully consistent. Beside them, perturbed BBC
summaries from the ``train`` side of ``benchmarks/perturbations.py`` (400 articles, seed 0; no article or synonym of
the ``eval`` side that ``bench_robustness.py`` reports on): the original summary and its faithful rewrites
(synonyms, reordered clauses) labelled consistent, its planted errors (a number, a name, a negation, an inserted
sentence) inconsistent, each with weight ``PERTURBED_WEIGHT`` against a person's label's 1.

Steps, all deterministic: features per row and per summary sentence; 5-fold cross-validation grouped by source
document (summaries of one article never straddle folds; the perturbed rows are in every training fold and never
scored) for out-of-fold scores of people's rows; from those, the calibration (Platt scaling: a logistic regression
of people's labels on the trees' out-of-fold log-odds, so that ``grounding`` is a probability on this mix and ``grounded`` is
``grounding >= 0.5``) and the suspect rule's thresholds (``support_low``: 5th percentile of the calibrated support
of every sentence of summaries people found fully consistent; ``support_high``: 95th percentile of the weakest
sentence's support in summaries people found inconsistent); then the final model on every training row, written as
JSON with a few rows' features and their calibrated predictions for the loader to reproduce.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlflow_genai_metrics.grounding.features import ROW_FEATURES, SENTENCE_FEATURES, row_features, summary_features
from mlflow_genai_metrics.grounding.model import MODEL_FILE, TRAINING_SPLITS, model_tag
from mlflow_genai_metrics.grounding.readable import RULE as READABLE_RULE
from mlflow_genai_metrics.grounding.scoring import source_indexes
from mlflow_genai_metrics.grounding.vectors import vectors_tag
from mlflow_genai_metrics.stats import calibration_error
from mlflow_genai_metrics.tables import load_labelled

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from perturbations import labelled_rows, perturbed_articles  # noqa: E402

__all__ = ["TRAINING_SPLITS", "export_model", "fit", "main", "training_rows"]

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
# Features whose direction people's labels disagree on between the sets (on SummEdits, whose inconsistent
# summaries are edits of consistent ones, more copied words go with *less* consistency) are left free; every
# detector of a specific error may only lower the score, so a planted error can never raise it.
FREE = ("content_support", "best_sentence_support", "best_two_support", "novel_words", "untrained_rule")
PARAMS = {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 8, "early_stopping": False, "random_state": 0}
FOLDS = 5
PERTURBED = {"side": "train", "articles": 400, "seed": 0}
# Chosen by cross-validation on the training splits and by the robustness of held-out train-side articles: 0.15
# kept more of FRANK's out-of-fold AUC (0.844) but faithful synonym rewrites lost 0.063; 0.5 loses 0.032 for 0.834.
PERTURBED_WEIGHT = 0.5
CHECK_ROWS = 4  # per training set: rows whose sklearn predictions the loader must reproduce


def monotonic_constraints() -> list[int]:
    """Per row feature: +1 (may only raise the score), -1 (may only lower it) or 0 (free; also the length features)."""
    signs = []
    for name in ROW_FEATURES:
        base = name.rsplit("_", 1)[0]
        kind = SENTENCE_FEATURES.get(base)
        signs.append(0 if kind is None or base in FREE else (1 if kind == "share" else -1))
    return signs


def training_rows(data: Path = DATA) -> pd.DataFrame:
    """The training splits, with ``set`` and ``human_binary``; refuses a file without the expected split."""
    parts = []
    for name, split in TRAINING_SPLITS.items():
        frame = load_labelled(data / f"{name}.jsonl")
        if split not in set(frame["split"]):
            raise ValueError(f"{name}.jsonl has no split {split!r} (it has {sorted(set(frame['split']))})")
        parts.append(frame[frame["split"] == split].assign(set=name)[["id", "set", "source", "summary", "human_binary"]])
    return pd.concat(parts, ignore_index=True)


def perturbed_rows() -> pd.DataFrame:
    """The perturbed BBC summaries of the ``train`` side, labelled 1 (original, rewrites) or 0 (planted errors)."""
    cases = perturbed_articles(PERTURBED["side"], PERTURBED["articles"], PERTURBED["seed"])
    frame = pd.DataFrame(list(labelled_rows(cases)), columns=["id", "source", "summary", "human_binary"])
    return frame.assign(set="bbc-perturbed")


def _features(rows: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """Row vectors, and per row the vectors of each of its sentences alone."""
    vectors, sentence_vectors = [], []
    for summary, index in zip(rows["summary"], source_indexes(list(rows["source"]))):
        sentences = summary_features(summary, index)
        vectors.append(row_features(sentences, index))
        sentence_vectors.append(np.array([row_features([s], index) for s in sentences]).reshape(-1, len(ROW_FEATURES)))
    return np.array(vectors, dtype=np.float64), sentence_vectors


def _best_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The cut (midway between two adjacent distinct scores) that maximises balanced accuracy."""
    from sklearn.metrics import balanced_accuracy_score

    distinct = np.unique(scores)
    cuts = (distinct[:-1] + distinct[1:]) / 2
    accuracies = [balanced_accuracy_score(labels, scores >= cut) for cut in cuts]
    return float(cuts[int(np.argmax(accuracies))])


def _log_odds(probabilities: np.ndarray) -> np.ndarray:
    from scipy.special import logit

    return logit(np.clip(probabilities, 1e-12, 1 - 1e-12))


def fit(rows: pd.DataFrame, *, folds: int = FOLDS, params: dict[str, Any] | None = None,
        perturbed: pd.DataFrame | None = None) -> dict[str, Any]:
    """The model file's content (a dict) from people's labelled rows (``source``, ``summary``, ``human_binary``,
    ``set``) and, when given, perturbed rows learnt from with ``PERTURBED_WEIGHT`` but never scored."""
    import sklearn
    from scipy.special import expit
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score
    from sklearn.model_selection import GroupKFold

    params = {**PARAMS, "monotonic_cst": monotonic_constraints(), **(params or {})}
    vectors, sentence_vectors = _features(rows)
    labels = rows["human_binary"].to_numpy(dtype=int)
    usable = ~np.isnan(vectors).any(axis=1)  # a summary with no sentence says nothing to learn from
    vectors, labels, rows = vectors[usable], labels[usable], rows[usable].reset_index(drop=True)
    sentence_vectors = [v for v, keep in zip(sentence_vectors, usable) if keep]
    extra, extra_labels = np.empty((0, vectors.shape[1])), np.empty(0, dtype=int)
    if perturbed is not None and len(perturbed):
        extra, _ = _features(perturbed)
        extra_labels = perturbed["human_binary"].to_numpy(dtype=int)
        keep = ~np.isnan(extra).any(axis=1)
        extra, extra_labels = extra[keep], extra_labels[keep]

    def fitted(positions: np.ndarray) -> Any:
        weights = np.concatenate([np.ones(len(positions)), np.full(len(extra), PERTURBED_WEIGHT)])
        return HistGradientBoostingClassifier(**params).fit(
            np.vstack([vectors[positions], extra]), np.concatenate([labels[positions], extra_labels]), sample_weight=weights)

    raw_out_of_fold = np.zeros(len(rows))
    raw_supports: list[np.ndarray] = [np.empty(0)] * len(rows)
    for train, held in GroupKFold(folds).split(vectors, labels, groups=rows["source"]):
        model = fitted(train)
        raw_out_of_fold[held] = _log_odds(model.predict_proba(vectors[held])[:, 1])
        for position in held:
            raw_supports[position] = _log_odds(model.predict_proba(sentence_vectors[position])[:, 1])
    platt = LogisticRegression(C=1e6).fit(raw_out_of_fold.reshape(-1, 1), labels)
    a, b = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    out_of_fold = expit(a * raw_out_of_fold + b)
    supports = [expit(a * s + b) for s in raw_supports]
    weakest = np.array([s.min() for s in supports])
    threshold = 0.5
    consistent_sentences = np.concatenate([s for s, label in zip(supports, labels) if label == 1])
    support_low = float(np.percentile(consistent_sentences, 5))
    support_high = float(np.percentile(weakest[labels == 0], 95))

    rule = vectors[:, ROW_FEATURES.index("untrained_rule_min")]
    final = fitted(np.arange(len(rows)))
    per_set = {}
    for name in sorted(set(rows["set"])):
        mine = (rows["set"] == name).to_numpy()
        per_set[name] = {
            "rows": int(mine.sum()),
            "consistent": int(labels[mine].sum()),
            "out_of_fold_auc": round(float(roc_auc_score(labels[mine], out_of_fold[mine])), 4),
            "out_of_fold_balanced_accuracy": round(float(balanced_accuracy_score(labels[mine], out_of_fold[mine] >= threshold)), 4),
            "out_of_fold_calibration_error": round(calibration_error(labels[mine], out_of_fold[mine]), 4),
        }
    check = [position for name in sorted(set(rows["set"])) for position in np.flatnonzero((rows["set"] == name).to_numpy())[:CHECK_ROWS]]
    spec = export_model(final)
    spec.update(
        threshold=threshold,
        calibration={"a": a, "b": b, "how": "Platt scaling: a logistic regression of people's labels on the trees' "
                     "out-of-fold log-odds over every training row of people's; grounded = grounding >= 0.5"},
        word_vectors=vectors_tag(),
        readable=READABLE_RULE,
        suspect={
            "support_low": support_low,
            "support_high": support_high,
            "how": "out-of-fold lexical_support of single sentences on the training rows: support_low = 5th percentile over "
            "every sentence of summaries people found fully consistent; support_high = 95th percentile of the weakest "
            "sentence of summaries people found inconsistent",
        },
        untrained_rule={
            "threshold": _best_threshold(labels, rule),
            "how": "the issue's rule (untrained_rule_min), for comparison only: the cut that maximises balanced accuracy "
            "over the training rows",
        },
        training={
            "data": {name: f"{name}.jsonl split {split}" for name, split in TRAINING_SPLITS.items()},
            "perturbed": {**PERTURBED, "rows": int(len(extra)), "weight": PERTURBED_WEIGHT,
                          "recipe": "benchmarks/perturbations.py: originals and faithful rewrites 1, planted errors 0"},
            "per_set": per_set,
            "params": {**params, "monotonic_cst": dict(zip(ROW_FEATURES, params["monotonic_cst"]))},
            "folds": f"{folds}-fold GroupKFold by source document",
            "threshold_how": "0.5 of the calibrated probability",
            "sklearn": sklearn.__version__,
        },
        check={
            "ids": [f"{rows['set'][p]}:{rows['id'][p]}" for p in check],
            "features": [[float(v) for v in vectors[p]] for p in check],
            "predictions": [float(v) for v in expit(a * _log_odds(final.predict_proba(vectors[check])[:, 1]) + b)],
        },
    )
    return spec


def export_model(model: Any) -> dict[str, Any]:
    """A fitted binary ``HistGradientBoostingClassifier`` as plain lists (numerical features only)."""
    if model.n_trees_per_iteration_ != 1 or getattr(model, "is_categorical_", None) is not None:
        raise ValueError("only a binary classifier on numerical features can be exported")
    trees = []
    for (predictor,) in model._predictors:  # scikit-learn keeps the fitted trees here; nodes are plain records
        nodes = predictor.nodes
        trees.append(
            {
                "feature": nodes["feature_idx"].tolist(),
                "threshold": nodes["num_threshold"].tolist(),
                "left": nodes["left"].tolist(),
                "right": nodes["right"].tolist(),
                "missing_left": nodes["missing_go_to_left"].astype(bool).tolist(),
                "is_leaf": nodes["is_leaf"].astype(bool).tolist(),
                "value": nodes["value"].tolist(),
                "depth": int(nodes["depth"].max()),
            }
        )
    return {"name": "grounding", "version": "v2", "features": list(ROW_FEATURES), "sentence_features": list(SENTENCE_FEATURES),
            "baseline": float(model._baseline_prediction.ravel()[0]), "trees": trees}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the labelled sets (default: ../shared/data/faithfulness)")
    parser.add_argument("--out", type=Path, default=MODEL_FILE, help=f"model file to write (default: {MODEL_FILE.name} in the package)")
    args = parser.parse_args(argv)
    rows = training_rows(args.data)
    spec = fit(rows, perturbed=perturbed_rows())
    args.out.write_text(json.dumps(spec, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB), tag {model_tag(str(args.out))}")
    print(f"grounded threshold {spec['threshold']:.4f}; suspect support_low {spec['suspect']['support_low']:.4f}, support_high {spec['suspect']['support_high']:.4f}")
    for name, figures in spec["training"]["per_set"].items():
        print(f"  {name}: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
