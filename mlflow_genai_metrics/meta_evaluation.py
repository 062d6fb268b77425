"""Meta-evaluation, the judge measured against people: run our judgement on a human-labelled faithfulness set and
measure how well it agrees.

    from mlflow_genai_metrics.meta_evaluation import load_labelled, meta_evaluate
    labelled = load_labelled("../shared/data/faithfulness/frank.jsonl")
    report = meta_evaluate(labelled, judge=judge, sample=100)
    report.metrics["balanced_accuracy"], report.metrics["spearman"]

Also ``mgm meta-eval FILE --sample N``. The grounding check (no judge) is measured the same way by
``grounding_meta_evaluate`` (``mgm meta-eval FILE --grounding-only``): AUC of ``grounding`` and balanced accuracy
of ``grounded`` against the binary label, Spearman of ``grounding`` against the graded label, beside the untrained
rule of issue 15, on the rows of a file that the model was not trained on. Reported: balanced accuracy and Cohen's kappa of ``aligned`` against the
binary human label (1 = the summary is fully consistent), with exact intervals and n (``binary_agreement``, which
``tracking.judge_agreement`` shares for feedback people leave on traces), Spearman and Kendall correlation of ``support_rate``
with the graded human label, the confusion matrix, and how many rows the judge failed on (left out, counted).
This measures the study's ``aligned`` (no claim contradicted); the MLflow card, and so ``judge_agreement``, is the
stricter ``strictly_aligned`` (every claim supported). Statistics from scikit-learn and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from .judge import Judge
from .stats import StatisticsOptions, calibration_error, mean_of_two_proportions_interval
from .summarization import judge_summaries
from .summarization.scoring import Estimate
from .tables import load_labelled as load_labelled  # part of meta-evaluation's API: the labelled sets it reads


def stratified_labelled_sample(frame: pd.DataFrame, n: int | None, *, seed: int = 0) -> pd.DataFrame:
    """``n`` rows with the binary label's shares kept (both classes present when both exist)."""
    if n is None or n >= len(frame):
        return frame.reset_index(drop=True)
    counts = frame["human_binary"].value_counts()
    # largest remainders, every class at least one row (n >= 2): exactly n rows (rounding half to even once gave 4 of
    # 5, and cutting the sorted rows to n once dropped the only row of the rarer class)
    exact = counts / counts.sum() * n
    take = np.floor(exact).astype(int).clip(lower=1 if n >= len(counts) else 0)
    for value in (exact - np.floor(exact)).sort_values(ascending=False).index:
        if take.sum() >= n:
            break
        take[value] += 1
    while take.sum() > n:  # the minimum of one pushed it over: from the largest class
        take[take.idxmax()] -= 1
    parts = [frame[frame["human_binary"] == value].sample(n=int(take[value]), random_state=seed) for value in counts.index if take[value]]
    return pd.concat(parts).sort_index().reset_index(drop=True)


@dataclass
class MetaReport:
    metrics: dict[str, float]
    confusion: pd.DataFrame  # rows: human label, columns: judge's aligned
    result: Any  # SummarizationResult, or rag.AnswersResult (answers_meta_evaluate)

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


def _balanced_accuracy(cells: np.ndarray) -> np.ndarray:
    """Mean of the recall of each human class; NaN when people used one class only. ``cells``: (..., 4)."""
    tn, fp, fn, tp = np.moveaxis(np.asarray(cells, dtype=float), -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (tp / (tp + fn) + tn / (tn + fp)) / 2


def _cohen_kappa(cells: np.ndarray) -> np.ndarray:
    """(observed - chance agreement) / (1 - chance), in counts; NaN where people or the judge used one class only
    (kappa is 0 there whatever the judge does, as scikit-learn gives it: no agreement beyond chance can be shown, and
    a 0 read as "no better than chance", from one row)."""
    tn, fp, fn, tp = np.moveaxis(np.asarray(cells, dtype=float), -1, 0)
    n = tn + fp + fn + tp
    chance = (tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)
    one_class = ((tp + fn) == 0) | ((tn + fp) == 0) | ((tp + fp) == 0) | ((tn + fn) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(one_class, np.nan, (n * (tp + tn) - chance) / (n * n - chance))


def _kappa_of(yes_rate: np.ndarray, recall_yes: float, recall_no: float) -> np.ndarray:
    """Cohen's kappa of a judge with these recalls on people's two classes, where people say yes at ``yes_rate``."""
    agree = yes_rate * recall_yes + (1 - yes_rate) * recall_no
    judge_yes = yes_rate * recall_yes + (1 - yes_rate) * (1 - recall_no)
    chance = yes_rate * judge_yes + (1 - yes_rate) * (1 - judge_yes)
    return (agree - chance) / (1 - chance)


def kappa_interval(cells: np.ndarray, *, confidence: float = 0.95) -> tuple[float, float]:
    """Cohen's kappa's interval from the four cells (tn, fp, fn, tp): its range over a box that holds the truth with
    probability at least ``confidence`` (Bonferroni): exact Clopper-Pearson intervals, each at 1 - (1 - confidence)
    / 3, for people's yes-rate and for the judge's recall on each of people's classes (given the class sizes, each
    recall's count is binomial). At any yes-rate kappa rises with either recall, so its lower bound is at both
    recalls' lower bounds and its upper at their upper bounds, each over the yes-rate's interval (kappa can dip or
    peak inside it: searched on a grid of 2,001 rates). So it holds its level at every n and every cell mix by
    construction. The percentile bootstrap it replaced covered 0.73 at 20 pairs with people's "no" a tenth of them,
    0.87 at 10 pairs and 0.91 at 40 balanced ones. (nan, nan) where people used one class only (no recall to bound
    for the other), or under 2 pairs."""
    tn, fp, fn, tp = (int(c) for c in np.asarray(cells).reshape(4))
    yes, no = tp + fn, tn + fp
    if yes < 1 or no < 1:
        return (math.nan, math.nan)
    level = 1 - (1 - confidence) / 3
    rate, recall_yes, recall_no = (scipy_stats.binomtest(x, n).proportion_ci(confidence_level=level, method="exact")
                                   for x, n in ((yes, yes + no), (tp, yes), (tn, no)))
    rates = np.linspace(rate.low, rate.high, 2001)
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.nanmin(_kappa_of(rates, recall_yes.low, recall_no.low))
        high = np.nanmax(_kappa_of(rates, recall_yes.high, recall_no.high))
    return (float(low), float(high))


def binary_agreement(confusion, statistics: StatisticsOptions = StatisticsOptions()) -> dict[str, Estimate]:
    """Balanced accuracy and Cohen's kappa of a judge against people from the 2 x 2 confusion matrix (rows: people
    no/yes, columns: judge no/yes), each with its interval and n, the pairs it stands on. Both intervals are exact by
    construction: balanced accuracy's (``stats.mean_of_two_proportions_interval``: each class's recall with its
    Clopper-Pearson interval at 97.5%, averaged) and kappa's (``kappa_interval``: its range over exact intervals of
    people's yes-rate and both recalls) hold 95% at every class size. Where people or the judge used one class only,
    kappa itself is undefined (NaN), and so is its interval.

        binary_agreement([[3, 1], [0, 4]])["cohen_kappa"].value  # 0.75
    """
    cells = np.asarray(confusion, dtype=np.int64).reshape(4)  # tn, fp, fn, tp
    tn, fp, fn, tp = (int(c) for c in cells)
    low, high = mean_of_two_proportions_interval((tp, tn), (tp + fn, tn + fp), confidence=statistics.confidence)
    found = {"balanced_accuracy": Estimate("balanced_accuracy", float(_balanced_accuracy(cells)), low, high, int(cells.sum()), "exact")}
    kappa = float(_cohen_kappa(cells))
    low, high = kappa_interval(cells, confidence=statistics.confidence) if not math.isnan(kappa) else (math.nan, math.nan)
    found["cohen_kappa"] = Estimate("cohen_kappa", kappa, low, high, int(cells.sum()), "exact")
    return found


def confusion_frame(matrix, *, people=("inconsistent", "consistent"), judge=("not aligned", "aligned"), rater: str = "judge") -> pd.DataFrame:
    """The 2 x 2 counts with labelled rows (people) and columns (``rater``: the judge, or the grounding check)."""
    return pd.DataFrame(np.asarray(matrix, dtype=int), index=[f"people: {p}" for p in people], columns=[f"{rater}: {j}" for j in judge])


def binary_agreement_metrics(confusion, statistics: StatisticsOptions = StatisticsOptions()) -> dict[str, float]:
    """``binary_agreement`` as flat metrics: each figure with its ``_ci_low``, ``_ci_high`` and ``_n``."""
    metrics: dict[str, float] = {}
    for estimate in binary_agreement(confusion, statistics).values():
        metrics.update(estimate.as_metrics())
    return metrics


def agreement(
    human_binary, judge_aligned, human_graded, judge_support_rate, statistics: StatisticsOptions = StatisticsOptions()
) -> tuple[dict[str, float], pd.DataFrame]:
    """The agreement statistics over rows where both sides have a value."""
    from scipy.stats import kendalltau, spearmanr

    human_binary, judge_aligned = np.asarray(human_binary, dtype=float), np.asarray(judge_aligned, dtype=float)
    both = ~np.isnan(human_binary) & ~np.isnan(judge_aligned)
    y_true, y_pred = human_binary[both].astype(int), judge_aligned[both].astype(int)
    matrix = np.bincount(2 * y_true + y_pred, minlength=4).reshape(2, 2)
    metrics: dict[str, float] = {"rows_compared": float(both.sum()), **binary_agreement_metrics(matrix, statistics)}
    graded, support = np.asarray(human_graded, dtype=float), np.asarray(judge_support_rate, dtype=float)
    usable = ~np.isnan(graded) & ~np.isnan(support)
    metrics["rows_correlated"] = float(usable.sum())
    constant = usable.sum() < 3 or np.ptp(graded[usable]) == 0 or np.ptp(support[usable]) == 0
    metrics["spearman"] = math.nan if constant else float(spearmanr(graded[usable], support[usable]).statistic)
    metrics["kendall"] = math.nan if constant else float(kendalltau(graded[usable], support[usable]).statistic)
    return metrics, confusion_frame(matrix)


def meta_evaluate(
    labelled: pd.DataFrame, *, judge: Judge, sample: int | None = None, seed: int = 0, progress: bool | None = None,
    statistics: StatisticsOptions | None = None, **method: Any,
) -> MetaReport:
    """Judge the labelled pairs (claims and verification only) and measure agreement with the human labels.

    ``seed`` draws the sample; ``statistics`` (a ``stats.StatisticsOptions``) sets every interval, the result's and
    the agreement's; ``method``: how claims are verified (``stability``, ``order_check``, ``examples``)."""
    statistics = statistics or StatisticsOptions()
    rows = stratified_labelled_sample(labelled, sample, seed=seed)
    result = judge_summaries(rows["source"], rows["summary"], judge=judge, ids=rows["id"], coverage=False, progress=progress,
                             statistics=statistics, **method)
    table = result.rows
    metrics, confusion = agreement(rows["human_binary"], table["aligned"], rows["human_graded"], table["support_rate"], statistics)
    metrics.update(
        rows=float(len(rows)),
        judge_error_rate=result.metrics["judge_error_rate"],
        human_consistent_rate=float(rows["human_binary"].mean()),
        judge_aligned_rate=result.metrics["alignment"],
    )
    return MetaReport(metrics=metrics, confusion=confusion, result=result)


def answers_meta_evaluate(
    labelled: pd.DataFrame, *, judge: Judge, sample: int | None = None, seed: int = 0, progress: bool | None = None,
    statistics: StatisticsOptions | None = None, **method: Any,
) -> MetaReport:
    """The answer judge (``rag.judge_answers``) against people, on labelled answers from passages (``rag.labelled``:
    a labelled RAG set, or a faithfulness set recast as retrieval): agreement of ``aligned`` with the binary label
    and of ``support_rate`` with the graded one, as ``meta_evaluate``; and ``cited_passage_accuracy``, the share of
    the supported claims (quote found) whose cited passage is one of the row's ``gold`` passages (``supported_claims``
    of them), with the run's ``quote_failure_rate``."""
    from .rag import judge_answers
    from .rag.labelled import cited_passage_accuracy

    statistics = statistics or StatisticsOptions()
    rows = stratified_labelled_sample(labelled, sample, seed=seed)
    result = judge_answers(rows["question"], rows["passages"], rows["answer"], judge=judge, ids=rows["id"], progress=progress,
                           statistics=statistics, **method)
    table = result.rows
    metrics, confusion = agreement(rows["human_binary"], table["aligned"], rows["human_graded"], table["support_rate"], statistics)
    accuracy, supported = cited_passage_accuracy(result.claims, dict(zip(rows["id"].astype(str), rows["gold"])))
    metrics.update(
        rows=float(len(rows)), judge_error_rate=result.metrics["judge_error_rate"], human_consistent_rate=float(rows["human_binary"].mean()),
        judge_aligned_rate=result.metrics["alignment"], cited_passage_accuracy=accuracy, supported_claims=float(supported),
        quote_failure_rate=result.metrics.get("quote_failure_rate", math.nan),
    )
    return MetaReport(metrics=metrics, confusion=confusion, result=result)


def evaluation_rows(labelled: pd.DataFrame, name: str, split: str | None = None) -> pd.DataFrame:
    """The rows of set ``name`` (a file's stem: frank, summedits...) the grounding model may be measured on:
    ``split`` when given, else every row outside the split it was trained on (FRANK ``valid``, SummEdits
    ``evaluation``). Asking for a training split is refused."""
    from .grounding.model import TRAINING_SPLITS

    trained_on = TRAINING_SPLITS.get(name)
    if split is not None and split == trained_on:
        raise ValueError(f"{name} split {split!r} trained the grounding model; measure it on another split")
    if "split" not in labelled.columns:
        if split is not None:
            raise ValueError(f"{name} has no split column: leave out split {split!r}")
        return labelled.reset_index(drop=True)
    splits = labelled["split"].astype("string").fillna("")
    if split is not None and not (splits == split).any():
        raise ValueError(f"{name} has no split {split!r}; its splits: {', '.join(sorted(set(splits) - {''}))}")
    keep = splits == split if split is not None else splits != (trained_on or "\0")
    return labelled[keep.to_numpy()].reset_index(drop=True)


def untrained_rule_scores(sources, summaries) -> list[float]:
    """Issue 15's untrained rule per row: per summary sentence the share of its stemmed content words found in the
    source (0 when it holds a number the source lacks); the row's score is the minimum over its sentences."""
    from .grounding.features import SENTENCE_FEATURES, SourceIndex, summary_features

    column = list(SENTENCE_FEATURES).index("untrained_rule")
    indexes: dict[str, SourceIndex] = {}
    scores = []
    for source, summary in zip(sources, summaries):
        index = indexes.get(source) or indexes.setdefault(source, SourceIndex(source))
        sentences = summary_features(summary, index)
        scores.append(min(s.values[column] for s in sentences) if sentences else math.nan)
    return scores


@dataclass
class GroundingMetaReport:
    """``metrics``: the figures on all rows; ``groups``: the same per value of ``by`` (e.g. SummEdits' domain);
    ``confusion``: people's binary label by the model's ``grounded`` flag."""

    metrics: dict[str, float]
    groups: pd.DataFrame
    model_tag: str
    confusion: pd.DataFrame
    reliability: pd.DataFrame  # per tenth of grounding: rows, mean grounding, people's consistent rate

    @property
    def signature(self) -> str:
        """The run signature of a grounding-only measurement: the grounding model file's tag."""
        from .signature import summarization_signature

        return summarization_signature(None, grounding=self.model_tag).format()


def reliability_table(labels: np.ndarray, probabilities: np.ndarray, bins: int = 10) -> pd.DataFrame:
    """The reliability diagram's points: per equal-width bin of the probability, its rows, their mean probability
    and their share of label 1 (a calibrated probability has the two equal)."""
    labels, probabilities = np.asarray(labels, dtype=float), np.asarray(probabilities, dtype=float)
    which = np.minimum((probabilities * bins).astype(int), bins - 1)
    return pd.DataFrame([
        {"bin": f"{k / bins:.1f}-{(k + 1) / bins:.1f}", "rows": int((which == k).sum()),
         "mean_probability": float(probabilities[which == k].mean()) if (which == k).any() else math.nan,
         "consistent_rate": float(labels[which == k].mean()) if (which == k).any() else math.nan}
        for k in range(bins)
    ])


def _is_graded(rows: pd.DataFrame) -> bool:
    """A set's label is a grade (a share of sentences, as FRANK's and QAGS's, even when every summary has one
    sentence) unless its scale says it is binary (SummEdits)."""
    scales = rows["label_scale"].dropna().astype(str) if "label_scale" in rows.columns else pd.Series([], dtype=str)
    return not (len(scales) and scales.str.lower().str.startswith("binary").all())


def _grounding_figures(rows: pd.DataFrame, rule_threshold: float, graded: bool) -> tuple[dict[str, float], pd.DataFrame]:
    """The figures of ``rows`` and the confusion matrix of the model's ``grounded`` flag."""
    from sklearn.metrics import roc_auc_score

    binary = rows["human_binary"].to_numpy(dtype=int)
    both_classes = len(set(binary)) > 1
    grades = rows["human_graded"] if graded else [math.nan] * len(rows)
    figures: dict[str, float] = {"rows": float(len(rows)), "human_consistent_rate": float(binary.mean())}
    for prefix, score, flag in (
        ("grounding", rows["grounding"], rows["grounded"]),
        ("rule", rows["rule"], (rows["rule"] >= rule_threshold).astype(float).where(rows["rule"].notna())),
    ):
        usable = score.notna().to_numpy()
        metrics, confusion = agreement(binary, flag.astype(float), grades, score)
        if prefix == "grounding":
            grounded_confusion = confusion_frame(confusion.to_numpy(), judge=("not grounded", "grounded"), rater="grounding")
        figures[f"{prefix}_auc"] = float(roc_auc_score(binary[usable], score[usable])) if both_classes else math.nan
        figures[f"{prefix}_balanced_accuracy"] = metrics["balanced_accuracy"]
        figures[f"{prefix}_spearman"] = metrics["spearman"]
    figures["grounded_rate"] = float(rows["grounded"].astype(float).mean())
    scored = rows["grounding"].notna().to_numpy()
    figures["grounding_calibration_error"] = calibration_error(binary[scored], rows["grounding"][scored]) if scored.any() else math.nan
    figures["unscored"] = float((~scored).sum())
    return figures, grounded_confusion


def grounding_meta_evaluate(labelled: pd.DataFrame, *, by: str | None = None) -> GroundingMetaReport:
    """The shipped grounding model (read from its file) and the untrained rule against the human labels:
    AUC and balanced accuracy against ``human_binary`` (the model's ``grounded``, grounding >= 0.5; the rule at the
    cut the model file records from the training splits), Spearman against ``human_graded`` where it is graded, the
    calibration error of ``grounding`` and its reliability table; rows the check cannot read are left out of each
    figure and counted (``unscored``)."""
    from .grounding import load_model
    from .summarization.grounding_only import grounding_metrics

    model = load_model()
    result = grounding_metrics(labelled["source"], labelled["summary"], ids=list(range(len(labelled))), cache=False)
    rows = labelled.assign(
        grounding=result.rows["grounding"].to_numpy(),
        grounded=result.rows["grounded"].astype("float64").to_numpy(),
        rule=untrained_rule_scores(labelled["source"], labelled["summary"]),
    )
    rule_threshold = float(model.meta["untrained_rule"]["threshold"])
    graded = _is_graded(rows)
    groups = []
    if by is not None and by in rows.columns:
        for value, part in rows.groupby(by, sort=True):
            groups.append({by: value, **_grounding_figures(part, rule_threshold, graded)[0]})
    figures, confusion = _grounding_figures(rows, rule_threshold, graded)
    scored = rows["grounding"].notna().to_numpy()
    reliability = reliability_table(rows["human_binary"].to_numpy()[scored], rows["grounding"].to_numpy()[scored])
    return GroundingMetaReport(figures, pd.DataFrame(groups), result.model_tag, confusion, reliability)
