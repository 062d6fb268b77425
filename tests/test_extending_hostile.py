"""A power user's two extension points, pushed with hostile input: the one-call claim judge MLflow's ``make_judge``
builds (``make_claim_judge``) against replies that break its own rule, side by side with ``claim_alignment`` on the
same rows; and a task of one's own added as docs/architecture.md says."""

from __future__ import annotations

import json

import mlflow
import pytest
from conftest import SECRET_KEY
from helpers import judge_for

from mlflow_genai_metrics.summarization.metrics import METRICS, MetricSpec
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript
from mlflow_genai_metrics.testing.summarization_judge import one_call_material
from mlflow_genai_metrics.tracking import ClaimAlignment, compare_runs, evaluate, make_claim_judge, register_if_passing

SOURCE = "The museum is closed on Mondays. It opened in 1920."


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MLFLOW_MODEL_CATALOG_URI", "")


def one_call_says(answers: dict[str, object]):
    """The one-call judge answers ``answers[summary]`` (a dict sent as JSON); every other request is the claim
    engine's scripted judge (the museum open on Mondays contradicted)."""
    ours = SummarizationJudgeScript(verdicts={"The museum is open on Mondays.": "no"})

    def script(request):
        material = one_call_material(request)
        if material is None:
            return ours(request)
        return Reply(json.dumps(answers[material[1]]))
    return script


def test_the_one_call_card_is_never_a_yes_its_own_rationale_or_value_denies(scripted_server, key):
    # once: "yes" with no claim listed, "yes" beside a claim it marks "no", and a value outside the declared yes/no
    # (MLflow checks none) all stood as the row's card
    answers = {
        "The museum is open on Mondays.": {"result": "yes", "rationale": "1. The museum is open on Mondays. - no: it is closed"},
        "It opened in 1920.": {"result": "yes", "rationale": "no claim"},
        "The museum opened in 1920.": {"result": "idk", "rationale": "1. The museum opened in 1920. - idk: unsure"},
        "The museum is closed on Mondays.": {"result": "Yes", "rationale": "1. The museum is closed on Mondays. - yes: stated"},
    }
    server = scripted_server(one_call_says(answers))
    judge = judge_for(server)
    one_call, ours = make_claim_judge(judge), ClaimAlignment(judge)
    inputs = {"text": SOURCE}
    contradicted = one_call(inputs=inputs, outputs="The museum is open on Mondays.")
    assert contradicted.value is None and "marks a claim no or idk" in contradicted.error.error_message
    assert ours(inputs=inputs, outputs="The museum is open on Mondays.").value == "no"  # the same verdict, ours: No
    no_claim = one_call(inputs=inputs, outputs="It opened in 1920.")
    assert no_claim.value is None and "listed no claim" in no_claim.error.error_message
    other = one_call(inputs=inputs, outputs="The museum opened in 1920.")
    assert other.value is None and other.error.error_message == "the judge answered 'idk', not yes or no"
    assert one_call(inputs=inputs, outputs="The museum is closed on Mondays.").value == "yes"  # "Yes": the same answer


def test_an_empty_summary_is_a_no_without_a_call_as_claim_alignment_decides_it(scripted_server, key):
    # once: a blank summary went to the endpoint, and a judge saying "yes" made it faithful; ours says No (empty)
    server = scripted_server(one_call_says({"": {"result": "yes", "rationale": "1. nothing - yes: fine"},
                                           " ... ": {"result": "yes", "rationale": "1. nothing - yes: fine"}}))
    judge = judge_for(server)
    one_call, ours = make_claim_judge(judge), ClaimAlignment(judge)
    for blank in ("", " ... "):
        card = one_call(inputs={"text": SOURCE}, outputs=blank)
        assert (card.value, card.error) == ("no", None) and "defect: empty" in card.rationale
        assert ours(inputs={"text": SOURCE}, outputs=blank).value == "no"
    assert server.request_count == 0


# -- a task of one's own, with a metric of its own -------------------------------------------------------------------

LONG = MetricSpec("long_translation", level="row", description="1 when the translation makes more than one claim",
                  greater_is_better=False, row_value=lambda f: None if f.claim_count is None else int(f.claim_count > 1), integer=True)
LONG_RATE = MetricSpec("long_translation_rate", level="aggregate", description="share of judged translations with more than one claim",
                       greater_is_better=False, kind="proportion", of="long_translation", share=True)
SOURCES = [("a", "Der Zug fährt um neun Uhr ab. Er hält in Köln."), ("b", "Das Museum ist montags geschlossen."),
           ("c", "Die Brücke wurde 1920 gebaut.")]


def _translations(*texts: str) -> list[dict]:
    return [{"inputs": {"source": source, "id": row_id}, "outputs": text} for (row_id, source), text in zip(SOURCES, texts)]


def test_a_task_s_own_metric_compared_where_it_is_not_registered_says_so_never_vanishes(scripted_server, mlflow_store):
    # once: compare_runs (and `mgm compare`) in a process that had not registered the task's metric left it out of the
    # table with no word, and asked for by name gave its values with no test, no direction and an empty note
    from fourth_task.translation import TranslationFaithfulness

    server = scripted_server(SummarizationJudgeScript())
    run_ids = []
    with METRICS.registered(LONG, LONG_RATE):
        for texts in (("The train leaves at nine. It stops in Cologne.", "The museum is closed on Mondays.", "The bridge was built in 1920."),
                      ("The train leaves at nine.", "The museum is closed on Mondays.", "The bridge was built in 1920.")):
            with mlflow.start_run() as run:
                evaluate(_translations(*texts), [TranslationFaithfulness(judge_for(server))])
            run_ids.append(run.info.run_id)
        registered = compare_runs(run_ids)
    assert registered[registered["metric"] == "long_translation_rate"]["value"].tolist() == [pytest.approx(1 / 3), 0.0]
    for table in (compare_runs(run_ids), compare_runs(run_ids, metrics=["long_translation_rate"])):
        rows = table[table["metric"] == "long_translation_rate"]
        assert rows["value"].tolist() == [pytest.approx(1 / 3), 0.0]
        assert rows["metric_note"].str.startswith("not compared pair by pair: no metric 'long_translation_rate' is registered").all()
    # and a gate asked to beat the champion on it says what is missing, not that it is no aggregate with an interval
    with pytest.raises(ValueError, match=r"registered here \(a task's own: METRICS.register it\)"):
        register_if_passing(f"runs:/{run_ids[1]}/model", "translator", run_id=run_ids[1], rules={"long_translation_rate": "<= 1"},
                            beat_champion=True, beat_metric="long_translation_rate")


def test_in_mlflow_genai_evaluate_the_denied_yes_is_the_row_s_error_beside_our_no(scripted_server, mlflow_store, key):
    from test_mlflow_judges import feedback, row_id, run_traces

    answers = {"The museum is open on Mondays.": {"result": "yes", "rationale": "1. The museum is open on Mondays. - no: closed"},
               "It opened in 1920.": {"result": "yes", "rationale": "1. It opened in 1920. - yes: stated"}}
    server = scripted_server(one_call_says(answers))
    judge = judge_for(server)
    data = [{"inputs": {"text": SOURCE, "id": str(n)}, "outputs": summary} for n, summary in enumerate(answers)]
    result = mlflow.genai.evaluate(data=data, scorers=[ClaimAlignment(judge), make_claim_judge(judge)])
    cards = {row_id(t): (feedback(t, "claim_alignment")[0], feedback(t, "claim_alignment_one_call")[0])
             for t in run_traces(result.run_id) if row_id(t)}
    ours, theirs = cards["0"]
    assert ours.value == "no" and theirs.value is None and theirs.error.error_code == "INVALID_JUDGE_ANSWER"
    assert [card.value for card in cards["1"]] == ["yes", "yes"]


def test_a_registered_judge_of_a_task_whose_module_is_not_imported_says_so(scripted_server):
    # once: a bare KeyError('headline_faithfulness') where the registered judge ran without the task's module
    from fourth_task.translation import TranslationFaithfulness

    from mlflow_genai_metrics.tracking.judges import rebuilt

    settings = {**TranslationFaithfulness(judge_for(scripted_server())).settings(), "kind": "headline_faithfulness"}
    with pytest.raises(ValueError, match=r"no judge of kind 'headline_faithfulness' is loaded where this registered judge "
                                         r"runs: import the module that defines its class first"):
        rebuilt(settings)


def test_the_fourth_task_with_a_predict_fn_that_fails_on_a_row_counts_it_and_keeps_the_run(scripted_server, mlflow_store):
    # once: the documented task, given a predict_fn, refused every row before it ran ("`outputs` must be the
    # translation, not NoneType"); read with outputs, one row the application failed on lost the whole run's figures
    from fourth_task.translation import TranslationFaithfulness

    server = scripted_server(SummarizationJudgeScript(verdicts={"The train leaves at nine.": "yes", "The museum is open on Mondays.": "no"}))
    answers = {"a": "The train leaves at nine.", "b": "The museum is open on Mondays."}

    def translate(source, id):
        if id == "c":
            raise RuntimeError("translator down")
        return answers[id]
    data = [{"inputs": {"source": source, "id": row_id}} for row_id, source in SOURCES]
    with mlflow.start_run():
        evaluation = evaluate(data, [TranslationFaithfulness(judge_for(server))], predict_fn=translate)
    metrics = evaluation.metrics
    assert (metrics["judge_error_rate"], metrics["judge_error_rate_n"]) == (pytest.approx(1 / 3), 3)
    assert (metrics["strict_alignment"], metrics["strict_alignment_n"]) == (0.5, 2)
