"""Running the study: every candidate summarizes the articles and becomes an MLflow run (its model logged), the
runs are compared, and a gate decides what gets registered."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..generate import DEFAULT_SUMMARY_PROMPT, summarize
from ..judge import Judge
from ..summarization.warnings import RunWarning
from .table import judge_failure_summary, study_row


@dataclass(frozen=True)
class Candidate:
    """A summarizer under study: a name for the run, the model, and its OpenAI-compatible endpoint."""

    name: str
    model: str
    base_url: str | None = None
    prompt: str = DEFAULT_SUMMARY_PROMPT
    max_tokens: int = 512

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a candidate's name names its run, model and gate: give one, not {self.name!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"candidate {self.name!r}: max_tokens is a whole number above 0, not {self.max_tokens!r}")


@dataclass
class StudyResult:
    table: pd.DataFrame  # one row per candidate: the study's table
    by_category: pd.DataFrame  # alignment, richness and grounding per candidate and category
    run_ids: dict[str, str]
    comparison: pd.DataFrame | None
    gates: dict[str, object] = field(default_factory=dict)
    experiment_id: str = ""
    comparison_refused: str | None = None  # why the runs (or those left out of it) were not compared (too few rows judged on both sides, ...)
    judge_failures: dict[str, str] = field(default_factory=dict)  # candidate -> "3 of 8 rows: no_claims 3"
    warnings: dict[str, list[RunWarning]] = field(default_factory=dict)  # candidate -> its run's warnings (only those with one)
    cut_off: dict[str, str] = field(default_factory=dict)  # candidate -> "2 of 8 summaries cut off at max_tokens 200 (...)"


def run_study(
    articles: pd.DataFrame,
    candidates: Sequence[Candidate],
    judge: Judge | None,
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
    each candidate with ``gate_rules`` (registering those that pass). Every run also carries the model-free
    grounding check (``grounding``, ``grounded_rate``, and ``judge/suspect_rate`` on the judge's verdicts);
    ``judge=None`` runs the study with that check alone, no judge call. ``StudyResult.warnings`` holds each run's
    warnings (a judge that verified almost nothing). The current MLflow tracking URI is used; a new experiment keeps
    its artifacts in ``artifact_location`` when given. An article a candidate failed to summarize is a failed row of
    its run (an ``APPLICATION_ERROR`` card naming the error; ``judge_error_rate`` and a gate count it against the
    candidate), and counted in ``generation_error_rate`` beside it. A candidate judged on fewer than half the articles is
    left out of the comparison when it would refuse every run: the others are compared, and its run's ``mgm.comparison``
    tag and the comparison run's ``mgm.left_out`` say why.

    Each run is an ``mlflow.genai.evaluate`` run (``evaluate_summaries``, linked to the candidate's logged model):
    one trace per article and one card per judge on it (``ClaimAlignment``, ``KeyPointCoverage`` with ``coverage``,
    ``Grounding``), so people can label it. The table, the per-category figures, the failures and the warnings are
    read from the evaluation's result in memory, never back from MLflow; the one ``judge`` serves every candidate.
    """
    import mlflow

    from ..generate import check_generator
    from ..summarization.comparison import InsufficientPairsError, SourceMismatchError
    from ..tables import table_records
    from ..tracking import SummarizerModel, compare_runs, evaluate_summaries, register_if_passing
    from ..tracking.evaluate import check_rows
    from ..tracking.run_logging import set_note_section, tag_value

    names = [candidate.name for candidate in candidates]
    if repeated := sorted({name for name in names if names.count(name) > 1}):  # each names a run, a model and a gate:
        raise ValueError(f"candidate names must differ: {repeated} repeat (the runs, models and gates are found by name)")
    if gate_rules:  # a malformed rule or a typo in a metric's name: said before any run, not after every candidate's
        _check_gate_rules(gate_rules)
    # the articles as rows, read before any run: a missing or repeated id (1 and "1" too) was refused once the first
    # candidate had summarized every article, leaving a FAILED run that did not say why
    frame = articles.reset_index(drop=True)
    records = table_records(frame, summary_col=None, id_col="id", category_col="category", reference_col="reference" if "reference" in frame.columns else None)
    check_rows(records, _judges(judge, coverage))
    for candidate in candidates:  # an endpoint that does not serve its candidate: said before any run, in its words
        check_generator(candidate.model, candidate.base_url, fix=f"candidate {candidate.name!r}'s model and base_url")
    experiment_id = study_experiment(experiment, artifact_location)
    rows, run_ids, model_uris, categories, failures, warnings, cut_off, scored = [], {}, {}, [], {}, {}, {}, {}
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
        if cut := int((ok & (generated["finish_reason"] == "length")).sum()):  # judged as written, but said (it was not)
            cut_off[candidate.name] = (f"{cut} of {len(frame)} summaries cut off at max_tokens {candidate.max_tokens} "
                                       "(judged as written: raise the candidate's max_tokens for whole summaries)")
        # MLflow tries ``predict_fn`` on the first row and stops the evaluation if it raises: an answered article first
        data = [records[i] for i in sorted(range(len(frame)), key=lambda i: not ok.iloc[i])]
        with mlflow.start_run(run_name=candidate.name, experiment_id=experiment_id) as run:
            mlflow.log_params({"candidate.model": candidate.model, "candidate.prompt": candidate.prompt[:500]})
            info = SummarizerModel(candidate.model, candidate.base_url, prompt=candidate.prompt, input_col="text", max_tokens=candidate.max_tokens).log(name=_model_name(candidate.name))
            if candidate.name in cut_off:
                mlflow.set_tag("mgm.generation.cut_off", cut_off[candidate.name])
            if not ok.any():  # every generation failed: nothing to judge; the run says so and the study goes on
                why = f"no summary to judge: every generation failed (the first: {generated['error'].iloc[0]})"
                mlflow.log_metric("generation_error_rate", float((~ok).mean()))
                mlflow.set_tag("mgm.error", tag_value(why))
                mlflow.end_run(status="FAILED")
                run_ids[candidate.name], failures[candidate.name] = run.info.run_id, why
                rows.append(study_row(candidate.name, candidate.model, {}, int((~ok).sum())))
                continue
            try:
                evaluation = evaluate_summaries(data, _judges(judge, coverage), model_id=info.model_id,
                                                predict_fn=_replay(articles, generated))
            finally:  # after the evaluation's figures: MLflow's run lists show metric columns in the order first logged
                mlflow.log_metric("generation_error_rate", float((~ok).mean()))
        run_ids[candidate.name], model_uris[candidate.name] = run.info.run_id, info.model_uri
        result = evaluation.result
        rows.append(study_row(candidate.name, candidate.model, result.metrics, int((~ok).sum())))
        categories.append(_per_category(result.rows).assign(candidate=candidate.name).reset_index())
        failures[candidate.name], warnings[candidate.name] = judge_failure_summary(result.rows["error"]), result.warnings
        scored[candidate.name] = int((result.rows["error"].fillna("").astype(str) == "").sum())
    comparison, refused, not_compared = None, None, []
    judged = [name for name in run_ids if name in model_uris]  # candidates with summaries judged
    if len(judged) > 1:
        try:
            comparison = compare_runs([run_ids[name] for name in judged], log=True)  # the study keeps its comparison run and plots
        except (InsufficientPairsError, SourceMismatchError) as error:  # too few rows judged on both sides: said, not raised
            refused = str(error)
            # A candidate judged on under half the articles (its endpoint refused the rest) took every other pair's
            # comparison down with it, and nothing in MLflow said why: the others are compared without it, said.
            kept = [name for name in judged if 2 * scored[name] >= len(frame)]
            if isinstance(error, InsufficientPairsError) and 1 < len(kept) < len(judged):
                left = [name for name in judged if name not in kept]
                refused = (f"{', '.join(f'{name} (judged on {scored[name]} of {len(frame)} articles)' for name in left)} "
                           f"against the others: too few articles judged on both sides ({error})")
                try:
                    comparison = compare_runs([run_ids[name] for name in kept], log=True)
                except (InsufficientPairsError, SourceMismatchError) as again:
                    refused = str(again)
            client = mlflow.MlflowClient()
            for name in judged:  # where a person looks for the comparison: on the comparison run and on each run left out
                if comparison is None or name not in kept:
                    client.set_tag(run_ids[name], "mgm.comparison", tag_value(f"not compared: {refused}"))
                    not_compared.append(name)
            if comparison is not None:
                client.set_tag(comparison.attrs["comparison_run_id"], "mgm.left_out", tag_value(refused))
                set_note_section(client, comparison.attrs["comparison_run_id"], "left_out", f"**Left out:** {refused}")
    gates = {}
    if gate_rules:
        for candidate in (c for c in candidates if c.name in model_uris):  # a candidate with no summary is not gated
            gates[candidate.name] = register_if_passing(
                model_uris[candidate.name], registered_name, run_id=run_ids[candidate.name], rules=gate_rules, alias=None
            )
    for name in not_compared:  # in the run's description after its gate's decision, which stays above "Show more"
        set_note_section(mlflow.MlflowClient(), run_ids[name], "comparison", f"**Not compared** with the study's other candidates: {refused}")
    columns = ["candidate", "category", *_CATEGORY_COLUMNS.values()]  # its columns even when no candidate wrote a summary
    by_category = pd.concat(categories, ignore_index=True)[columns] if categories else pd.DataFrame(columns=columns)
    return StudyResult(
        pd.DataFrame(rows), by_category, run_ids, comparison, gates, experiment_id,
        comparison_refused=refused, judge_failures={name: text for name, text in failures.items() if text},
        warnings={name: found for name, found in warnings.items() if found}, cut_off=cut_off,
    )


def _check_gate_rules(rules: Mapping[str, str]) -> None:
    """The gate's rules, read before any candidate runs: a malformed rule, or a metric no study run logs (a typo), is
    a ``ValueError`` now. The gate raised it after every candidate had been summarized, judged and logged, and the
    study's table and comparison were lost with it. The gate still checks each name against the run itself."""
    from ..summarization.gating import parse_rules, refuse_unknown_metrics
    from ..summarization.metrics import METRICS

    # judge/...: the judge's usage, which varies with the judge (batched calls, cost): the gate checks it on the run
    judged = [rule for rule in parse_rules(rules) if not rule.metric.startswith("judge/")]
    known = {*(spec.name for spec in METRICS.aggregates()), "generation_error_rate"}
    refuse_unknown_metrics(judged, known, "(docs/metrics.md lists every name); no candidate was run")


def study_experiment(name: str, artifact_location: str | Path | None = None) -> str:
    """The id of experiment ``name``, made if missing (its artifacts in ``artifact_location`` when given). The study
    names it on each run it starts and never makes it MLflow's current experiment: ``mlflow.set_experiment`` here
    left the caller's next runs (an ``evaluate_summaries`` after the study) in the study's experiment."""
    import mlflow
    from mlflow.exceptions import MlflowException

    found = mlflow.get_experiment_by_name(name)
    if found is None:
        location = Path(artifact_location).resolve().as_uri() if artifact_location is not None else None
        try:
            return mlflow.create_experiment(name, artifact_location=location)
        except MlflowException:  # made meanwhile by another process: theirs stands
            found = mlflow.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage != "active":
        raise ValueError(f"the study's experiment {name!r} is deleted: restore it, or give the study another experiment")
    return found.experiment_id


class GenerationError(RuntimeError):
    """A candidate's endpoint failed to summarize an article (its error, in words)."""


def _replay(articles: pd.DataFrame, generated: pd.DataFrame) -> Callable[..., str]:
    """The candidate as its evaluation's ``predict_fn``: the summary it wrote for an article, or its generation error
    raised, so that each article is a trace of the candidate's run and an article it failed on a failed row
    (``APPLICATION_ERROR`` cards, counted by ``judge_error_rate`` and by a gate against the candidate). Such articles
    were once left out of the run: a gate read a candidate that wrote nothing on half the articles by the other half."""
    written = {str(row_id): (text, summary, error) for row_id, text, summary, error in
               zip(articles["id"], articles["text"], generated["summary"], generated["error"], strict=True)}

    def candidate(text: str, id: object, **_: object) -> str:
        source, summary, error = written[str(id)]
        if source != text:  # never another article's summary
            raise KeyError(f"article {id!r} is not the text the candidate summarized")
        if error:
            raise GenerationError(error)
        return summary

    return candidate


def _model_name(candidate: str) -> str:
    """The candidate's logged model's name: its own, so the experiment's models page tells the candidates apart (every
    one was "summarizer"), less what MLflow refuses in a model's name (``gemini-2.5-flash`` -> ``gemini-2-5-flash``)."""
    return "".join("-" if char in "/:.%\"'" else char for char in candidate)


def _judges(judge: Judge | None, coverage: bool) -> list:
    """A candidate's judges (new objects for each evaluation, all on the one ``judge``): the claim check, the
    key-point check when ``coverage``, the model-free grounding check; that check alone without a judge."""
    from ..tracking import ClaimAlignment, Grounding, KeyPointCoverage

    if judge is None:
        return [Grounding()]
    return [ClaimAlignment(judge), *([KeyPointCoverage(judge)] if coverage else []), Grounding()]


# Per-category means of per-row values: the share aligned, the claims per summary, the grounding score.
_CATEGORY_COLUMNS = {"aligned": "alignment", "claim_count": "richness", "grounding": "grounding"}


def _per_category(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean of each per-row value by category, from the result's rows (each with its category; empty values, e.g.
    judge failures, left out; NaN where the run lacks the value, e.g. no judge)."""
    frame = pd.DataFrame({"category": rows["category"].to_numpy()})
    for column, name in _CATEGORY_COLUMNS.items():
        frame[name] = pd.to_numeric(rows[column], errors="coerce").to_numpy() if column in rows else math.nan
    return frame.fillna({"category": NO_CATEGORY}).groupby("category").mean()  # rows without one were left out


NO_CATEGORY = "(no category)"


UI_ADDRESS = "http://127.0.0.1:5000"  # where ``ui_command`` serves the MLflow UI


def ui_command(tracking_uri: str) -> str:
    return f"mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port 5000"


def run_url(experiment_id: str, run_id: str) -> str:
    """The run's page in the MLflow UI that ``ui_command`` starts."""
    return f"{UI_ADDRESS}/#/experiments/{experiment_id}/runs/{run_id}"


def local_store(folder: str | Path) -> str:
    """A SQLite tracking store (and registry) in ``folder``, with artifacts beside it; returns its URI."""
    import mlflow

    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return uri
