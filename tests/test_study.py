"""The study application: candidates -> summaries -> judged MLflow runs -> comparison -> gate; and `mgm demo`."""

from __future__ import annotations

import json
import re

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY, SHARED_DATA
from helpers import judge_for
from markdown_tables import markdown_table
from mlflow.entities import Feedback
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, Flaky, frame
from run_traces import cards_per_row

from mlflow_genai_metrics.study import (
    Candidate,
    comparison_lines,
    demo_articles,
    format_table,
    load_articles,
    run_study,
    stratified_sample,
)
from mlflow_genai_metrics.tracking import load_run

ROW_IDS = {row_id for row_id, _, _ in ARTICLES}


def test_run_study_logs_one_run_per_candidate_compares_and_gates(tmp_path, scripted_server, mlflow_store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    candidates = [Candidate("bad", "bad-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    judge = judge_for(server)
    result = run_study(frame().drop(columns=["summary"]), candidates, judge, gate_rules={"alignment": ">= 0.9"}, progress=False, artifact_location=tmp_path / "artifacts")
    table = result.table.set_index("candidate")
    assert table.loc["bad", "alignment [95% CI]"].startswith("0.500 [") and table.loc["good", "alignment [95% CI]"].startswith("1.000 [")
    assert table.loc["good", "generation errors"] == 0 and table.loc["good", "judge calls"] > 0
    assert set(result.by_category["category"]) == {"business", "sport", "tech"}
    assert result.comparison is not None and set(result.comparison["run_name"]) == {"bad", "good"}
    assert not result.gates["bad"].passed and result.gates["good"].passed
    markdown = format_table(result.table)
    rows = markdown_table(markdown, "candidate")  # as many cells in each row as headers
    assert list(rows[0])[:3] == ["candidate", "model", "alignment [95% CI]"] and [r["candidate"] for r in rows] == ["bad", "good"]
    # padded: every line has its column bars at the same places, so the columns line up as printed
    assert len({tuple(at for at, char in enumerate(line) if char == "|") for line in markdown.splitlines()}) == 1
    assert judge.usage.requests == sum(int(c) for c in table["judge calls"])  # the Judge passed in made every call
    # the runs' metrics in the order the Evaluation runs page shows their columns: the evaluation's headline first
    order = list(MlflowClient().get_run(result.run_ids["good"]).data.metrics)
    assert order[:2] == ["strict_alignment", "alignment"] and order.index("generation_error_rate") > order.index("judge/calls"), order[:6]


def test_every_study_run_has_one_trace_per_article_with_a_card_per_judge(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """The study's runs are mlflow.genai.evaluate runs: people can read and label each article's cards."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    candidates = [Candidate("bad", "bad-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), progress=False, artifact_location=tmp_path / "artifacts")
    for name, run_id in result.run_ids.items():
        assert cards_per_row(run_id) == {row_id: ["claim_alignment", "grounding", "key_point_coverage"] for row_id in ROW_IDS}, name
        assert MlflowClient().get_run(run_id).data.metrics["alignment_n"] == len(ARTICLES)
    grounding_only = run_study(frame().drop(columns=["summary"]), candidates[:1], None, coverage=False, progress=False, artifact_location=tmp_path / "artifacts")
    assert cards_per_row(grounding_only.run_ids["bad"]) == {row_id: ["grounding"] for row_id in ROW_IDS}


def test_the_study_reads_its_figures_from_the_evaluation_not_from_the_run_s_metrics(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """The run logs the headline figures; the table's other columns (defect: unverifiable, suspect verdicts, judge
    tokens) come from the evaluation's result, so they are there all the same."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    result = run_study(frame().drop(columns=["summary"]), [Candidate("good", "good-summarizer", server.base_url)], judge_for(server),
                       coverage=False, progress=False, artifact_location=tmp_path / "artifacts")
    logged = MlflowClient().get_run(result.run_ids["good"]).data.metrics
    assert "defect_rate/unverifiable" not in logged and "judge/prompt_tokens" not in logged
    row = result.table.iloc[0]
    assert row["defect: unverifiable"] == "0.000" and row["judge tokens"] > 0 and row["coverage"] == "n/a"


def test_the_study_shows_grounding_beside_the_judge_s_metrics_and_gates_on_it(tmp_path, scripted_server, mlflow_store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    candidates = [Candidate("bad", "bad-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    rules = {"alignment": ">= 0.9", "grounded_rate": ">= 0.9"}
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules=rules, progress=False, artifact_location=tmp_path / "artifacts")
    table = result.table.set_index("candidate")
    grounding = table["grounding [95% CI]"].map(lambda cell: float(cell.split()[0]))
    assert grounding["good"] > grounding["bad"] and table.loc["good", "grounded [95% CI]"].startswith("1.000 [")
    assert 0 <= float(table.loc["good", "suspect verdicts"]) <= 1
    header = list(markdown_table(format_table(result.table), "candidate")[0])
    assert header.index("coverage") < header.index("grounding [95% CI]") < header.index("defect: contradiction")
    by_category = result.by_category.set_index(["candidate", "category"])
    assert by_category["grounding"].notna().all() and by_category.loc[("good", "sport"), "grounding"] > by_category.loc[("bad", "sport"), "grounding"]
    lines = comparison_lines(result.comparison)
    assert any(line.startswith("good vs bad: grounding +") for line in lines)
    assert any(line.startswith("good vs bad: grounded_rate +") for line in lines)
    for name, gate in result.gates.items():
        outcome = next(o for o in gate.outcomes if o.rule.metric == "grounded_rate")
        assert outcome.actual == pytest.approx(load_run(result.run_ids[name]).metrics["grounded_rate"])
    assert [o.passed for o in result.gates["bad"].outcomes] == [False, False]  # 5 of 6 grounded: 0.833 < 0.9
    assert result.gates["good"].passed


def test_a_study_without_a_judge_gives_the_grounding_check_alone(tmp_path, scripted_server, mlflow_store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    candidates = [Candidate("bad", "bad-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, None, gate_rules={"grounded_rate": ">= 0.9"}, progress=False, artifact_location=tmp_path / "artifacts")
    assert not [r for r in server.requests if r.body["model"] == "scripted-judge"]  # no judge call
    assert all("judge:" not in load_run(run_id).signature for run_id in result.run_ids.values())
    table = result.table.set_index("candidate")
    assert table.loc["good", "alignment [95% CI]"] == "n/a" and table.loc["good", "judge calls"] == 0
    assert table.loc["good", "grounded [95% CI]"].startswith("1.000 [") and table.loc["bad", "grounded [95% CI]"].startswith("0.500 [")
    assert result.by_category["alignment"].isna().all() and result.by_category["grounding"].notna().all()
    assert any(line.startswith("good vs bad: grounded_rate +0.500") for line in comparison_lines(result.comparison))
    assert not result.gates["bad"].passed and result.gates["good"].passed


def printed_gates(out: str) -> dict[str, tuple[str, dict[str, tuple[str, str, float, str]]]]:
    """``mgm demo``'s gates as printed: candidate -> (the head line, {metric: (PASS/FAIL, op, threshold, actual)})."""
    gates = {}
    for block in re.finditer(r"^gate for (\S+): (.+)\n((?:  .+\n?)*)", out, re.MULTILINE):
        rules = {}
        for line in block.group(3).splitlines():
            rule = re.fullmatch(r"  (PASS|FAIL) (\S+) (>=|<=|>|<|==) ([0-9.e+-]+): actual (.+)", line)
            if rule:
                rules[rule.group(2)] = (rule.group(1), rule.group(3), float(rule.group(4)), rule.group(5))
        gates[block.group(1)] = (block.group(2), rules)
    return gates


def test_mgm_demo_prints_the_table_each_gate_s_rules_with_actual_and_required_values_and_the_run_urls(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """What the demo prints after the study (the study itself on the scripted endpoint instead of local models):
    a failed gate lists every rule with its actual value against the required one, not only 'nothing registered'."""
    from mlflow_genai_metrics.cli.local import DEMO_GATE, demo_report

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    candidates = [Candidate("bad", "bad-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules=DEMO_GATE, progress=False, artifact_location=tmp_path / "artifacts")
    out = demo_report(result, mlflow_store, local_judge=False, seconds=12)
    assert [row["candidate"] for row in markdown_table(out, "candidate")] == ["bad", "good"]
    gates = printed_gates(out)
    head, rules = gates["bad"]
    assert head == "gate failed: nothing registered" and set(rules) == set(DEMO_GATE)
    for outcome in result.gates["bad"].outcomes:
        verdict, op, threshold, actual = rules[outcome.rule.metric]
        assert (verdict == "PASS") == outcome.passed and f"{op} {threshold:g}" == DEMO_GATE[outcome.rule.metric]
        assert float(actual) == pytest.approx(outcome.actual, rel=1e-3)
    assert rules["grounded_rate_ci_low"][0] == "FAIL" and float(rules["grounded_rate_ci_low"][3]) < 0.5  # 5 of 6 grounded
    assert gates["good"][0] == "gate passed: registered version 1" and all(r[0] == "PASS" for r in gates["good"][1].values())
    for name, run_id in result.run_ids.items():
        assert f"\n  {name}: http://127.0.0.1:5000/#/experiments/{result.experiment_id}/runs/{run_id}" in out
    assert f"mlflow ui --backend-store-uri {mlflow_store}" in out and "NOTE:" not in out


def test_the_demo_articles_ship_with_the_package():
    articles = demo_articles()
    assert len(articles) == 8 and set(articles["category"]) == {"business", "entertainment", "politics", "sport", "tech"}
    loaded = load_articles()
    assert loaded["reference"].str.len().gt(50).all()


def test_stratified_sample_keeps_category_shares_and_drops_duplicates():
    rows = [{"id": f"a{i}", "category": "a", "text": f"text {i}"} for i in range(60)]
    rows += [{"id": f"b{i}", "category": "b", "text": f"other {i}"} for i in range(40)]
    rows += [{"id": "dup", "category": "a", "text": "text  1"}]  # same text but for spacing
    sample = stratified_sample(pd.DataFrame(rows), 10)
    assert len(sample) == 10 and sample["category"].value_counts().to_dict() == {"a": 6, "b": 4}
    assert "dup" not in set(stratified_sample(pd.DataFrame(rows), 1000)["id"])


def test_the_bbc_file_loads_as_is_with_its_reference_sentences():
    path = SHARED_DATA / "bbc_news_summary.jsonl"
    if not path.exists():
        pytest.skip(f"the BBC data is not at {path} (../shared/data beside the project)")
    articles = load_articles(path)
    sample = stratified_sample(articles, 50)
    assert len(sample) == 50 and set(sample["category"]) == {"business", "entertainment", "politics", "sport", "tech"}
    first = json.loads(path.open().readline())
    assert articles.loc[0, "reference"] == " ".join(first["reference_summary_sentences"])


@pytest.mark.local_model
@pytest.mark.timeout(900)  # two local models on two cores; minutes, not seconds
def test_mgm_demo_runs_the_whole_loop_on_local_models_and_prints_the_table(tmp_path, capsys):
    from mlflow_genai_metrics.cli import main as mgm
    from mlflow_genai_metrics.cli.local import DEMO_GATE

    assert mgm(["demo", "--limit", "1", "--max-tokens", "60", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    rows = {row["candidate"]: row for row in markdown_table(out, "candidate")}  # every row has a cell per header
    assert {name: row["model"] for name, row in rows.items()} == {"gemma3-270m": "gemma3-270m", "smollm2-135m": "smollm2-135m"}
    assert "gate for gemma3-270m:" in out and "NOTE: the judge here is SmolLM2-135M" in out
    header = list(rows["gemma3-270m"])
    assert header[header.index("grounding [95% CI]"):][:3] == ["grounding [95% CI]", "grounded [95% CI]", "suspect verdicts"]
    # a value, never n/a (one article: the bootstrap has no interval to give)
    assert re.fullmatch(r"\d\.\d{3}( \[\d\.\d{3}, \d\.\d{3}\])?", rows["gemma3-270m"]["grounding [95% CI]"])
    assert re.search(r"^  gemma3-270m: http://127\.0\.0\.1:5000/#/experiments/\d+/runs/[0-9a-f]{32}$", out, re.MULTILINE)
    assert "by category (alignment, richness, grounding):" in out
    # evaluated, or missing with the reason (one article: no interval from one row), never silently
    assert re.search(r"^  (PASS|FAIL) grounded_rate_ci_low >= 0\.5: actual (\d|missing \(no interval: grounded_rate stands on 1 row,)", out, re.MULTILINE)
    assert f"mlflow ui --backend-store-uri sqlite:///{tmp_path / 'store' / 'mlflow.db'}" in out
    assert {name: set(rules) for name, (_, rules) in printed_gates(out).items()} == {name: set(DEMO_GATE) for name in rows}
    first_article = load_articles()["id"].iloc[0]
    for run_id in re.findall(r"^  \S+: http://127\.0\.0\.1:5000/#/experiments/\d+/runs/([0-9a-f]{32})$", out, re.MULTILINE):
        assert cards_per_row(run_id) == {first_article: ["claim_alignment", "grounding", "key_point_coverage"]}


def test_a_candidate_whose_every_generation_failed_is_a_failed_run_and_the_study_goes_on(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """No summary to judge is said on that candidate's run (FAILED, mgm.error) and in the study's failures; the
    other candidates are still judged and gated, and the failed one is neither compared nor gated."""
    from mlflow_genai_metrics.testing import Fault

    class Refusing(Endpoint):  # the broken summarizer's every request is refused
        def __call__(self, request):
            return Fault.http(400, "this prompt was refused") if request.body.get("model") == "broken-summarizer" else super().__call__(request)

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Refusing(), models=(*Endpoint.models, "broken-summarizer"))
    candidates = [Candidate("broken", "broken-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules={"alignment": ">= 0.9"}, progress=False, artifact_location=tmp_path / "artifacts")
    broken = MlflowClient().get_run(result.run_ids["broken"])
    assert broken.info.status == "FAILED" and broken.data.tags["mgm.error"].startswith("no summary to judge: every generation failed")
    assert result.judge_failures["broken"].startswith("no summary to judge") and set(result.gates) == {"good"} and result.gates["good"].passed
    table = result.table.set_index("candidate")
    assert table.loc["broken", "generation errors"] == len(ARTICLES) and table.loc["broken", "alignment [95% CI]"] == "n/a"
    assert table.loc["good", "alignment [95% CI]"].startswith("1.000 [") and result.comparison is None


def test_a_study_refuses_candidates_it_could_mix_up_or_cannot_run_before_any_run(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """Two candidates under one name were gated (and registered) on the second's run; a candidate its endpoint does
    not serve stopped the study with the judge's advice after the first had run."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    articles = frame().drop(columns=["summary"])
    twins = [Candidate("same", "good-summarizer", server.base_url), Candidate("same", "bad-summarizer", server.base_url)]
    with pytest.raises(ValueError, match=r"candidate names must differ: \['same'\] repeat"):
        run_study(articles, twins, None, progress=False, artifact_location=tmp_path / "artifacts")
    unserved = [Candidate("good", "good-summarizer", server.base_url), Candidate("b", "no-such-model", server.base_url)]
    with pytest.raises(ValueError, match=r"the candidate's endpoint .* does not serve it \(it serves bad-summarizer, good-summarizer, "
                                         r"scripted-judge\); check candidate 'b''s model and base_url"):
        run_study(articles, unserved, None, progress=False, artifact_location=tmp_path / "artifacts")
    assert server.request_count == 0 and MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()]) == []
    with pytest.raises(ValueError, match=r"candidate 'c': max_tokens is a whole number above 0, not 0"):
        Candidate("c", "good-summarizer", max_tokens=0)


def test_rows_without_a_category_stay_in_the_per_category_table():
    """They were left out of it (pandas' groupby drops a missing key), unsaid."""
    from mlflow_genai_metrics.study.run import NO_CATEGORY, _per_category

    rows = pd.DataFrame({"category": ["sport", None, float("nan"), "sport"], "aligned": [1.0, 0.0, 1.0, 0.0],
                         "claim_count": [2, 3, 4, 5], "grounding": [0.5, 0.7, 0.9, 0.1]})
    table = _per_category(rows)
    assert set(table.index) == {"sport", NO_CATEGORY} and table.loc[NO_CATEGORY].notna().any()


def test_a_candidate_failing_on_some_articles_has_those_rows_failed_in_its_run_and_the_gate_counts_them(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """A candidate whose endpoint refused most articles was judged (and gated, and registered at alignment 1.0)
    on the others: its generation errors were left out of its run (and MLflow stops an evaluation whose first row's
    ``predict_fn`` raises: the study hands it an answered article first). They are failed rows of it now, each with an
    APPLICATION_ERROR card naming the error, counted in judge_error_rate and against the candidate by the gate."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Flaky(), models=Flaky.models)  # refused on 4 of the 6 articles
    candidates = [Candidate("flaky", "flaky-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules={"alignment": ">= 0.9"},
                       progress=False, artifact_location=tmp_path / "artifacts")
    table = result.table.set_index("candidate")
    assert table.loc["flaky", "generation errors"] == 4
    run = MlflowClient().get_run(result.run_ids["flaky"])
    assert run.data.metrics["judge_error_rate"] == run.data.metrics["generation_error_rate"] == pytest.approx(4 / 6)
    assert cards_per_row(result.run_ids["flaky"]) == {row_id: ["claim_alignment", "grounding", "key_point_coverage"] for row_id in ROW_IDS}
    traces = mlflow.search_traces(locations=[result.experiment_id], run_id=result.run_ids["flaky"], return_type="list")
    cards = [[a for a in t.info.assessments if isinstance(a, Feedback)] for t in traces]
    failed = [found for found in cards if any(card.error is not None for card in found)]
    assert len(failed) == 4
    for found in failed:  # every card of a failed article names its generation error
        assert all(card.error.error_code == "APPLICATION_ERROR" and "GenerationError" in card.error.error_message
                   and "this prompt was refused" in card.error.error_message for card in found)
    assert not result.gates["flaky"].passed and result.gates["good"].passed
    assert result.judge_failures["flaky"] == "4 of 6 rows (no summary written 4)"
