"""The study, as an application: candidates summarize articles, a judge scores them, every candidate becomes an
MLflow run (with its model logged), the runs are compared, and a gate decides what gets registered.

``mgm demo`` runs it on the package's own articles with local models; ``examples/reproduce_study.py`` runs it on
the BBC corpus with any OpenAI-compatible candidates and judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import pandas as pd

from .generate import DEFAULT_SUMMARY_PROMPT, summarize
from .judge import Judge
from .summarization.scoring import interval_names

__all__ = ["Candidate", "StudyResult", "demo_articles", "judge_failure_summary", "format_table", "load_articles", "local_store", "run_study", "stratified_sample", "ui_command"]


@dataclass(frozen=True)
class Candidate:
    """A summarizer under study: a name for the run, the model, and its OpenAI-compatible endpoint."""

    name: str
    model: str
    base_url: str | None = None
    prompt: str = DEFAULT_SUMMARY_PROMPT
    max_tokens: int = 512


@dataclass
class StudyResult:
    table: pd.DataFrame  # one row per candidate: the study's table
    by_category: pd.DataFrame  # alignment and richness per candidate and category
    run_ids: dict[str, str]
    comparison: pd.DataFrame | None
    gates: dict[str, object] = field(default_factory=dict)
    experiment_id: str = ""
    comparison_refused: str | None = None  # why the runs were not compared (too few rows judged on both sides, ...)
    judge_failures: dict[str, str] = field(default_factory=dict)  # candidate -> "3 of 8 rows: no_claims 3"


def judge_failure_summary(errors: pd.Series) -> str:
    """``"6 of 8 rows (no_claims 5, timeout 1)"`` from a per-row ``error`` column; ``""`` when every row was judged."""
    failed = errors.fillna("").astype(str)
    failed = failed[failed != ""]
    if failed.empty:
        return ""
    kinds = failed.str.extract(r"failed: ([a-z_]+)", expand=False).fillna("other").value_counts()
    return f"{len(failed)} of {len(errors)} rows ({', '.join(f'{kind} {count}' for kind, count in kinds.items())})"


def demo_articles() -> pd.DataFrame:
    """The eight short articles that ship with the package (written for it; see ``data/README.md``)."""
    text = files("mlflow_genai_metrics").joinpath("data/demo_articles.jsonl").read_text(encoding="utf-8")
    return pd.read_json(pd.io.common.StringIO(text), lines=True)


def load_articles(path: str | Path | None = None) -> pd.DataFrame:
    """The demo articles, or a file with ``text`` (and optional ``id``, ``category``, reference) columns.

    The BBC file works as is: ``reference_summary_sentences`` becomes the ``reference`` (sentences joined by
    spaces), falling back to ``reference_summary``.
    """
    if path is None:
        frame = demo_articles()
    else:
        from .cli import read_table

        frame = read_table(str(path))
    if "text" not in frame.columns:
        raise ValueError(f"{path}: the articles need a 'text' column; it has {list(frame.columns)}")
    if "id" not in frame.columns:
        frame = frame.assign(id=[str(i) for i in range(len(frame))])
    if "category" not in frame.columns:
        frame = frame.assign(category="all")
    if "reference" not in frame.columns:
        if "reference_summary_sentences" in frame.columns:
            frame = frame.assign(reference=frame["reference_summary_sentences"].map(" ".join))
        elif "reference_summary" in frame.columns:
            frame = frame.assign(reference=frame["reference_summary"])
    return frame


def stratified_sample(frame: pd.DataFrame, n: int, *, by: str = "category", seed: int = 0) -> pd.DataFrame:
    """``n`` rows, split across ``by`` in proportion (at least one each), after dropping duplicate texts."""
    unique = frame.drop_duplicates(subset=["text"]).reset_index(drop=True)
    unique = unique.assign(_norm=unique["text"].str.split().str.join(" ")).drop_duplicates(subset=["_norm"]).drop(columns="_norm")
    if n >= len(unique):
        return unique.reset_index(drop=True)
    shares = unique[by].value_counts(normalize=True)
    quotas = {c: max(1, int(round(share * n))) for c, share in shares.items()}
    while sum(quotas.values()) > n:  # rounding overshoot: trim the largest groups
        quotas[max(quotas, key=quotas.get)] -= 1
    while sum(quotas.values()) < n:
        quotas[max(shares.index, key=lambda c: shares[c] * n - quotas[c])] += 1
    parts = [unique[unique[by] == c].sample(n=min(q, (unique[by] == c).sum()), random_state=seed) for c, q in quotas.items()]
    return pd.concat(parts).sort_values("id").reset_index(drop=True)


def _with_interval(metrics: Mapping[str, float], name: str, digits: int = 3) -> str:
    value = metrics.get(name, math.nan)
    if not math.isfinite(value):
        return "n/a"
    low_name, high_name, _ = interval_names(name)
    low, high = metrics.get(low_name, math.nan), metrics.get(high_name, math.nan)
    interval = f" [{low:.{digits}f}, {high:.{digits}f}]" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{value:.{digits}f}{interval}"


def _study_row(name: str, model: str, metrics: Mapping[str, float], generation_errors: int) -> dict[str, object]:
    def plain(key: str, digits: int = 3) -> str:
        value = metrics.get(key, math.nan)
        return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"

    return {
        "candidate": name,
        "model": model,
        "alignment [95% CI]": _with_interval(metrics, "alignment"),
        "richness [95% CI]": _with_interval(metrics, "richness", 2),
        "coverage": plain("coverage"),
        "defect: contradiction": plain("defect_rate/contradiction"),
        "defect: unverifiable": plain("defect_rate/unverifiable"),
        "defect: empty": plain("defect_rate/empty"),
        "rougeL": plain("rougeL"),
        "judge errors": plain("judge_error_rate"),
        "generation errors": generation_errors,
        "judge calls": int(metrics.get("judge/calls", 0)),
        "judge tokens": int(metrics.get("judge/prompt_tokens", 0) + metrics.get("judge/completion_tokens", 0)),
    }


def format_table(table: pd.DataFrame) -> str:
    """The study's table as Markdown."""
    columns = list(table.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    return "\n".join(lines)


def run_study(
    articles: pd.DataFrame,
    candidates: Sequence[Candidate],
    judge: Judge,
    *,
    experiment: str = "mgm-study",
    artifact_location: str | Path | None = None,
    gate_rules: Mapping[str, str] | None = None,
    registered_name: str = "summarizer",
    coverage: bool = True,
    candidate_concurrency: int = 4,
    progress: bool | None = True,
) -> StudyResult:
    """Summarize ``articles`` (columns ``id``, ``category``, ``text``, optional ``reference``) with every candidate,
    evaluate each as an MLflow run in ``experiment`` (its ``SummarizerModel`` logged), compare the runs, and gate
    each candidate with ``gate_rules`` (registering those that pass). The current MLflow tracking URI is used; a new
    experiment keeps its artifacts in ``artifact_location`` when given. Articles whose generation failed are left
    out of that candidate's run and counted as generation errors.
    """
    import mlflow

    from .summarization.comparison import InsufficientPairsError, SourceMismatchError
    from .tracking import SummarizerModel, compare_runs, load_run, register_if_passing, summarization_metrics

    existing = mlflow.get_experiment_by_name(experiment)
    if existing is None and artifact_location is not None:
        mlflow.create_experiment(experiment, artifact_location=Path(artifact_location).resolve().as_uri())
    experiment_id = mlflow.set_experiment(experiment).experiment_id
    metrics = summarization_metrics(judge, coverage=coverage, source_col="text", id_col="id", category_col="category", progress=progress)
    rows, run_ids, model_uris, categories = [], {}, {}, []
    for candidate in candidates:
        generated = summarize(
            list(articles["text"]),
            model=candidate.model,
            base_url=candidate.base_url,
            prompt=candidate.prompt,
            max_tokens=candidate.max_tokens,
            max_concurrency=candidate_concurrency,
            progress=progress,
        )
        ok = generated["error"] == ""
        data = articles.assign(summary=generated["summary"])[ok.to_numpy()].reset_index(drop=True)
        with mlflow.start_run(run_name=candidate.name) as run:
            mlflow.log_params({"candidate.model": candidate.model, "candidate.prompt": candidate.prompt[:500]})
            mlflow.log_metric("generation_error_rate", float((~ok).mean()))
            info = SummarizerModel(candidate.model, candidate.base_url, prompt=candidate.prompt, input_col="text", max_tokens=candidate.max_tokens).log(name="summarizer")
            targets = "reference" if "reference" in data.columns else None
            evaluation = mlflow.models.evaluate(data=data, predictions="summary", targets=targets, extra_metrics=metrics)
        run_ids[candidate.name], model_uris[candidate.name] = run.info.run_id, info.model_uri
        rows.append(_study_row(candidate.name, candidate.model, evaluation.metrics, int((~ok).sum())))
        table = evaluation.tables["eval_results_table"]
        per_category = pd.DataFrame(
            {"category": data["category"], "aligned": table["aligned/score"], "claim_count": table["claim_count/score"]}
        ).groupby("category").mean(numeric_only=True)
        categories.append(per_category.rename(columns={"aligned": "alignment", "claim_count": "richness"}).assign(candidate=candidate.name).reset_index())
    comparison, refused = None, None
    if len(run_ids) > 1:
        try:
            comparison = compare_runs(list(run_ids.values()))
        except (InsufficientPairsError, SourceMismatchError) as error:  # too few rows judged on both sides: said, not raised
            refused = str(error)
    failures = {name: judge_failure_summary(load_run(run_id).rows["error"]) for name, run_id in run_ids.items()}
    gates = {}
    if gate_rules:
        for candidate in candidates:
            gates[candidate.name] = register_if_passing(
                model_uris[candidate.name], registered_name, run_id=run_ids[candidate.name], rules=gate_rules, alias=None
            )
    by_category = pd.concat(categories, ignore_index=True)[["candidate", "category", "alignment", "richness"]] if categories else pd.DataFrame()
    return StudyResult(
        pd.DataFrame(rows), by_category, run_ids, comparison, gates, experiment_id,
        comparison_refused=refused, judge_failures={name: text for name, text in failures.items() if text},
    )


def ui_command(tracking_uri: str) -> str:
    return f"mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port 5000"


def local_store(folder: str | Path) -> str:
    """A SQLite tracking store (and registry) in ``folder``, with artifacts beside it; returns its URI."""
    import mlflow

    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return uri
