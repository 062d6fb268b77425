"""Agreement with people: run our judgement on a human-labelled faithfulness set and measure how well it agrees.

    from mlflow_genai_metrics.meta import load_labelled, meta_evaluate
    labelled = load_labelled("../shared/data/faithfulness/frank.jsonl")
    report = meta_evaluate(labelled, judge=judge, sample=100)
    report.metrics["balanced_accuracy"], report.metrics["spearman"]

Also ``mgm meta-eval FILE --sample N``. Reported: balanced accuracy and Cohen's kappa of ``aligned`` against the
binary human label (1 = the summary is fully consistent), Spearman and Kendall correlation of ``support_rate``
with the graded human label, the confusion matrix, and how many rows the judge failed on (left out, counted).
Statistics from scikit-learn and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .judge import Judge
from .summarization import SummarizationResult, judge_summaries

__all__ = ["MetaReport", "agreement", "load_labelled", "meta_evaluate", "stratified_labelled_sample"]


def load_labelled(path: str | Path) -> pd.DataFrame:
    """A faithfulness file (``id``, ``source``, ``summary``, ``label``...) with ``human_binary`` and ``human_graded``.

    Binary: ``label_binary`` when the file has it (FRANK), else ``label == 1`` (QAGS: every sentence supported;
    SummEdits: consistent). Graded: ``label`` (a share in [0, 1], or 0/1).
    """
    frame = pd.read_json(path, lines=True)
    missing = [c for c in ("id", "source", "summary", "label") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: a labelled set needs columns {missing}; it has {list(frame.columns)}")
    binary = frame["label_binary"] if "label_binary" in frame.columns else (frame["label"] >= 1.0)
    return frame.assign(human_binary=binary.astype(int), human_graded=frame["label"].astype(float))


def stratified_labelled_sample(frame: pd.DataFrame, n: int | None, *, seed: int = 0) -> pd.DataFrame:
    """``n`` rows with the binary label's shares kept (both classes present when both exist)."""
    if n is None or n >= len(frame):
        return frame.reset_index(drop=True)
    parts = []
    shares = frame["human_binary"].value_counts(normalize=True)
    for value, share in shares.items():
        take = max(1, int(round(share * n)))
        group = frame[frame["human_binary"] == value]
        parts.append(group.sample(n=min(take, len(group)), random_state=seed))
    return pd.concat(parts).sort_index().head(n).reset_index(drop=True)


@dataclass
class MetaReport:
    metrics: dict[str, float]
    confusion: pd.DataFrame  # rows: human label, columns: judge's aligned
    result: SummarizationResult

    def figure(self):
        """The confusion matrix as a matplotlib figure."""
        import matplotlib

        matplotlib.use("Agg")
        from sklearn.metrics import ConfusionMatrixDisplay

        display = ConfusionMatrixDisplay(self.confusion.to_numpy(), display_labels=["inconsistent", "consistent"])
        display.plot(colorbar=False)
        display.ax_.set_xlabel("judge: aligned")
        display.ax_.set_ylabel("people: consistent")
        display.figure_.tight_layout()
        return display.figure_


def agreement(human_binary, judge_aligned, human_graded, judge_support_rate) -> tuple[dict[str, float], pd.DataFrame]:
    """The agreement statistics over rows where both sides have a value."""
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, confusion_matrix

    human_binary, judge_aligned = np.asarray(human_binary, dtype=float), np.asarray(judge_aligned, dtype=float)
    both = ~np.isnan(human_binary) & ~np.isnan(judge_aligned)
    y_true, y_pred = human_binary[both].astype(int), judge_aligned[both].astype(int)
    metrics: dict[str, float] = {"rows_compared": float(both.sum())}
    if both.sum() and len(set(y_true)) > 1:
        metrics["balanced_accuracy"] = float(balanced_accuracy_score(y_true, y_pred))
    else:
        metrics["balanced_accuracy"] = math.nan
    metrics["cohen_kappa"] = float(cohen_kappa_score(y_true, y_pred)) if both.sum() > 1 else math.nan
    graded, support = np.asarray(human_graded, dtype=float), np.asarray(judge_support_rate, dtype=float)
    usable = ~np.isnan(graded) & ~np.isnan(support)
    metrics["rows_correlated"] = float(usable.sum())
    constant = usable.sum() < 3 or np.ptp(graded[usable]) == 0 or np.ptp(support[usable]) == 0
    metrics["spearman"] = math.nan if constant else float(spearmanr(graded[usable], support[usable]).statistic)
    metrics["kendall"] = math.nan if constant else float(kendalltau(graded[usable], support[usable]).statistic)
    matrix = confusion_matrix(y_true, y_pred, labels=[0, 1]) if both.sum() else np.zeros((2, 2), dtype=int)
    confusion = pd.DataFrame(matrix, index=["people: inconsistent", "people: consistent"], columns=["judge: not aligned", "judge: aligned"])
    return metrics, confusion


def meta_evaluate(labelled: pd.DataFrame, *, judge: Judge, sample: int | None = None, seed: int = 0, progress: bool | None = None) -> MetaReport:
    """Judge the labelled pairs (claims and verification only) and measure agreement with the human labels."""
    rows = stratified_labelled_sample(labelled, sample, seed=seed)
    result = judge_summaries(rows["source"], rows["summary"], judge=judge, ids=rows["id"], coverage=False, progress=progress)
    table = result.rows
    metrics, confusion = agreement(rows["human_binary"], table["aligned"], rows["human_graded"], table["support_rate"])
    metrics.update(
        rows=float(len(rows)),
        judge_error_rate=result.metrics["judge_error_rate"],
        human_consistent_rate=float(rows["human_binary"].mean()),
        judge_aligned_rate=result.metrics["alignment"],
    )
    return MetaReport(metrics=metrics, confusion=confusion, result=result)
