"""A fourth task added in its own folder (issue 46, 1): ``tests/fourth_task`` (translation faithfulness) is a
``TaskPipeline`` subclass and one scorer, nothing in the package names it, and the one door serves it whole:
``evaluate`` gives a trace and a card per row and the run's figures, plain ``mlflow.genai.evaluate`` the cards and
``log_results`` the report, a row that cannot be read is refused by position, and the scorer registers and
rebuilds as itself."""

from __future__ import annotations

import pathlib

import mlflow
import pytest
from fourth_task.translation import TranslationFaithfulness
from helpers import judge_for, same_metrics
from mlflow.tracking import MlflowClient
from run_traces import cards_per_row

from mlflow_genai_metrics.signature import TaskMismatchError, signature_differences
from mlflow_genai_metrics.summarization.api import judge_summaries
from mlflow_genai_metrics.summarization.comparison import compare_results
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import evaluate, log_results
from mlflow_genai_metrics.tracking.judges import kinds, rebuilt

ROWS = [
    ("a", "Der Zug fährt um neun Uhr ab. Er hält in Köln.", "The train leaves at nine. It stops in Cologne."),
    ("b", "Das Museum ist montags geschlossen.", "The museum is open on Mondays."),
    ("c", "Die Brücke wurde 1920 gebaut.", "The bridge was built in 1920. It is made of steel."),
]
VERDICTS = {"The train leaves at nine.": "yes", "It stops in Cologne.": "yes", "The museum is open on Mondays.": "no",
            "The bridge was built in 1920.": "yes", "It is made of steel.": "idk"}
PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "mlflow_genai_metrics"


def _records() -> list[dict]:
    return [{"inputs": {"source": source, "id": row_id}, "outputs": translation} for row_id, source, translation in ROWS]


def test_the_one_door_judges_a_fourth_task_into_a_run_with_its_cards_and_figures(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript(verdicts=VERDICTS))
    with mlflow.start_run() as run:
        evaluation = evaluate(_records(), [TranslationFaithfulness(judge_for(server))])
    assert cards_per_row(run.info.run_id) == {"a": ["translation_faithfulness"], "b": ["translation_faithfulness"],
                                              "c": ["translation_faithfulness"]}
    metrics = evaluation.metrics
    assert metrics["strict_alignment"] == pytest.approx(1 / 3) and metrics["strict_alignment_n"] == 3
    assert metrics["defect_rate/contradiction"] == pytest.approx(1 / 3)
    # the claim engine's own figures for these rows, as the summaries' door computes them
    direct = judge_summaries([s for _, s, _ in ROWS], [t for _, _, t in ROWS], ids=[i for i, _, _ in ROWS], judge=judge_for(server),
                             coverage=False, grounding=False)
    assert same_metrics(metrics, direct.metrics)
    # signed as its task: the same judge part but for its name, so never compared with the summaries of those rows
    assert signature_differences(direct.signature, evaluation.result.signature) == ["task: (absent) != translations"]
    with pytest.raises(TaskMismatchError, match="run A judged summaries and run B judged translations"):
        compare_results(direct, evaluation.result, allow_signature_mismatch=True)
    assert MlflowClient().get_run(run.info.run_id).data.metrics["strict_alignment"] == pytest.approx(1 / 3)
    cards = {t.data.spans[0].inputs["id"]: next(a for a in t.info.assessments if a.name == "translation_faithfulness")
             for t in mlflow.search_traces(run_id=run.info.run_id, return_type="list")}
    assert {row_id: card.value for row_id, card in cards.items()} == {"a": "yes", "b": "no", "c": "no"}
    assert "The museum is open on Mondays." in cards["b"].rationale


def test_plain_mlflow_genai_evaluate_gives_the_cards_and_log_results_the_report(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript(verdicts=VERDICTS))
    judge = judge_for(server)
    plain = mlflow.genai.evaluate(data=_records(), scorers=[TranslationFaithfulness(judge)])
    assert plain.metrics["translation_faithfulness/mean"] == pytest.approx(1 / 3)  # MLflow's own aggregate of the cards
    result = log_results(plain.run_id, [TranslationFaithfulness(judge)], data=_records())
    assert result.metrics["strict_alignment"] == pytest.approx(1 / 3)
    assert MlflowClient().get_run(plain.run_id).data.metrics["alignment_n"] == 3


def test_a_row_of_the_fourth_task_that_cannot_be_read_is_refused_by_position_before_any_call(scripted_server, mlflow_store):
    server = scripted_server(SummarizationJudgeScript(verdicts=VERDICTS))
    records = _records()
    records[2]["outputs"] = {"text": "not a translation"}
    with pytest.raises(ValueError, match=r"row 2 \(id 'c'\): `outputs` must be the translation, not dict"):
        evaluate(records, [TranslationFaithfulness(judge_for(server))])
    assert server.request_count == 0
    # a translation the engine's own checks refuse is named by its number once, as the summaries' are
    # (``one_row``: the one-row check's own "row 0" once stood beside it)
    records = _records()
    records[1]["outputs"] = "The museum \udc80 is open."
    with pytest.raises(ValueError) as raised:
        evaluate(records, [TranslationFaithfulness(judge_for(server))])
    assert str(raised.value) == ("cannot judge these rows:\n  row 1 (id 'b'): the summary cannot be encoded as UTF-8: "
                                 "surrogates not allowed ('\\udc80' at character 11)")
    assert server.request_count == 0


def test_the_fourth_task_s_scorer_registers_and_rebuilds_as_itself(scripted_server):
    server = scripted_server(SummarizationJudgeScript(verdicts=VERDICTS))
    judge = TranslationFaithfulness(judge_for(server))
    assert kinds()["translation_faithfulness"] is TranslationFaithfulness
    again = rebuilt(judge.settings())
    assert type(again) is TranslationFaithfulness and again.settings() == judge.settings()
    feedback = judge.registrable()(inputs=_records()[0]["inputs"], outputs=_records()[0]["outputs"])
    assert feedback.value == "yes"


def test_nothing_in_the_package_names_the_fourth_task():
    named = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if "translation_faithfulness" in path.read_text() or "fourth_task" in path.read_text()]
    assert named == []
