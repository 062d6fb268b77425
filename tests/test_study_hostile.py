"""A hostile look at the study (``run_study``, its table and gate, ``mgm demo``'s report, ``reproduce_study.py``):
input that once cost every candidate's run, or the whole result, and was said late or not at all."""

from __future__ import annotations

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, frame
from run_traces import cards_per_row

from mlflow_genai_metrics.study import Candidate, run_study

ROW_IDS = {row_id for row_id, _, _ in ARTICLES}
CARDS = ["claim_alignment", "grounding", "key_point_coverage"]


def study(tmp_path, server, articles, names=("good",), **options):
    candidates = [Candidate(name, f"{name}-summarizer", server.base_url) for name in names]
    return run_study(articles, candidates, judge_for(server), progress=False, artifact_location=tmp_path / "artifacts", **options)


def every_run() -> list:
    client = MlflowClient()
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.parametrize(("ids", "said"), [
    ([1, "1", "biz/9", "spo/1", "tec/1", "tec/2"], r"row 1 \(id '1'\): the id repeats row 0 \(id 1\)"),
    (["a", "b", "a", "c", "d", "e"], r"row 2 \(id 'a'\): the id repeats row 0"),
    (["a", None, "b", "c", "d", "e"], r"no id in column 'id' on row\(s\) 1"),
])
def test_repeated_or_missing_ids_are_refused_before_any_candidate_writes_or_any_run_starts(tmp_path, scripted_server, mlflow_store, monkeypatch, ids, said):
    """They were refused once the first candidate had summarized every article (paid for) and its run had started,
    which was left FAILED with no reason on it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(ValueError, match=said):
        study(tmp_path, server, frame().drop(columns=["summary"]).assign(id=ids), names=("good", "bad"))
    assert server.request_count == 0 and every_run() == []


@pytest.mark.parametrize(("rules", "said"), [
    ({"alignmnet": ">= 0.5"}, r"unknown metric\(s\) in the gate's rules: 'alignmnet' \(closest: alignment"),
    ({"alignment": "=> 0.5"}, r"malformed rule for 'alignment': '=> 0.5'"),
])
def test_a_gate_rule_with_a_typo_is_refused_before_any_run(tmp_path, scripted_server, mlflow_store, monkeypatch, rules, said):
    """The gate raised it after every candidate had been summarized, judged and logged: the table and the comparison
    were lost with it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(ValueError, match=said):
        study(tmp_path, server, frame().drop(columns=["summary"]), names=("good", "bad"), gate_rules=rules)
    assert server.request_count == 0 and every_run() == []


def test_gate_rules_on_the_study_s_own_figures_and_the_judge_s_usage_are_read_from_the_run(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """The names the early check lets through are the run's: ``generation_error_rate`` (the study's own metric),
    ``judge/calls`` (usage), an interval bound."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Endpoint(), models=Endpoint.models)
    rules = {"generation_error_rate": "<= 0", "judge/calls": ">= 1", "alignment_ci_low": ">= 0.5"}
    result = study(tmp_path, server, frame().drop(columns=["summary"]), gate_rules=rules, coverage=False)
    outcomes = {o.rule.metric: (o.passed, o.actual) for o in result.gates["good"].outcomes}
    assert outcomes["generation_error_rate"] == (True, 0.0) and outcomes["judge/calls"][0] and outcomes["alignment_ci_low"][0]


def test_a_reference_column_with_gaps_leaves_out_the_reference_metrics_not_the_run(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """One article without a reference summary (a NaN in the column) lost the whole run: MLflow logged no row
    ("MLflow's result_df lists 0", RunRowsMismatch) and the study stopped; a None one, "The `value` field must be
    specified". Now the run has every row, and ROUGE, which needs every row's reference, is n/a."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Endpoint(), models=Endpoint.models)
    articles = frame().drop(columns=["summary"])
    articles.loc[1, "reference"] = float("nan")
    articles.loc[4, "reference"] = None
    result = study(tmp_path, server, articles, names=("bad", "good"))
    table = result.table.set_index("candidate")
    assert table.loc["good", "alignment [95% CI]"].startswith("1.000 [") and table.loc["bad", "alignment [95% CI]"].startswith("0.500 [")
    assert (table["rougeL"] == "n/a").all() and (table["judge errors"] == "0.000").all()
    for run_id in result.run_ids.values():
        assert cards_per_row(run_id) == {row_id: CARDS for row_id in ROW_IDS}
        assert MlflowClient().get_run(run_id).info.status == "FINISHED"
    assert result.comparison is not None


def test_a_study_whose_every_candidate_wrote_nothing_prints_and_writes_its_table(tmp_path, scripted_server, mlflow_store, monkeypatch, capsys):
    """``reproduce_study.py`` stopped on a ``KeyError`` ('candidate') after the study, so the table saying why (every
    generation failed) was neither printed nor written: the per-category table had no column when no candidate had
    a summary judged. ``mgm demo`` printed pandas' "Empty DataFrame" there."""
    import importlib.util
    import sys

    from mlflow_genai_metrics.cli.local import demo_report
    from mlflow_genai_metrics.testing import Fault

    class Refusing(Endpoint):
        models = (*Endpoint.models, "broken-summarizer")

        def __call__(self, request):
            return Fault.http(400, "this prompt was refused") if request.body.get("model") == "broken-summarizer" else super().__call__(request)

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Refusing(), models=Refusing.models)
    result = study(tmp_path, server, frame().drop(columns=["summary"]), names=("broken",))
    assert list(result.by_category.columns) == ["candidate", "category", "alignment", "richness", "grounding"] and result.by_category.empty
    out = demo_report(result, mlflow_store, local_judge=False, seconds=1)
    assert "by category (alignment, richness, grounding):\n  none: no candidate wrote a summary to judge\n" in out and "Empty DataFrame" not in out
    data, written = tmp_path / "articles.jsonl", tmp_path / "study.md"
    frame().drop(columns=["summary"]).to_json(data, orient="records", lines=True)
    spec = importlib.util.spec_from_file_location("reproduce_study", "examples/reproduce_study.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setattr(sys, "argv", ["reproduce_study.py", "--data", str(data), "--candidate", f"broken=broken-summarizer@{server.base_url}",
                                      "--judge-model", "scripted-judge", "--judge-base-url", server.base_url,
                                      "--store", str(tmp_path / "study"), "--out", str(written)])
    try:
        assert example.main() == 0
    finally:  # the example points MLflow at its own store
        mlflow.set_tracking_uri(mlflow_store)
        mlflow.set_registry_uri(mlflow_store)
    text = written.read_text()
    assert "| broken    | broken-summarizer | n/a " in text and "broken: no summary to judge: every generation failed" in text
    assert "\n| broken    | broken-summarizer | n/a " in capsys.readouterr().out


def test_summaries_cut_off_at_max_tokens_are_judged_as_written_and_said(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """A candidate cut off by its ``max_tokens`` on 2 of 6 articles was judged on the half sentences, with nothing
    anywhere saying so: no column, no line, no tag ("generation errors 0")."""
    from mlflow_genai_metrics.cli.local import demo_report
    from mlflow_genai_metrics.testing import Reply

    class Short(Endpoint):  # writes the good summary, cut short on the sport articles
        models = (*Endpoint.models, "short-summarizer")

        def __call__(self, request):
            if request.body.get("model") == "short-summarizer":
                if "Everton" in request.last_user_message or "striker" in request.last_user_message:
                    return Reply("The club", finish_reason="length")
                request.body["model"] = "good-summarizer"
            return super().__call__(request)

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MGM_CACHE_DIR", str(tmp_path / "cache"))
    server = scripted_server(Short(), models=Short.models)
    result = study(tmp_path, server, frame().drop(columns=["summary"]), names=("short", "good"), coverage=False)
    said = "2 of 6 summaries cut off at max_tokens 512 (judged as written: raise the candidate's max_tokens for whole summaries)"
    assert result.cut_off == {"short": said}
    table = result.table.set_index("candidate")
    assert table.loc["short", "generation errors"] == 0 and table.loc["short", "judge errors"] == "0.000"  # judged, as written
    tags = {name: MlflowClient().get_run(run_id).data.tags for name, run_id in result.run_ids.items()}
    assert tags["short"]["mgm.generation.cut_off"] == said and "mgm.generation.cut_off" not in tags["good"]
    out = demo_report(result, mlflow_store, local_judge=False, seconds=1)
    assert f"\nshort: {said}\n" in out and "good: 2 of" not in out


def test_stratified_sample_draws_rows_without_a_category_and_sorts_ids_of_mixed_kinds():
    """Rows without a category were never drawn (a third of these ten could not be in any sample), and ids of mixed
    kinds (1 and "s2") stopped the sample on a ``TypeError``."""
    import pandas as pd

    from mlflow_genai_metrics.study import stratified_sample

    rows = pd.DataFrame([{"id": f"x{i}", "category": [None, float("nan"), " "][i] if i < 3 else "a", "text": f"text {i}"} for i in range(10)])
    sample = stratified_sample(rows, 5)
    assert len(sample) == 5 and sample["category"].eq("a").sum() == 3  # 3 of 10 without one: 2 of the 5 (rounded)
    assert list(sample["id"]) == sorted(sample["id"])
    mixed = pd.DataFrame([{"id": i if i % 2 else f"s{i}", "category": "a" if i < 6 else "b", "text": f"text {i}"} for i in range(10)])
    drawn = stratified_sample(mixed, 4)
    assert len(drawn) == 4 and drawn["category"].value_counts().to_dict() == {"a": 2, "b": 2}
    assert list(drawn["id"].astype(str)) == sorted(drawn["id"].astype(str))


def test_load_articles_reads_a_file_where_some_rows_lack_the_reference_sentences(tmp_path):
    """A row without ``reference_summary_sentences`` stopped the loading on "TypeError: can only join an iterable";
    it takes its ``reference_summary`` now, else has no reference (the run leaves ROUGE out: the test above)."""
    import json

    import pandas as pd

    from mlflow_genai_metrics.study import load_articles

    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [
        {"id": "1", "category": "a", "text": "One.", "reference_summary_sentences": ["First.", "Second."], "reference_summary": "x"},
        {"id": "2", "category": "a", "text": "Two.", "reference_summary": "Its own."},
        {"id": "3", "category": "a", "text": "Three."},
    ]))
    references = load_articles(path)["reference"].tolist()
    assert references[:2] == ["First. Second.", "Its own."] and pd.isna(references[2])
