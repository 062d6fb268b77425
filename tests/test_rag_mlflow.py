"""Answers from retrieved passages in MLflow (issue 28, 3): a small RAG application instrumented with MLflow tracing
(a RETRIEVER span, an LLM span that calls a model over HTTP) is judged from its traces with no reshaping; one card
per judge per row with the claims, their passages and quotes; the run's figures are ``judge_answers``'; two RAG
runs compare and gate with the summaries' tests and decisions; a judge failing on one row gives that row error
cards, never a score.

The application's model and the judge are one scripted server on 127.0.0.1 (by model name): the writer answers
with the first sentence of the first passage it is given (the "inventing" writer adds a sentence no passage
holds), the judge is ``AnswersJudgeScript`` (a claim is supported when a passage holds its every word)."""

from __future__ import annotations

import json
import re

import mlflow
import pandas as pd
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.tracking import MlflowClient
from rag_helpers import INVENTED, TOPICS, RagEndpoint, rag_app

from mlflow_genai_metrics import register_if_passing
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.rag import judge_answers
from mlflow_genai_metrics.testing import AnswersJudgeScript, Fault
from mlflow_genai_metrics.tracking import (
    AnswerFaithfulness,
    SummarizerModel,
    answer_scorers,
    compare_runs,
    evaluate_answers,
    log_results,
    score_traces,
)
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch


def _questions(ids=tuple(TOPICS)) -> list[dict]:
    return [{"inputs": {"question": TOPICS[i][0], "id": i}} for i in ids]


def _cards(run_id: str | None, name: str) -> dict[str, object]:
    """Each row's card ``name``, by row id: of a run's traces, or (``run_id`` None) of the experiment's."""
    traces = mlflow.search_traces(run_id=run_id, return_type="list") if run_id else mlflow.search_traces(return_type="list")
    cards = {}
    for trace in traces:
        row_id = next(s for s in trace.data.spans if s.parent_id is None).inputs["id"]
        cards[row_id] = next(a for a in trace.info.assessments if a.name == name)
    return cards


def test_an_answer_the_application_raised_on_after_retrieving_is_a_failed_row_not_an_empty_answer(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    inner = rag_app(server, "writer")

    @mlflow.trace
    def app(question: str, id: str) -> str:
        answer = inner(question, id)  # its passages retrieved and traced, then the application fails
        if id == "plant":
            raise RuntimeError("the answer did not pass moderation")
        return answer

    ids = ("prize", "plant", "fares")
    scorers = answer_scorers(judge_for(server))
    result = mlflow.genai.evaluate(data=_questions(ids), predict_fn=app, scorers=scorers)
    card = _cards(result.run_id, "answer_faithfulness")["plant"]
    assert card.feedback.error.error_code == "APPLICATION_ERROR" and "RuntimeError: the answer did not pass moderation" in card.feedback.error.error_message
    log_results(result.run_id, scorers)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["alignment_n"] == 2 and metrics["judge_error_rate"] == pytest.approx(1 / 3)


def test_a_traced_rag_application_is_judged_from_its_retriever_spans_with_no_reshaping(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    app = rag_app(server, "inventing-writer")
    ids = ("prize", "plant", "fares")

    scorers = answer_scorers(judge_for(server))
    with mlflow.start_run() as run:
        mlflow.genai.evaluate(data=_questions(ids), predict_fn=app, scorers=scorers)
    log_results(run.info.run_id, scorers)  # the full report, from the traces' RETRIEVER spans
    # each row's claims asked once by the set's scorers (they share the row), once by log_results (no cache here)
    assert server.count(purpose="ExtractedClaims") == 2 * len(ids)

    metrics = MlflowClient().get_run(run.info.run_id).data.metrics
    assert metrics["strict_alignment"] == 0.0 and metrics["strict_alignment_n"] == 3  # every answer invents a sentence
    assert metrics["alignment"] == 1.0 and metrics["answer_relevance"] == 1.0
    cards = _cards(run.info.run_id, "answer_faithfulness")
    assert set(cards) == set(ids)
    card = cards["prize"]
    assert card.feedback.value == "no" and card.source.source_id == "openai:/scripted-judge"
    first, *lines = [line for line in card.rationale.splitlines() if line]
    assert first.startswith("**No**: 1 unverifiable claim (the passages do not support it); 1 of 2 claims supported.")
    assert lines[0].startswith("- **unverifiable**: The announcement was welcomed by astronauts.")
    # the supported claim names the passage the retriever gave first, and quotes it
    assert lines[1].endswith("*(passage 1: “Tomas Reyes won the Coastal Book Prize for his first novel.”)*")
    assert card.metadata["passages"] == "3" and card.metadata["supported"] == "1"
    relevance = _cards(run.info.run_id, "answer_relevance")["plant"]
    assert relevance.feedback.value == 1.0 and relevance.rationale.startswith("**Yes**:")
    # no expected answer: the sufficiency card has no value and says why, never 0
    sufficiency = _cards(run.info.run_id, "context_sufficiency")["fares"]
    assert sufficiency.feedback.value is None and sufficiency.feedback.error.error_code == "NO_EXPECTED_ANSWER"


def test_evaluate_answers_logs_the_figures_judge_answers_gives_for_the_same_rows(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    rows = [{"inputs": {"question": TOPICS[i][0], "passages": list(TOPICS[i][1:]), "id": i},
             "outputs": TOPICS[i][1] if n % 2 else f"{TOPICS[i][1]} {INVENTED}",
             "expectations": {"expected_response": TOPICS[i][2]}} for n, i in enumerate(TOPICS)]
    judge = judge_for(server)

    evaluation = evaluate_answers(rows, answer_scorers(judge))

    direct = judge_answers([r["inputs"]["question"] for r in rows], [r["inputs"]["passages"] for r in rows], [r["outputs"] for r in rows],
                           judge=judge, ids=[r["inputs"]["id"] for r in rows], expected=[r["expectations"]["expected_response"] for r in rows])
    for name in ("strict_alignment", "strict_alignment_ci_low", "claim_support_rate", "context_sufficiency", "answer_relevance", "richness"):
        assert evaluation.metrics[name] == pytest.approx(direct.metrics[name], nan_ok=True), name
    assert evaluation.metrics["strict_alignment"] == 0.5 and evaluation.metrics["context_sufficiency"] == 1.0
    logged = MlflowClient().get_run(evaluation.run_id).data
    assert logged.metrics["strict_alignment"] == 0.5 and logged.metrics["context_sufficiency"] == 1.0
    assert logged.tags["mgm.signature"] == direct.signature
    artifacts = {a.path for a in MlflowClient().list_artifacts(evaluation.run_id)}
    assert {"mgm_rows.json", "mgm_claims.json", "mgm_facts.json"} <= artifacts and "mgm_key_points.json" not in artifacts
    sufficiency = _cards(evaluation.run_id, "context_sufficiency")["comet"]
    assert sufficiency.feedback.value == 1.0 and sufficiency.rationale.endswith("*(passage 2: “Astronomers named the comet after the observatory.”)*")


def test_a_row_with_no_passages_and_no_retriever_span_is_refused_naming_it_before_any_call(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    rows = [{"inputs": {"question": "Who won?", "passages": ["Reyes won."], "id": "a"}, "outputs": "Reyes won."},
            {"inputs": {"question": "Who lost?", "id": "b"}, "outputs": "Nobody."}]
    with pytest.raises(ValueError, match=r"row 1 \(id 'b'\): no passages for this row: give them as inputs\['passages'\]"):
        evaluate_answers(rows, answer_scorers(judge_for(server)))
    assert server.request_count == 0 and mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.parametrize(("passages", "expected", "problem"), [
    # one Document given as a dict was read as its keys, two "passages" ('page_content', 'metadata'), and judged
    ({"page_content": "Reyes won.", "metadata": {"doc_uri": "kb/1"}}, None, "the passages are dict, not a list of texts"),
    (7, None, "the passages are int, not a list of texts"),  # once a bare TypeError naming no row
    (["Reyes won."], 330, "the expected answer is not text (int)"),  # once taken as no expected answer: n 0, no word
])
def test_passages_or_an_expected_answer_of_the_wrong_kind_are_refused_naming_the_row(scripted_server, mlflow_store, passages, expected, problem):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    bad = {"inputs": {"question": "Who won?", "passages": passages, "id": "b"}, "outputs": "Reyes won."}
    if expected is not None:
        bad["expectations"] = {"expected_response": expected}
    rows = [{"inputs": {"question": "Who won?", "passages": ["Reyes won."], "id": "a"}, "outputs": "Reyes won."}, bad]
    with pytest.raises(ValueError, match=re.escape(f"row 1 (id 'b'): {problem}")):
        evaluate_answers(rows, answer_scorers(judge_for(server)))
    assert server.request_count == 0


def test_a_refused_row_is_named_once_by_its_own_number(scripted_server, mlflow_store):
    """Once "row 1 (id 'b'): cannot judge these answers: row 0 (id 'b'): passage 2 ...": the one-row check's own
    "row 0" beside the row's real number."""
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    rows = [{"inputs": {"question": "Who won?", "passages": ["Reyes won."], "id": "a"}, "outputs": "Reyes won."},
            {"inputs": {"question": "Who won?", "passages": ["Reyes won.", None], "id": "b"}, "outputs": "Reyes won."}]
    with pytest.raises(ValueError) as raised:
        evaluate_answers(rows, answer_scorers(judge_for(server)))
    assert str(raised.value) == "cannot judge these rows:\n  row 1 (id 'b'): passage 2 is NoneType, not text"
    assert server.request_count == 0


def test_a_judge_failing_on_one_row_gives_that_row_error_cards_and_no_score(scripted_server, mlflow_store):
    failing = TOPICS["bridge"][0]
    script = AnswersJudgeScript(fault=lambda request, kind: Fault("status", status=400, message="refused")
                                if kind == "relevance" and failing in request.prompt_text else None)
    server = scripted_server(RagEndpoint(script), models=RagEndpoint.models)

    with mlflow.start_run() as run:
        evaluation = evaluate_answers(_questions(), answer_scorers(judge_for(server), sufficiency=False),
                                      predict_fn=rag_app(server, "writer"))

    assert evaluation.metrics["judge_error_rate"] == 1 / 8 and evaluation.metrics["strict_alignment_n"] == 7
    assert evaluation.metrics["strict_alignment"] == 1.0
    errors = evaluation.result.rows.set_index("id")["error"]
    assert "relevance" in errors["bridge"] and (errors.drop("bridge") == "").all()
    for name in ("answer_faithfulness", "answer_relevance"):
        card = _cards(run.info.run_id, name)["bridge"]
        assert card.feedback.value is None and card.feedback.error.error_code == "JUDGE_ERROR"


def _run(server, model: str, name: str) -> tuple[str, str]:
    with mlflow.start_run(run_name=name) as run:
        info = SummarizerModel(model, server.base_url, input_col="question").log(name="rag")
        evaluate_answers(_questions(), [AnswerFaithfulness(judge_for(server))], predict_fn=rag_app(server, model))
    return run.info.run_id, info.model_uri


def test_two_rag_runs_compare_with_the_summaries_paired_tests(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    faithful, _ = _run(server, "writer", "faithful")
    inventing, _ = _run(server, "inventing-writer", "inventing")

    table = compare_runs([faithful, inventing], metrics=["strict_alignment", "richness"]).set_index(["run_id", "metric"])

    strict = table.loc[(inventing, "strict_alignment")]
    assert strict["value"] == 0.0 and strict["pairs"] == 8 and strict["better"] == "first"
    assert "McNemar" in strict["test"] and strict["p_value"] < 0.05
    assert table.loc[(inventing, "richness"), "value"] == 2.0


def test_the_gate_refuses_a_rag_candidate_worse_than_its_champion(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    champion_run, champion_uri = _run(server, "writer", "champion")
    assert register_if_passing(champion_uri, "rag", run_id=champion_run, rules={"strict_alignment": ">= 0.5"}).passed
    candidate_run, candidate_uri = _run(server, "inventing-writer", "candidate")

    gate = register_if_passing(candidate_uri, "rag", run_id=candidate_run, rules={"richness": ">= 1"}, beat_champion=True)

    assert not gate.passed and gate.registered_version is None
    assert gate.failed[0].detail.startswith("worse than the champion: strict_alignment is lower than the champion's")
    assert str(MlflowClient().get_model_version_by_alias("rag", "champion").version) == "1"


def test_score_traces_cards_a_rag_applications_production_traces_once(scripted_server, mlflow_store):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    app = rag_app(server, "inventing-writer")
    for row_id in ("prize", "plant"):
        app(TOPICS[row_id][0], row_id)  # production traffic: traces, no evaluation
    judges = answer_scorers(judge_for(server), sufficiency=False)

    report = score_traces(judges=judges)

    assert (report.traces_seen, report.scored, report.unusable, report.judge_errors) == (2, 2, 0, 0)
    faithfulness = _cards(None, "answer_faithfulness")
    assert {row_id: card.feedback.value for row_id, card in faithfulness.items()} == {"prize": "no", "plant": "no"}
    assert "*(passage 1: “Harbour Foods will open its second plant in Bergen next spring.”)*" in faithfulness["plant"].rationale
    asked = server.request_count
    again = score_traces(judges=answer_scorers(judge_for(server), sufficiency=False))
    assert (again.scored, again.already_scored) == (0, 2) and server.request_count == asked


def test_mgm_evaluate_and_monitor_take_task_rag(scripted_server, mlflow_store, tmp_path, capsys, monkeypatch):
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                        "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "answers.csv"  # a CSV: the passages of a row are a JSON list in their cell
    rows = [{"id": i, "question": TOPICS[i][0], "passages": json.dumps(list(TOPICS[i][1:])), "answer": TOPICS[i][1],
             "expected": TOPICS[i][2]} for i in ("prize", "plant", "comet")]
    pd.DataFrame(rows).to_csv(path, index=False)

    assert mgm(["evaluate", str(path), "--task", "rag", "--id-col", "id", "--expected-col", "expected", "--run-name", "rag-cli"]) == 0
    out = capsys.readouterr().out
    run_id = re.search(r"^run ([0-9a-f]{32}) \(3 answers\)", out, re.MULTILINE).group(1)
    assert re.search(r"^  strict_alignment\s+1  \[", out, re.MULTILINE) and re.search(r"^  context_sufficiency\s+1 ", out, re.MULTILINE)
    assert set(_cards(run_id, "context_sufficiency")) == {"prize", "plant", "comet"}
    assert mgm(["evaluate", str(path), "--task", "rag", "--no-coverage"]) == 2
    assert "--no-coverage is not for --task rag" in capsys.readouterr().err

    app = rag_app(server, "writer")
    with mlflow.start_run():
        pass
    app(TOPICS["comet"][0], "comet-live")
    assert mgm(["monitor", "--task", "rag"]) == 0
    assert "1 scored now (0 judge errors, 0 asked again after an error), 3 already scored" in capsys.readouterr().out
    # expected answers that a CSV reader takes for numbers are text, read as such (they were dropped: n 0, exit 0)
    years = tmp_path / "years.csv"
    pd.DataFrame([{"id": k, "question": "When was the tower built?", "passages": json.dumps([f"The tower was built in {1889 + k}."]),
                   "answer": f"It was built in {1889 + k}.", "expected": 1889 + k} for k in range(2)]).to_csv(years, index=False)
    assert mgm(["evaluate", str(years), "--task", "rag", "--id-col", "id", "--expected-col", "expected", "--run-name", "years"]) == 0
    run_id = re.search(r"^run ([0-9a-f]{32}) \(2 answers\)", capsys.readouterr().out, re.MULTILINE).group(1)
    assert MlflowClient().get_run(run_id).data.metrics["context_sufficiency_n"] == 2


def test_the_answer_judges_registrable_form_rebuilds_the_same_judge(scripted_server, monkeypatch):
    from mlflow.genai.scorers import Scorer

    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")  # MLflow runs a loaded @scorer's source only then
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # the rebuilt judge reads the key where it runs: it is never stored
    original = AnswerFaithfulness(judge_for(server), question_key="query")
    dumped = original.model_dump()
    assert dumped["name"] == "answer_faithfulness" and "'question_key': 'query'" in dumped["call_signature"]
    assert SECRET_KEY not in json.dumps(dumped)
    loaded = Scorer.model_validate(dumped)
    row = {"inputs": {"query": TOPICS["prize"][0], "passages": list(TOPICS["prize"][1:])}, "outputs": f"{TOPICS['prize'][1]} {INVENTED}"}
    feedback = loaded(**row)
    assert feedback.value == original(**row).value == "no" and feedback.rationale == original(**row).rationale


def test_a_row_that_cannot_be_read_leaves_the_run_without_figures_and_says_why(scripted_server, mlflow_store):
    """Plain mlflow.genai.evaluate: one row has no passages and its trace no RETRIEVER span. Its card says why, and
    log_results gives the run no figures (never figures over the other rows alone) but the mgm.error tag."""
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    rows = [{"inputs": {"question": TOPICS[i][0], "passages": list(TOPICS[i][1:]), "id": i}, "outputs": TOPICS[i][1]} for i in ("prize", "plant")]
    rows.append({"inputs": {"question": TOPICS["comet"][0], "id": "comet"}, "outputs": TOPICS["comet"][1]})
    scorers = answer_scorers(judge_for(server), relevance=False, sufficiency=False)
    with mlflow.start_run() as run:
        mlflow.genai.evaluate(data=rows, scorers=scorers)
    with pytest.raises(RunRowsMismatch, match="3 of their traces can be read back and 2 of those hold a question, passages and an answer"):
        log_results(run.info.run_id, scorers)
    logged = MlflowClient().get_run(run.info.run_id).data
    assert "strict_alignment" not in logged.metrics
    assert "the run evaluated 3 rows" in logged.tags["mgm.error"]
    card = _cards(run.info.run_id, "answer_faithfulness")["comet"]
    assert card.feedback.error.error_code == "BAD_ROW" and "no passages for this row" in card.feedback.error.error_message


def test_the_answers_mlflow_path_takes_stability_and_the_order_check(scripted_server, mlflow_store):
    from mlflow_genai_metrics.signature import parse_signature

    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    with mlflow.start_run() as run:
        evaluation = evaluate_answers(_questions(), answer_scorers(judge_for(server), stability=3, order_check=1.0),
                                      predict_fn=rag_app(server, "inventing-writer"))  # two claims an answer: an order to shuffle
    verifications = [r for r in server.requests if r.body.get("model") == "scripted-judge" and "=====CLAIMS " in r.body["messages"][0]["content"]]
    assert sorted({r.body.get("seed") for r in verifications}, key=str) == [1, 2, None]
    assert evaluation.metrics["judge/flip_rate"] == 0.0  # the scripted judge never changes its mind
    assert parse_signature(evaluation.result.signature)["stability"] == "3"
    logged = MlflowClient().get_run(run.info.run_id).data.metrics
    assert logged["judge/flip_rate"] == 0.0 and logged["judge/order_sensitivity"] == 0.0  # every row sampled at 1.0
    assert evaluation.metrics["judge/order_sensitivity_n"] == (evaluation.result.rows["claim_count"] >= 2).sum() > 0


def test_the_answers_mlflow_path_and_mgm_take_examples_and_sign_them(scripted_server, mlflow_store, tmp_path, capsys, monkeypatch):
    from mlflow_genai_metrics.judge import CorrectedVerdict, ExampleSet
    from mlflow_genai_metrics.signature import parse_signature

    examples = ExampleSet(examples=(CorrectedVerdict(source="The prize went to Ada.", statement="Ada won the prize.", verdict="yes"),))
    path = examples.write(tmp_path / "examples.json")
    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    with mlflow.start_run():
        evaluation = evaluate_answers(_questions(), answer_scorers(judge_for(server), examples=examples), predict_fn=rag_app(server, "writer"))
    assert parse_signature(evaluation.result.signature)["examples"] == examples.tag
    shown = [r for r in server.requests if r.body.get("model") == "scripted-judge" and "=====CLAIMS " in r.body["messages"][0]["content"]]
    assert shown and all("Ada won the prize." in r.body["messages"][0]["content"] for r in shown)
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                        "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    answers = tmp_path / "answers.csv"
    pd.DataFrame([{"id": "prize", "question": TOPICS["prize"][0], "passages": json.dumps(list(TOPICS["prize"][1:])),
                   "answer": TOPICS["prize"][1]}]).to_csv(answers, index=False)
    assert mgm(["evaluate", str(answers), "--task", "rag", "--id-col", "id", "--examples", str(path)]) == 0
    assert "strict_alignment" in capsys.readouterr().out


def test_plain_answer_judges_ask_each_pass_once_a_row_and_keep_nothing_for_a_later_evaluation(scripted_server, mlflow_store):
    """Each plain answer judge asks its own pass of a row (claims, relevance, facts) and nothing else, so a set costs
    what one batch of the rows costs; the same scorer objects in a second evaluation ask the judge again: no
    judgement is kept on them between calls."""
    from collections import Counter

    server = scripted_server(RagEndpoint(), models=RagEndpoint.models)
    rows = [{"inputs": {"question": TOPICS[i][0], "passages": list(TOPICS[i][1:]), "id": i}, "outputs": TOPICS[i][1],
             "expectations": {"expected_response": TOPICS[i][2]}} for i in ("prize", "plant", "comet")]
    judge = judge_for(server)

    def asked() -> Counter:
        return Counter(r.purpose for r in server.requests if r.body.get("model") == "scripted-judge")

    judge_answers([r["inputs"]["question"] for r in rows], [r["inputs"]["passages"] for r in rows], [r["outputs"] for r in rows],
                  judge=judge, ids=[r["inputs"]["id"] for r in rows], expected=[r["expectations"]["expected_response"] for r in rows])
    batch = asked()
    assert len(batch) >= 3 and batch["ExtractedClaims"] == 3  # claims, relevance, facts (and their checks) were asked

    scorers = answer_scorers(judge)
    for evaluation in (1, 2):
        mlflow.genai.evaluate(data=rows, scorers=scorers)
        assert asked() == Counter({purpose: (evaluation + 1) * n for purpose, n in batch.items()}), evaluation
    assert all(getattr(s, "__pydantic_private__", {}).get("_evaluation") is None for s in scorers)
