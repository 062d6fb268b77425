"""The MLflow-native judges (ClaimAlignment, KeyPointCoverage, Grounding) on a real SQLite store and the scripted
judge: one feedback per judge per row, run results whatever judges are chosen, no judge call among the run's
traces, expectations, evaluation datasets, and a wrong judge failing before the first row."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY, copy_mlflow_database
from helpers import judge_for
from mlflow.entities import AssessmentSourceType
from mlflow.genai.scorers import Scorer, scorer
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics import JudgeConfigError, evaluate_summaries, judge_summaries
from mlflow_genai_metrics.summarization.passes import extract_claims_request
from mlflow_genai_metrics.testing import Reply, ScriptedJudgeServer
from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, JudgeSpec, KeyPointCoverage, log_results
from mlflow_genai_metrics.tracking.compare import run_figures
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch

JUDGES = ("claim_alignment", "key_point_coverage", "grounding")
CONTRADICTED = "The council rejected the budget."


def records(*, contradicted: bool = False, references: bool = False) -> list[dict[str, Any]]:
    """The six articles as ``mlflow.genai.evaluate`` data (biz/1 contradicted on request)."""
    rows = []
    for row_id, category, text in ARTICLES:
        summary = CONTRADICTED if contradicted and row_id == "biz/1" else first_sentence(text)
        row = {"inputs": {"text": text, "id": row_id, "category": category}, "outputs": summary}
        if references:
            row["expectations"] = {"expected_response": first_sentence(text) + " " + text.split(". ")[1]}
        rows.append(row)
    return rows


def failing_on(*words: str) -> Endpoint:
    """The scripted endpoint, answering garbage to the claims request of each summary containing one of ``words``."""
    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: (
        Reply("garbage") if kind == "claims" and any(w in request.messages[0]["content"] for w in words) else None
    )
    return endpoint


def run_traces(run_id: str) -> list:
    mlflow.flush_trace_async_logging()  # a trace exported late (as the judge's own calls were) counts too
    return mlflow.search_traces(run_id=run_id, return_type="list")


def row_id(trace) -> str | None:
    """The evaluated row a trace is of (None for any other trace)."""
    inputs = next(span.inputs for span in trace.data.spans if span.parent_id is None)
    return inputs.get("id") if isinstance(inputs, dict) else None


def feedback(trace, name: str) -> list:
    return [a for a in trace.info.assessments if a.name == name and getattr(a, "feedback", None) is not None]


@dataclass(frozen=True)
class Evaluated:
    """One plain ``mlflow.genai.evaluate`` with the three judges (biz/1 contradicted, biz/2's claims failing), then
    ``log_results`` with them: the cards, MLflow's aggregates and the full report."""

    traces: dict[str, Any]  # row id -> trace
    trace_count: int  # every trace of the run
    metrics: dict[str, float]  # the run metrics: MLflow's aggregates, then the headline figures log_results adds
    plain_metrics: dict[str, float]  # the run metrics plain mlflow.genai.evaluate logged
    figures: dict[str, float]  # every figure (the run's report over its run metrics)
    tags: dict[str, str]
    chat_requests: int  # asked by the scorers (log_results asks again: this judge has no cache)
    span_types: list[str]  # of every span MLflow made during the evaluation, whether or not it was kept


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, migrated_mlflow_database) -> Evaluated:
    folder = tmp_path_factory.mktemp("judges-store")
    with pytest.MonkeyPatch.context() as patch, ScriptedJudgeServer(failing_on("Shares"), models=Endpoint.models) as server:
        patch.setenv("MGM_CACHE_DIR", str(folder / "cache"))
        mlflow.set_tracking_uri(copy_mlflow_database(migrated_mlflow_database, folder / "mlflow.db"))
        try:
            mlflow.set_experiment(experiment_id=mlflow.create_experiment("judges", artifact_location=(folder / "a").as_uri()))
            judge = judge_for(server)
            spans: list[str] = []
            with mlflow.tracing.configure(span_processors=[lambda span: spans.append(span.span_type)]):
                scorers = [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()]
                result = mlflow.genai.evaluate(data=records(contradicted=True, references=True), scorers=scorers)
                traces = run_traces(result.run_id)
            asked, plain = server.request_count, MlflowClient().get_run(result.run_id).data.metrics
            log_results(result.run_id, scorers)
            by_id = {row_id(t): t for t in traces if row_id(t) is not None}
            run = MlflowClient().get_run(result.run_id)
            return Evaluated(by_id, len(traces), run.data.metrics, plain, run_figures(run), run.data.tags, asked, spans)
        finally:
            mlflow.set_tracking_uri("")


def test_each_row_has_exactly_one_feedback_per_judge(evaluated):
    assert sorted(evaluated.traces) == sorted(i for i, _, _ in ARTICLES)
    for trace in evaluated.traces.values():
        names = sorted(a.name for a in trace.info.assessments if getattr(a, "feedback", None) is not None)
        assert names == sorted(JUDGES)


def test_claim_alignment_is_yes_or_no_from_the_judge_model(evaluated):
    values = {row_id: feedback(t, "claim_alignment")[0] for row_id, t in evaluated.traces.items() if row_id != "biz/2"}
    assert {row_id: f.value for row_id, f in values.items()} == {"biz/1": "no", **{i: "yes" for i in values if i != "biz/1"}}
    for item in values.values():
        assert item.source.source_type == AssessmentSourceType.LLM_JUDGE and item.source.source_id == "openai:/scripted-judge"


def test_the_rationale_is_markdown_with_contradicted_claims_first(evaluated):
    rationale = feedback(evaluated.traces["biz/1"], "claim_alignment")[0].rationale
    head, blank, first, *_ = rationale.splitlines()
    assert head == "**No**: 1 contradicted claim (the source says otherwise); 0 of 1 claim supported." and blank == ""
    assert first.startswith("- **contradicted**") and CONTRADICTED.rstrip(".") in first


def test_claim_alignment_metadata_carries_the_counts(evaluated):
    metadata = feedback(evaluated.traces["biz/1"], "claim_alignment")[0].metadata
    assert {k: metadata[k] for k in ("claims", "supported", "contradicted", "unverifiable", "support_rate", "strictly_aligned")} == {
        "claims": "1", "supported": "0", "contradicted": "1", "unverifiable": "0", "support_rate": "0", "strictly_aligned": "false",
    }
    assert metadata["row_id"] == "biz/1" and "suspect_verdicts" in metadata


def test_key_point_coverage_is_the_share_with_missed_and_covered_points_listed(evaluated):
    item = feedback(evaluated.traces["tec/1"], "key_point_coverage")[0]
    assert item.value == 0.333 and item.source.source_id == "openai:/scripted-judge"  # 3 significant digits on a card
    assert item.rationale.startswith("**1 of 3 key points covered.**")
    assert "Missed:\n- It has a larger screen." in item.rationale and "Covered:\n- A new phone was released in Paris." in item.rationale


def test_grounding_is_the_model_free_score_from_code(evaluated):
    item = feedback(evaluated.traces["tec/1"], "grounding")[0]
    assert 0 <= item.value <= 1 and item.source.source_type == AssessmentSourceType.CODE
    assert item.source.source_id.startswith("grounding:") and item.rationale.startswith("grounding ")
    # the label says where it holds (issue 47): the card names the data the score was calibrated on
    assert item.metadata["calibrated_on"].startswith("FRANK (valid), SummEdits (evaluation), ")
    assert "*Calibrated on FRANK (valid)" in item.rationale and "not a probability that holds on data unlike these" in item.rationale


def test_the_run_names_the_data_its_grounding_was_calibrated_on(evaluated):
    assert evaluated.tags["mgm.grounding.calibrated_on"].startswith("FRANK (valid), SummEdits (evaluation), 2,617 BBC summaries")


def test_a_row_the_judge_failed_on_has_an_error_card_and_no_value(evaluated):
    trace = evaluated.traces["biz/2"]
    (item,) = feedback(trace, "claim_alignment")
    assert item.value is None and "claim extraction failed" in item.error.error_message
    assert item.source.source_type == AssessmentSourceType.LLM_JUDGE
    assert item.metadata["row_id"] == "biz/2"  # an error card names its row, as a card with a value does
    # each card asks its own passes: the key points were checked, and the model-free check needs no judge
    assert feedback(trace, "key_point_coverage")[0].value is not None and feedback(trace, "grounding")[0].value is not None


def test_plain_evaluate_logs_mlflow_s_aggregates_and_log_results_the_full_report(evaluated):
    assert set(evaluated.plain_metrics) == {"claim_alignment/mean", "key_point_coverage/mean", "grounding/mean"}
    assert evaluated.plain_metrics["claim_alignment/mean"] == pytest.approx(4 / 5)  # MLflow's mean of the yes/no cards
    metrics = evaluated.metrics
    for name in ("alignment", "alignment_ci_low", "alignment_ci_high", "alignment_n", "defect_rate/contradiction", "richness",
                 "coverage", "coverage_n", "grounding", "grounded_rate", "judge_error_rate", "judge/calls"):
        assert name in metrics, name
    assert metrics["alignment"] == pytest.approx(4 / 5) and metrics["judge_error_rate"] == pytest.approx(1 / 6)


def test_the_scorers_ask_no_request_twice(evaluated):
    data = records(contradicted=True)
    with ScriptedJudgeServer(failing_on("Shares"), models=Endpoint.models) as server:
        judge_summaries([r["inputs"]["text"] for r in data], [r["outputs"] for r in data], judge=judge_for(server))
        # What judging the rows once costs, and biz/2's coverage, which judge_summaries skips once its claims failed
        assert evaluated.chat_requests == server.request_count + 1


def test_the_runs_traces_are_exactly_the_evaluated_rows(evaluated):
    assert evaluated.trace_count == len(evaluated.traces) == len(ARTICLES)
    for trace in evaluated.traces.values():
        assert "mlflow.eval.requestId" in trace.info.tags  # each one an evaluated row


def test_the_judge_s_own_calls_make_no_span(evaluated):
    assert evaluated.chat_requests > len(ARTICLES) and evaluated.span_types  # the judge was asked; MLflow traced
    assert "CHAT_MODEL" not in evaluated.span_types


def test_expectations_give_rouge_bleu_and_chrf(evaluated):
    assert "rougeL" in evaluated.metrics  # the headline one is a run metric; the others are in the run's report
    assert {"rouge1", "rougeL", "bleu", "chrf"} <= set(evaluated.figures)
    assert 0 < evaluated.figures["rouge1"] < 1


def test_a_scorer_calling_chat_completions_makes_a_span_and_the_judge_makes_none(scripted_server, mlflow_store):
    """The control for the two tests above: MLflow traces a chat completion made from a scorer (it turns on OpenAI
    autologging for the evaluation), so those tests can fail; the judge posts its calls as raw bodies
    (``client.post``), which autologging does not trace, even when a scorer asks it directly."""
    import openai

    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    prompt = extract_claims_request("The council approved the budget.").messages[0].model_dump()

    @scorer
    def asks_directly(outputs) -> bool:
        return bool(client.chat.completions.create(model="scripted-judge", messages=[prompt]).choices)

    @scorer
    def asks_the_judge(outputs) -> bool:
        return judge.ask(extract_claims_request(outputs)).ok

    spans: list[str] = []
    with mlflow.tracing.configure(span_processors=[lambda span: spans.append(span.span_type)]):
        mlflow.genai.evaluate(data=records()[:2], scorers=[asks_directly])
    assert spans.count("CHAT_MODEL") == server.request_count == 2
    spans.clear()
    with mlflow.tracing.configure(span_processors=[lambda span: spans.append(span.span_type)]):
        mlflow.genai.evaluate(data=records()[:2], scorers=[asks_the_judge])
    assert server.request_count == 4 and spans and "CHAT_MODEL" not in spans


def test_a_subset_of_the_judges_still_logs_the_run_results(scripted_server, mlflow_store, tmp_path):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    scorers = [ClaimAlignment(judge_for(server, cache_dir=tmp_path / "cache"))]
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=scorers)
    log_results(result.run_id, scorers)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["alignment"] == pytest.approx(5 / 6) and metrics["alignment_n"] == 6
    assert "coverage" not in metrics and [name for name in metrics if name.endswith("/mean")] == ["claim_alignment/mean"]
    # claims and verdicts, once: log_results reads what the scorer asked from the judge's cache
    assert server.count(purpose="ExtractedKeyPoints") == 0 and server.request_count == 2 * len(ARTICLES)
    report = json.loads(mlflow.artifacts.load_text(f"runs:/{result.run_id}/mgm/report.json"))
    assert report["rows"] == len(ARTICLES)


def test_a_run_whose_every_row_failed_gets_its_full_report_from_log_results(scripted_server, mlflow_store):
    server = scripted_server(failing_on(""), models=Endpoint.models)
    scorers = [ClaimAlignment(judge_for(server)), Grounding()]
    result = mlflow.genai.evaluate(data=records(), scorers=scorers)
    assert "claim_alignment/mean" not in MlflowClient().get_run(result.run_id).data.metrics  # no card had a value
    log_results(result.run_id, scorers)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["judge_error_rate"] == 1.0 and metrics["alignment_n"] == 0 and metrics["grounding_n"] == len(ARTICLES)


def _summarizer_failing_on(failing_id: str):
    """A ``predict_fn`` summarizing each article by its first sentence, raising on one."""
    def summarize(text: str, id: str, category: str) -> str:
        if id == failing_id:
            raise RuntimeError("the summarizer timed out")
        return first_sentence(text)

    return summarize


def test_a_row_the_application_raised_on_is_an_error_of_every_card_and_the_report_never_an_empty_summary(scripted_server, mlflow_store):
    """``predict_fn`` raising on a row once gave it the cards of an empty summary ("no claim", coverage 0) and the
    report counted it against alignment and coverage. Every card is an error naming what the application raised, the
    judge is not asked, and the row is a failed row: in ``judge_error_rate``, in no other figure, and a content
    failure of the candidate for a decision."""
    from mlflow_genai_metrics.summarization.unreadable import content_failed

    server = scripted_server(Endpoint(), models=Endpoint.models)
    scorers = [ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server)), Grounding()]
    data = [{"inputs": r["inputs"]} for r in records()]
    result = mlflow.genai.evaluate(data=data, predict_fn=_summarizer_failing_on("tec/1"), scorers=scorers)
    failed = next(t for t in run_traces(result.run_id) if row_id(t) == "tec/1")
    for name in ("claim_alignment", "key_point_coverage", "grounding"):
        (card,) = feedback(failed, name)
        assert card.value is None and card.error.error_code == "APPLICATION_ERROR", name
        assert "RuntimeError: the summarizer timed out" in card.error.error_message, name
    tec = next(text for i, _, text in ARTICLES if i == "tec/1")
    assert not any(json.dumps(tec)[1:-1] in json.dumps(r.body) for r in server.requests)  # nothing asked of the judge for it
    logged = log_results(result.run_id, scorers)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["alignment"] == 1.0 and metrics["alignment_n"] == len(ARTICLES) - 1 and metrics["coverage_n"] == len(ARTICLES) - 1
    assert metrics["judge_error_rate"] == pytest.approx(1 / len(ARTICLES)) and metrics["grounding_n"] == len(ARTICLES) - 1
    rows = logged.rows.set_index("id")
    assert rows.loc["tec/1", "error"].startswith("the application failed: application: RuntimeError: the summarizer timed out")
    assert content_failed(logged.rows).sum() == 1  # a gate's threshold rule counts it as a failure of the candidate
    one_door = evaluate_summaries(data, [ClaimAlignment(judge_for(server)), Grounding()], predict_fn=_summarizer_failing_on("biz/2"))
    assert one_door.result.metrics["judge_error_rate"] == pytest.approx(1 / len(ARTICLES)) and one_door.result.metrics["alignment_n"] == len(ARTICLES) - 1


def test_two_rows_with_the_same_texts_under_two_ids_are_paid_for_once_in_the_run_s_spend(scripted_server, mlflow_store):
    """The evaluation judges one source and summary once whatever the ids; each row counted the calls again: 12 HTTP
    calls logged as judge/calls 16 (the cache off). The second row's share is answered with no call, as from a cache."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    data = records()[:3]
    data.append({**data[0], "inputs": {**data[0]["inputs"], "id": "copy"}})
    scorers = [ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server))]
    one_door = evaluate_summaries(data, scorers)
    metrics = MlflowClient().get_run(one_door.run_id).data.metrics
    assert metrics["judge/calls"] == server.request_count and len(one_door.result.rows) == 4
    sent = server.request_count
    plain = mlflow.genai.evaluate(data=data, scorers=scorers)
    log_results(plain.run_id, scorers)
    assert MlflowClient().get_run(plain.run_id).data.metrics["judge/calls"] == server.request_count - sent


def test_log_results_reads_the_scorers_answers_from_the_judge_s_cache(scripted_server, mlflow_store, tmp_path):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    claims = ClaimAlignment(judge_for(server, cache_dir=tmp_path / "cache"))
    result = mlflow.genai.evaluate(data=records(), scorers=[claims])
    calls = server.request_count
    logged = log_results(result.run_id, judges=[claims])  # the same requests: answered by the cache, no call
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["alignment"] == logged.metrics["alignment"] == 1.0 and len(logged.rows) == len(ARTICLES)
    assert server.request_count == calls


def test_log_results_refuses_another_judge_than_the_one_whose_cards_the_run_holds(scripted_server, mlflow_store):
    """A run evaluated with one judge model and reported with another was logged as the second's: its signature, its
    figures and its spend beside the first's cards. Refused before a call; people's labels under the judge's name are
    no judge's cards."""
    from mlflow_genai_metrics import Judge

    server = scripted_server(Endpoint(), models=Endpoint.models)
    result = mlflow.genai.evaluate(data=records(), scorers=[ClaimAlignment(judge_for(server)), Grounding()])
    trace_id = mlflow.search_traces(run_id=result.run_id, return_type="list")[0].info.trace_id
    mlflow.log_feedback(trace_id=trace_id, name="claim_alignment", value="no",
                        source=mlflow.entities.AssessmentSource(source_type="HUMAN", source_id="alice"))
    calls = server.request_count
    other = ClaimAlignment(Judge("good-summarizer", server.base_url, SECRET_KEY, cache_dir=None, backoff_initial_s=0.01, backoff_max_s=0.05))
    with pytest.raises(ValueError, match="claim_alignment by 'openai:/scripted-judge', not 'openai:/good-summarizer'"):
        log_results(result.run_id, judges=[other, Grounding()])
    run = MlflowClient().get_run(result.run_id)
    assert server.request_count == calls and "alignment" not in run.data.metrics
    assert "other judges than the ones given to log_results" in run.data.tags["mgm.error"]
    logged = log_results(result.run_id, judges=[ClaimAlignment(judge_for(server)), Grounding()])  # the evaluation's judge
    assert logged.metrics["alignment"] == 1.0 and "mgm.error" not in MlflowClient().get_run(result.run_id).data.tags


def test_the_rows_usage_columns_add_up_to_the_run_s_spend_on_the_plain_route(scripted_server, mlflow_store, tmp_path):
    """The rows table of a plain run held what log_results itself asked (with the cache on, 0 calls a row) beside the
    run's judge/calls, which adds the cards' spend: each row now carries its own cards' calls and tokens."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    scorers = [ClaimAlignment(judge_for(server, cache_dir=tmp_path / "cache")), KeyPointCoverage(judge_for(server, cache_dir=tmp_path / "cache"))]
    result = mlflow.genai.evaluate(data=records(), scorers=scorers)
    logged = log_results(result.run_id, scorers)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    rows = pd.read_parquet(mlflow.artifacts.download_artifacts(run_id=result.run_id, artifact_path="mgm/rows.parquet"))
    assert metrics["judge/calls"] == server.request_count > 0
    assert rows["judge_calls"].sum() == logged.rows["judge_calls"].sum() == server.request_count
    assert rows["judge_prompt_tokens"].sum() == logged.metrics["judge/prompt_tokens"] and (rows["judge_calls"] > 0).all()


def test_log_results_judges_a_run_s_traces_again_in_another_process(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)

    @scorer
    def has_summary(outputs) -> bool:
        return bool(outputs)

    result = mlflow.genai.evaluate(data=records(), scorers=[has_summary])  # not one of ours: no run results
    logged = log_results(result.run_id, judges=[ClaimAlignment(judge_for(server))])
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["alignment"] == logged.metrics["alignment"] == 1.0 and logged.rows["id"].tolist() == sorted(i for i, _, _ in ARTICLES)


def test_log_results_refuses_a_run_whose_traces_were_partly_lost(scripted_server, mlflow_store, monkeypatch):
    """Completing a run from its traces logs the rows MLflow evaluated or nothing: 5 of its 30 traces gone give an
    error on the run (``mgm.error``), never ``alignment_n`` 25."""
    server = scripted_server(Endpoint(), models=Endpoint.models)

    @scorer
    def has_summary(outputs) -> bool:
        return bool(outputs)

    data = [{"inputs": {"text": text, "id": f"{row_id}-{copy}"}, "outputs": first_sentence(text)}
            for copy in range(10) for row_id, _, text in ARTICLES][:30]
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")  # every trace stored: the test removes 5 itself
    result = mlflow.genai.evaluate(data=data, scorers=[has_summary])
    client = MlflowClient()
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(run_id=result.run_id, return_type="list")
    assert len(traces) == 30
    client.delete_traces(client.get_run(result.run_id).info.experiment_id, trace_ids=[t.info.trace_id for t in traces[:5]])
    with pytest.raises(RunRowsMismatch, match="evaluated 30 rows, 25 of their traces"):
        log_results(result.run_id, judges=[ClaimAlignment(judge_for(server))])
    run = client.get_run(result.run_id)
    assert "alignment_n" not in run.data.metrics and "evaluated 30 rows" in run.data.tags["mgm.error"]
    assert server.request_count == 0  # refused before any row was judged


def test_log_results_says_a_run_whose_traces_were_all_lost_lost_them(scripted_server, mlflow_store, monkeypatch):
    """MLflow can lose every trace of a run (its SQLite pool spent): that run lost its rows, said as for some lost
    (``RunRowsMismatch`` and ``mgm.error``), not "no trace to judge" as for a run that was never one of this task."""
    server = scripted_server(Endpoint(), models=Endpoint.models)

    @scorer
    def has_summary(outputs) -> bool:
        return bool(outputs)

    data = [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")
    client = MlflowClient()
    for given in (None, data):
        result = mlflow.genai.evaluate(data=data, scorers=[has_summary])
        mlflow.flush_trace_async_logging()
        traces = mlflow.search_traces(run_id=result.run_id, return_type="list")
        assert len(traces) == len(data)  # every trace stored: the test removes them all itself
        client.delete_traces(client.get_run(result.run_id).info.experiment_id, trace_ids=[t.info.trace_id for t in traces])
        lost = f" (not stored: ids {', '.join(str(i) for i, _, _ in ARTICLES)})" if given else ""
        with pytest.raises(RunRowsMismatch, match=re.escape(f"evaluated {len(data)} rows, 0 of their traces can be read back{lost}")):
            log_results(result.run_id, judges=[ClaimAlignment(judge_for(server))], data=given)
        assert f"evaluated {len(data)} rows" in client.get_run(result.run_id).data.tags["mgm.error"]
    with mlflow.start_run() as plain:  # no evaluation at all: nothing was lost, there is nothing to judge
        pass
    for given in (None, []):
        with pytest.raises(ValueError, match=re.escape(f"run {plain.info.run_id} has no trace with a source and a summary to judge (0 traces")):
            log_results(plain.info.run_id, judges=[ClaimAlignment(judge_for(server))], data=given)
    assert server.request_count == 0


def test_log_results_reads_the_rows_mlflow_evaluated_wherever_the_run_is(mlflow_store, monkeypatch):
    """A trace the application made in the run before the evaluation (a smoke call) was counted as a row: "evaluated
    6 rows, 7 of their traces" for a run whose every row and card was stored. A run of another experiment than the one
    set now was MLflow's raw "not in the list of locations". A refusal's mgm.error stayed beside the figures a correct
    call logged after it. With data= of as many rows but other ids, the run's rows were taken for them."""
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")

    @mlflow.trace
    def application(text: str) -> str:
        return first_sentence(text)

    with mlflow.start_run() as run:
        application(ARTICLES[0][2])  # the smoke call
        mlflow.genai.evaluate(data=records(), scorers=[Grounding()])
    mlflow.set_experiment("elsewhere")  # a later script, another experiment
    others = [{**row, "inputs": {**row["inputs"], "id": f"zz/{number}"}} for number, row in enumerate(records())]
    with pytest.raises(RunRowsMismatch, match=r"not stored: ids zz/0, zz/1"):
        log_results(run.info.run_id, [Grounding()], data=others)
    assert "mgm.error" in MlflowClient().get_run(run.info.run_id).data.tags
    result = log_results(run.info.run_id, [Grounding()], data=records())
    logged = MlflowClient().get_run(run.info.run_id).data
    assert len(result.rows) == len(ARTICLES) and logged.metrics["grounding_n"] == len(ARTICLES)
    assert "mgm.error" not in logged.tags  # the refusal before is mended, not left beside the figures


def test_cards_and_figures_that_count_a_row_differently_are_named(scripted_server, mlflow_store, monkeypatch):
    """A row whose coverage pass failed in the evaluation has a valid "no" claim card, and the report leaves the row
    out of strict_alignment (a failed row is in no figure): MLflow's claim_alignment/mean 0.6 beside strict_alignment
    0.75, no word. Configuration errors on the cards (a model deployed afterwards) were not named either."""
    endpoint = Endpoint()
    endpoint.judge.fault = lambda request, kind: (Reply("garbage") if kind in ("keypoints", "coverage") and "Acme" in
                                                  request.messages[0]["content"] else None)
    server = scripted_server(endpoint, models=Endpoint.models)
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", "2")
    judge = judge_for(server)
    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[ClaimAlignment(judge), KeyPointCoverage(judge)])
    log_results(result.run_id, [ClaimAlignment(judge), KeyPointCoverage(judge)])
    said = MlflowClient().get_run(result.run_id).data.tags.get("mgm.warning.cards_differ", "")
    assert "whose card has a value failed in log_results' judging" in said, said


def test_log_results_refuses_a_run_that_holds_results(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    result = mlflow.genai.evaluate(data=records(), scorers=[Grounding()])
    log_results(result.run_id, [Grounding()])
    with pytest.raises(ValueError, match="holds the results of an evaluation already"):
        log_results(result.run_id, judges=[ClaimAlignment(judge_for(server))])
    assert server.request_count == 0


def test_evaluate_summaries_judges_each_row_once_and_logs_the_results_once(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    evaluation = evaluate_summaries(records(contradicted=True), judges=[ClaimAlignment(judge), KeyPointCoverage(judge)])
    assert server.request_count == 4 * len(ARTICLES)  # claims, verdicts, key points, coverage: once per row
    metrics = MlflowClient().get_run(evaluation.run_id).data.metrics
    assert metrics["alignment"] == evaluation.metrics["alignment"] == pytest.approx(5 / 6)
    assert "coverage" in metrics and not [name for name in metrics if "/" in name and name.split("/")[0] in JUDGES]
    traces = run_traces(evaluation.run_id)
    assert len(traces) == len(ARTICLES)
    assert all(sorted(a.name for a in t.info.assessments if getattr(a, "feedback", None)) == ["claim_alignment", "key_point_coverage"] for t in traces)


def test_evaluate_summaries_refuses_judges_with_different_settings(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(ValueError, match="must share one judge's settings"):
        evaluate_summaries(records(), judges=[ClaimAlignment(judge_for(server)), KeyPointCoverage(judge_for(server, temperature=0.5))])
    assert server.request_count == 0


def test_an_mlflow_evaluation_dataset_works_as_data(scripted_server, mlflow_store):
    from mlflow.genai.datasets import create_dataset

    server = scripted_server(Endpoint(), models=Endpoint.models)
    dataset = create_dataset(name="bbc-six")
    dataset.merge_records(records(references=True))
    evaluation = evaluate_summaries(dataset, judges=[ClaimAlignment(judge_for(server))])
    assert evaluation.metrics["alignment"] == 1.0 and "rouge1" in evaluation.metrics
    assert len(evaluation.result.rows) == len(ARTICLES)


def test_a_wrong_model_name_fails_before_the_first_row(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    from mlflow_genai_metrics import Judge

    wrong = Judge("scripted-judg", server.base_url, SECRET_KEY, cache_dir=None)
    started = time.monotonic()
    with pytest.raises(JudgeConfigError, match="does not serve model 'scripted-judg'"):
        evaluate_summaries(records(), judges=[ClaimAlignment(wrong), Grounding()])
    assert time.monotonic() - started < 10
    assert server.request_count == 0 and mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.parametrize("fault", ["refused key", "unreachable endpoint"])
def test_a_refused_key_or_an_unreachable_endpoint_fails_before_the_first_row(scripted_server, mlflow_store, fault):
    from mlflow_genai_metrics import Judge

    server = scripted_server(Endpoint(), models=Endpoint.models, api_key=SECRET_KEY)
    url = server.base_url
    if fault == "unreachable endpoint":
        server.stop()
    judge = Judge("scripted-judge", url, "sk-wrong-key-0000000000000000" if fault == "refused key" else SECRET_KEY, cache_dir=None)
    started = time.monotonic()
    with pytest.raises(JudgeConfigError):
        evaluate_summaries(records(), judges=[ClaimAlignment(judge)])
    assert time.monotonic() - started < 10
    assert server.request_count == 0 and mlflow.search_runs(search_all_experiments=True).empty


def test_the_judges_first_call_fails_every_row_at_once_on_a_wrong_model(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    from mlflow_genai_metrics import Judge

    judge = Judge("scripted-judg", server.base_url, SECRET_KEY, cache_dir=None)
    result = mlflow.genai.evaluate(data=records(), scorers=[ClaimAlignment(judge)])
    errors = [f.error for t in run_traces(result.run_id) for f in feedback(t, "claim_alignment")]
    assert len(errors) == len(ARTICLES) and all("does not serve model 'scripted-judg'" in e.error_message for e in errors)
    assert server.request_count == 0 and server.model_listings == 1  # one preflight, then no call per row


def test_a_judge_serialises_its_settings_but_never_the_key(scripted_server):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    dumped = ClaimAlignment(judge_for(server, seed=7)).model_dump()
    assert dumped["name"] == "claim_alignment" and dumped["description"] and dumped["call_source"]
    assert "'model': 'scripted-judge'" in dumped["call_signature"] and "'seed': 7" in dumped["call_signature"]
    assert "'prompts': {" in dumped["call_signature"] and SECRET_KEY not in json.dumps(dumped)


def test_the_registrable_form_rebuilds_the_same_judge(scripted_server, monkeypatch):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")  # MLflow runs a loaded @scorer's source only then
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # the rebuilt judge reads the key where it runs
    original = ClaimAlignment(judge_for(server))
    loaded = Scorer.model_validate(original.model_dump())
    row = records(contradicted=True)[0]
    assert loaded.name == "claim_alignment"
    assert loaded(inputs=row["inputs"], outputs=row["outputs"]).value == original(inputs=row["inputs"], outputs=row["outputs"]).value == "no"


def test_a_judge_set_up_with_other_prompts_is_refused(scripted_server):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    spec = JudgeSpec.of(judge_for(server))
    other = spec.model_copy(update={"prompts": {**spec.prompts, "verify": "v0-0000"}})
    with pytest.raises(ValueError, match="its numbers would not be the same judge's"):
        other.build()


def test_make_scorer_ensemble_takes_our_judges_and_checks_their_declared_value_types(scripted_server, mlflow_store):
    # issue 29: MLflow's ensembles accept our judges; their declared value types (yes/no, a number) are checked up
    # front as MLflow's own judges' are, so a numeric ensemble over a yes/no judge is refused before any row.
    from mlflow.exceptions import MlflowException
    from mlflow.genai.scorers import make_scorer_ensemble

    server = scripted_server(Endpoint(), models=Endpoint.models)
    with pytest.raises(MlflowException, match="requires numeric sub-scorer values"):
        make_scorer_ensemble(name="mean_alignment", scorers=[ClaimAlignment(judge_for(server))], ensemble_fn="mean")
    faithful = make_scorer_ensemble(name="faithful", scorers=[ClaimAlignment(judge_for(server))], ensemble_fn="agg_all")
    covered = make_scorer_ensemble(name="covered_and_grounded", scorers=[KeyPointCoverage(judge_for(server)), Grounding()],
                                   ensemble_fn="minimum")

    result = mlflow.genai.evaluate(data=records(contradicted=True), scorers=[faithful, covered])

    single = judge_summaries([r["inputs"]["text"] for r in records(contradicted=True)], [r["outputs"] for r in records(contradicted=True)],
                             judge=judge_for(server), ids=[r["inputs"]["id"] for r in records()]).rows.set_index("id")
    traces = {row_id(t): t for t in run_traces(result.run_id) if row_id(t)}
    assert set(traces) == set(single.index)
    for key, trace in traces.items():
        (verdict,) = feedback(trace, "faithful")
        assert verdict.value is bool(single.loc[key, "strictly_aligned"]), key
        (lowest,) = feedback(trace, "covered_and_grounded")
        assert lowest.value == pytest.approx(min(single.loc[key, "coverage"], single.loc[key, "grounding"]), abs=5e-3), key
    assert not traces["biz/1"].info.assessments or feedback(traces["biz/1"], "faithful")[0].value is False
