"""What a person reads in the MLflow UI about a study with a candidate that failed on some articles: the numbers its
run and its per-row table hold, and the plots (a bar or point without an interval has no whisker, and says so)."""

from __future__ import annotations

import math

import mlflow
import numpy as np
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import Flaky, frame

from mlflow_genai_metrics import plots
from mlflow_genai_metrics.study import Candidate, run_study


def test_an_article_the_candidate_wrote_nothing_for_has_no_rouge_and_the_runs_rouge_stands_on_what_it_wrote(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """The flaky run's failed rows read rougeL 0, bleu 0 and summary_words 0 in ``mgm_rows.json`` beside their
    error, and its ``rougeL`` (0.246, n 6) stood on them while its judge figures (n 2) left them out: a candidate
    writing the good summaries on the articles it answered looked three times worse than the good one on ROUGE. Its
    gate's reason said those rows were ones "the judge could not read for what the run wrote": it wrote nothing."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Flaky(), models=Flaky.models)
    candidates = [Candidate("flaky", "flaky-summarizer", server.base_url), Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules={"alignment": ">= 0.9"},
                       progress=False, artifact_location=tmp_path / "artifacts")
    client = MlflowClient()
    flaky, good = (client.get_run(result.run_ids[name]) for name in ("flaky", "good"))
    rows = {name: client.load_table(result.experiment_id, "mgm_rows.json", run_ids=[result.run_ids[name]]).set_index("id") for name in ("flaky", "good")}
    failed = rows["flaky"][rows["flaky"]["error"] != ""]
    assert len(failed) == 4 and failed["error"].str.contains("this prompt was refused").all()
    for column in ("rouge1", "rougeL", "bleu", "chrf", "summary_words", "compression_ratio"):
        assert failed[column].isna().all(), (column, failed[column].tolist())
    written = rows["flaky"].index[rows["flaky"]["error"] == ""]
    assert sorted(written) == ["biz/2", "tec/2"]
    # the same summaries as the good candidate's on those articles: the same ROUGE, on the rows it stands on
    assert rows["flaky"].loc[written, "rougeL"].tolist() == rows["good"].loc[written, "rougeL"].tolist()
    assert flaky.data.metrics["rougeL_n"] == flaky.data.metrics["alignment_n"] == 2 and good.data.metrics["rougeL_n"] == 6
    assert math.isclose(flaky.data.metrics["rougeL"], rows["good"].loc[written, "rougeL"].mean())
    # corpus BLEU over the written rows only: the empty hypotheses' brevity penalty no longer counts
    report = mlflow.artifacts.load_dict(f"{flaky.info.artifact_uri}/mgm/report.json")
    assert report["metrics"]["bleu"] > rows["flaky"].loc[written, "bleu"].min()
    # the gate's reason on the run's page: rows with nothing written, not rows "the judge could not read for what the
    # run wrote" (it wrote nothing)
    said = client.get_run(result.run_ids["flaky"]).data.tags["mlflow.note.content"]
    assert "FAIL `alignment >= 0.9`: actual 0.333333 (4 row(s) with no output (the application failed on them) counted as failures; logged 1 without them)" in said, said



def test_a_candidate_judged_on_under_half_the_articles_is_left_out_of_the_comparison_not_every_other_candidate(tmp_path, scripted_server, mlflow_store, monkeypatch):
    """The flaky candidate (4 of 6 articles refused) made the study's comparison refuse every run: good against bad
    was never compared, no comparison run was logged, and nothing in MLflow said why. Now good and bad are compared
    (the comparison run names what was left out and why) and the flaky run says it was not compared, and why."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Flaky(), models=Flaky.models)
    candidates = [Candidate(name, f"{name}-summarizer", server.base_url) for name in ("flaky", "good", "bad")]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules={"alignment": ">= 0.9"},
                       progress=False, artifact_location=tmp_path / "artifacts")
    assert result.comparison is not None and set(result.comparison["run_name"]) == {"good", "bad"}
    assert result.comparison_refused.startswith("flaky (judged on 2 of 6 articles) against the others: too few articles judged on both sides")
    client = MlflowClient()
    compared = client.get_run(result.comparison.attrs["comparison_run_id"])
    assert compared.data.tags["mgm.compared_runs"] == f"{result.run_ids['good']},{result.run_ids['bad']}"
    assert compared.data.tags["mgm.left_out"].startswith("flaky (judged on 2 of 6 articles)")
    assert client.get_run(result.run_ids["flaky"]).data.tags["mgm.comparison"].startswith("not compared: flaky (judged on 2 of 6 articles)")
    assert all("mgm.comparison" not in client.get_run(result.run_ids[name]).data.tags for name in ("good", "bad"))
    # each candidate's logged model carries the candidate's name on the experiment's models page (all were "summarizer")
    assert [mlflow.get_logged_model(client.get_run(result.run_ids[name]).inputs.model_inputs[0].model_id).name
            for name in ("flaky", "good", "bad")] == ["flaky", "good", "bad"]
    # and in the descriptions, the first thing each run's page shows (a tag there is cut at one line)
    assert "**Left out:** flaky (judged on 2 of 6 articles) against the others" in compared.data.tags["mlflow.note.content"]
    flaky_page = client.get_run(result.run_ids["flaky"]).data.tags["mlflow.note.content"]
    assert "**Not compared** with the study's other candidates: flaky (judged on 2 of 6 articles)" in flaky_page
    assert flaky_page.index("Registry gate") < flaky_page.index("Not compared")  # the decision first, above "Show more"


def whiskers(figure) -> list[list[list[float]]]:
    """Every error bar segment drawn on the figure's axes (a zero-width interval is a segment of length 0)."""
    return [np.round(segment, 6).tolist() for container in figure.axes[0].containers if hasattr(container, "lines")
            for collection in container.lines[2] for segment in collection.get_segments() if len(segment)]


def test_a_figure_without_an_interval_draws_no_whisker_and_says_no_interval_with_its_n():
    """A bar with no interval (coverage on 2 rows) got caps at its value, a zero-width interval, under the words
    "no interval"; the alignment-against-richness point got the same caps on richness and no word at all."""
    metrics = {"alignment": 1.0, "alignment_ci_low": 0.158, "alignment_ci_high": 1.0, "alignment_n": 2.0,
               "coverage": 0.5, "coverage_n": 2.0, "richness": 1.0, "richness_n": 2.0}
    bars = plots.metric_bars({"flaky": metrics})
    drawn = whiskers(bars)
    assert drawn == [[[0.0, 0.158], [0.0, 1.0]]], drawn  # alignment's interval, and nothing at coverage
    assert [t.get_text() for t in bars.axes[0].texts] == ["no interval\nn=2"]
    point = plots.alignment_vs_richness({"flaky": metrics})
    segments = whiskers(point)
    assert segments == [[[1.0, 0.158], [1.0, 1.0]]], segments  # alignment's whisker, none on richness
    assert [t.get_text() for t in point.axes[0].texts] == ["flaky (richness: no interval, n=2)"]


def test_a_candidate_name_mlflow_refuses_in_a_model_name_still_names_its_model():
    from mlflow_genai_metrics.study.run import _model_name

    assert _model_name("gemini-2.5-flash") == "gemini-2-5-flash" and _model_name("gemma2:2b") == "gemma2-2b"
