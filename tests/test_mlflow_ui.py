"""The MLflow UI, seen: a real `mlflow ui` on 127.0.0.1 rendered by headless Chromium shows our runs."""

from __future__ import annotations

import html
import json
import re

import mlflow
from browser import chromium_path, interact, render
from helpers import judge_for
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence, frame, summary_for

from mlflow_genai_metrics import evaluate_summaries, judge_summaries
from mlflow_genai_metrics.tracking import ClaimAlignment, log_result, summarization_metrics

TABLES = ("mgm_rows.json", "mgm_claims.json", "mgm_key_points.json")
PLOTS = ("mgm_plot_metrics.png", "mgm_plot_verdicts.png")
# Opening a trace's feedback card: close the assistant panel (for room), open the assessments pane, expand the card.
OPEN_CARD = ['[data-component-id="mlflow.assistant.chat_panel.close"]',
             '[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]',
             '[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]']


def page_text(dom: str) -> str:
    """A page's text: its DOM without the tags, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", dom))


def card_shows(value: str) -> str:
    """A page condition: a feedback value tag in the trace drawer (not the traces table behind it) reads ``value``."""
    tags = "document.querySelectorAll('[role=dialog] [data-component-id=\"shared.model-trace-explorer.assesment-value-tag\"]')"
    return f"[...{tags}].some(tag => tag.innerText.trim() === {value!r})"


def drawer_says(text: str) -> str:
    """A page condition: the trace drawer's text includes ``text``."""
    return f"[...document.querySelectorAll('[role=dialog]')].some(drawer => drawer.innerText.includes({text!r}))"


def test_the_run_page_lists_the_alignment_metric_and_shows_its_tables_and_plots(scripted_server, mlflow_ui, ui_store, tmp_path):
    assert chromium_path() is not None, "Chromium is missing: ./run installs it (apt-get install chromium)"
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with mlflow.start_run(run_name="ui-check") as run:
        mlflow.models.evaluate(data=frame(), predictions="summary", targets="reference",
                               extra_metrics=summarization_metrics(judge_for(server), source_col="text", id_col="id"))
    experiment_id = run.info.experiment_id
    overview = render(mlflow_ui.run_url(experiment_id, run.info.run_id), screenshot=tmp_path / "run.png")
    assert "ui-check" in overview
    for metric in ("alignment", "alignment_ci_low", "defect_rate/contradiction", "richness", "judge/calls"):
        assert metric in overview, metric
    assert "mgm.signature" in overview
    table = render(mlflow_ui.run_url(experiment_id, run.info.run_id, "artifacts/mgm_rows.json"))
    assert "mgm_rows.json" in table and "biz/1" in table and "claim_count" in table
    assert "View as table" in table  # offered for tables logged with mlflow.log_table
    plot = render(mlflow_ui.run_url(experiment_id, run.info.run_id, "artifacts/mgm_plot_metrics.png"))
    assert '<img alt="mgm_plot_metrics.png" src="blob:' in plot
    assert (tmp_path / "run.png").stat().st_size > 10_000


def test_the_compare_view_shows_two_runs_tables_and_plots_side_by_side(scripted_server, mlflow_ui, ui_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = frame()
    run_ids = []
    for model in ("good-summarizer", "bad-summarizer"):
        summaries = [summary_for(model, article) for article in data["text"]]
        result = judge_summaries(data["text"], summaries, judge=judge_for(server), ids=data["id"])
        with mlflow.start_run(run_name=model) as run:
            log_result(result)
        run_ids.append(run.info.run_id)
    url = mlflow_ui.compare_url(run.info.experiment_id, run_ids)
    listed = render(url)
    # Picking a table shows each run's copy of it: the good run's claim beside the bad run's contradiction.
    interact(url, click=['[artifact-name="mgm_claims.json"]'],
             wait_for=[f"document.body.innerText.includes({claim!r})" for claim in ("approved the budget", "rejected the budget")])
    interact(url, click=['[artifact-name="mgm_plot_metrics.png"]'],
             wait_for=["document.querySelectorAll('img[alt=\"mgm_plot_metrics.png\"][src^=\"blob:\"]').length == 2"])
    assert "No common artifacts to display" not in listed
    for artifact in TABLES + PLOTS:
        assert f'artifact-name="{artifact}"' in listed, artifact


def judged_traces(server, first_summary: str) -> dict:
    """The ClaimAlignment-judged traces of ARTICLES by row id, biz/1 summarized as ``first_summary``, the rest by
    their first sentence."""
    data = [{"inputs": {"text": text, "id": row_id}, "outputs": first_summary if row_id == "biz/1" else first_sentence(text)}
            for row_id, _, text in ARTICLES]
    evaluation = evaluate_summaries(data, [ClaimAlignment(judge_for(server))])
    traces = mlflow.search_traces(run_id=evaluation.run_id, return_type="list")
    return {json.loads(t.info.request_metadata["mlflow.traceInputs"])["id"]: t.info for t in traces}


def test_a_rows_claim_alignment_card_shows_yes_or_no_the_judge_model_and_the_claims(scripted_server, mlflow_ui, ui_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    rejected = "The council rejected the budget."
    traces = judged_traces(server, rejected)
    contradicted = mlflow_ui.trace_url(traces["biz/1"].experiment_id, traces["biz/1"].trace_id)
    interact(contradicted, click=OPEN_CARD, wait_for=[card_shows("No"), drawer_says("scripted-judge"), drawer_says(f"contradicted: {rejected}")])
    supported = mlflow_ui.trace_url(traces["spo/1"].experiment_id, traces["spo/1"].trace_id)
    interact(supported, click=OPEN_CARD, wait_for=[card_shows("Yes"), drawer_says("scripted-judge")])


def test_a_card_for_an_unverifiable_claim_says_no_in_the_ui(scripted_server, mlflow_ui, ui_store, tmp_path):
    # An invented sentence is a claim the source neither supports nor contradicts (the scripted judge says idk to a
    # claim whose words are not in the article): the faithful card is No.
    server = scripted_server(Endpoint(), models=Endpoint.models)
    invented = "The budget was written by a committee of robots."
    traces = judged_traces(server, invented)
    url = mlflow_ui.trace_url(traces["biz/1"].experiment_id, traces["biz/1"].trace_id)
    interact(url, click=OPEN_CARD, wait_for=[card_shows("No"), drawer_says("1 unverifiable claim"), drawer_says(f"unverifiable: {invented}")],
             screenshot=tmp_path / "unverifiable-card.png")


def test_a_rag_applications_trace_shows_its_faithfulness_card_with_the_passage_and_quote(scripted_server, mlflow_ui, ui_store, tmp_path):
    # issue 28: a RAG application's trace (RETRIEVER and LLM spans) judged with no reshaping, its card in the real UI
    from rag_helpers import INVENTED, TOPICS, RagEndpoint, rag_app

    from mlflow_genai_metrics.tracking import answer_scorers

    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    with mlflow.start_run() as run:
        mlflow.genai.evaluate(data=[{"inputs": {"question": TOPICS["prize"][0], "id": "prize"}}],
                              predict_fn=rag_app(server, "inventing-writer"),
                              scorers=answer_scorers(judge_for(server), relevance=False, sufficiency=False))
    trace = mlflow.search_traces(run_id=run.info.run_id, return_type="list")[0]
    url = mlflow_ui.trace_url(trace.info.experiment_id, trace.info.trace_id)
    interact(url, click=OPEN_CARD, wait_for=[card_shows("No"), drawer_says("1 unverifiable claim (the passages do not support it)"),
                                             drawer_says(f"unverifiable: {INVENTED}"), drawer_says("(passage 1: “Tomas Reyes won the Coastal Book Prize")],
             screenshot=tmp_path / "rag-card.png")


def test_the_one_call_judges_card_sits_beside_ours_with_its_numbered_claims(scripted_server, mlflow_ui, ui_store, tmp_path, monkeypatch):
    # issue 29: MLflow's own make_judge variant (tracking.make_claim_judge) in the real UI, its card beside ours
    from conftest import SECRET_KEY
    from test_mlflow_judges import CONTRADICTED, records, row_id, run_traces

    from mlflow_genai_metrics.tracking import make_claim_judge

    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # MLflow's judges send it: the key the Judge was given (judge_for)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[ClaimAlignment(judge), make_claim_judge(judge)])
    trace = next(t for t in run_traces(result.run_id) if row_id(t) == "biz/1")
    url = mlflow_ui.trace_url(trace.info.experiment_id, trace.info.trace_id)
    # Both cards, each expanded once (whichever comes first): its rationale is the numbered claims, shown as a list.
    toggles = f"document.querySelectorAll({OPEN_CARD[2]!r})"
    expand_both = f"window.mgmExpanded ||= ({toggles}.length >= 2 && ([...{toggles}].forEach(toggle => toggle.click()), true))"
    interact(url, click=OPEN_CARD[:2], wait_for=[expand_both, drawer_says("claim_alignment_one_call"), drawer_says("claim_alignment\n"),
                                                 card_shows("No"), drawer_says(f"{CONTRADICTED} - no: rule for claim 1"),
                                                 drawer_says(f"contradicted: {CONTRADICTED}"), drawer_says("openai:/scripted-judge")],
             screenshot=tmp_path / "one-call-card.png")
    assert (tmp_path / "one-call-card.png").stat().st_size > 10_000


def test_a_failed_gate_is_visible_on_the_candidate_s_run_page(scripted_server, mlflow_ui, ui_store, tmp_path):
    from mlflow_genai_metrics import SummarizerModel, register_if_passing
    from mlflow_genai_metrics.testing import SummarizationJudgeScript

    server = scripted_server(SummarizationJudgeScript(verdicts={f"The council rejected budget {i}.": "no" for i in range(6)}))
    articles = [f"Article {i}. The council approved budget {i}." for i in range(6)]
    run_ids = {}
    for name, summaries in (("champion", [f"The council approved budget {i}." for i in range(6)]),
                            ("candidate", [f"The council rejected budget {i}." for i in range(6)])):
        with mlflow.start_run(run_name=name) as run:
            uri = SummarizerModel(name, "http://127.0.0.1:9/v1", input_col="text").log(name="summarizer").model_uri
            log_result(judge_summaries(articles, summaries, judge=judge_for(server), ids=[f"a{i}" for i in range(6)],
                                       coverage=False, grounding=False), log_metrics=True)
        run_ids[name] = run.info.run_id
        if name == "champion":
            assert register_if_passing(uri, "ui-summarizer", run_id=run.info.run_id, rules={"richness": ">= 0"}).passed
    gate = register_if_passing(uri, "ui-summarizer", run_id=run_ids["candidate"], rules={"richness": ">= 0"}, beat_champion=True,
                               beat_metric="defect_rate/contradiction")
    assert not gate.passed

    experiment_id = mlflow.get_run(run_ids["candidate"]).info.experiment_id
    overview = render(mlflow_ui.run_url(experiment_id, run_ids["candidate"]), screenshot=tmp_path / "failed-gate.png", height=1600)
    assert "mgm.gate.decision" in overview and "failed (1 of 3 rules) for ui-summarizer" in overview
    assert "Registry gate (ui-summarizer): failed 1 of 3 rules, nothing registered" in overview  # the description
    table = render(mlflow_ui.run_url(experiment_id, run_ids["candidate"], "artifacts/mgm_gate_decisions.json"),
                   screenshot=tmp_path / "failed-gate-table.png")
    assert "mgm_gate_decisions.json" in table and "View as table" in table and "p_holm" in table
    assert "defect_rate/contradiction vs champion" in table and "exact McNemar" in table and "failed: nothing registered" in table


def header_texts(dom: str) -> list[str]:
    """The text of each column header of a page's table (``role="columnheader"``), in the order the page shows them."""
    from html.parser import HTMLParser

    void = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    class Headers(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[str] = []
            self.depth = 0

        def handle_starttag(self, tag, attrs):
            if self.depth:
                self.depth += tag not in void
            elif dict(attrs).get("role") == "columnheader":
                self.depth = 1
                self.found.append("")

        def handle_endtag(self, tag):
            if self.depth and tag not in void:
                self.depth -= 1

        def handle_data(self, data):
            if self.depth:
                self.found[-1] += data

    parser = Headers()
    parser.feed(dom)
    return [text.strip() for text in parser.found]



def test_a_labelling_sample_s_review_queue_and_people_s_figures_are_seen_in_the_ui(scripted_server, mlflow_ui, ui_store, tmp_path):
    """Issue 48: the drawn sample's review queue on the experiment's Review queue page (its name, its traces, the
    card's question), then, labelled, people's estimate on the run page, and two runs' difference on the comparison."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    from mlflow_genai_metrics.testing import SummarizationJudgeScript
    from mlflow_genai_metrics.tracking import compare_runs, label_sample, people_estimate

    server = scripted_server(SummarizationJudgeScript())
    person = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann@example.com")
    run_ids, samples = [], []
    for run in range(2):
        rows = [{"inputs": {"text": f"Article {k}. The club {k} won on Saturday.", "id": f"u{k}"},
                 "outputs": f"The club {k} won." + (f" The striker {k} scored." if (k + run) % 3 == 0 else "")} for k in range(8)]
        with mlflow.start_run(run_name=f"labelled-{run}") as started:
            evaluate_summaries(rows, [ClaimAlignment(judge_for(server))])
        run_ids.append(started.info.run_id)
        samples.append(label_sample(started.info.run_id, 5, seed=1))
    experiment_id = mlflow.get_run(run_ids[0]).info.experiment_id
    name = f"mgm sample of run {run_ids[0]}"
    queue = render(f"{mlflow_ui.url}/#/experiments/{experiment_id}/review-queue?selectedQueueId={samples[0].queue}",
                   screenshot=tmp_path / "review-queue.png")
    assert name in queue and f"mgm sample of run {run_ids[1]}" in queue and "Needs review (5)" in queue
    shown = page_text(queue)  # the queue's table: the 5 drawn rows of the first run, no other
    drawn = {int(row_id[1:]) for row_id in samples[0].row_ids}
    assert [k for k in range(8) if f"Article {k}. The club {k} won" in shown] == sorted(drawn)
    reports = []
    for run_id, sample in zip(run_ids, samples):
        for k, trace_id in enumerate(sample.trace_ids):
            mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="yes" if k % 2 == 0 else "no", source=person)
        reports.append(people_estimate(run_id))
    run_page = render(mlflow_ui.run_url(experiment_id, run_ids[1]), screenshot=tmp_path / "people-run.png")
    sentence = reports[1].sentence
    assert f"{sentence[:1].upper()}{sentence[1:]}" in page_text(run_page)  # the run's description says it, first on the page
    assert "people/strict_alignment_ci_low" in run_page
    table = compare_runs(run_ids, log=True)
    comparison = render(mlflow_ui.run_url(experiment_id, table.attrs["comparison_run_id"]), screenshot=tmp_path / "people-difference.png",
                        height=1400)
    difference = MlflowClient().get_run(table.attrs["comparison_run_id"]).data.tags["mgm.people_difference.1"]
    assert difference in page_text(comparison)  # in full, in the run's description (the tag's value is cut short on the page)
