"""Hostile checks of the MLflow objects users keep and reuse: ``evaluate``'s ``predict_fn`` answering what no judge
can read."""

from __future__ import annotations

import mlflow
import pytest
from helpers import judge_for
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage, evaluate
from mlflow_genai_metrics.tracking.evaluate import RunRowsMismatch
from mlflow_genai_metrics.tracking.rows import ERROR_TAG


@pytest.mark.parametrize(("answer", "reason"), [({"response": "x"}, "a dict with keys ['response'] and no 'summary'"), (42, "got int"),
                                                (["a", "b"], "got list")], ids=["dict without summary", "number", "list"])
def test_a_predict_fn_answering_one_row_with_no_summary_names_that_row_not_a_lost_trace(scripted_server, mlflow_store, answer, reason):
    """``predict_fn`` answering one row (spo/1) with a dict without "summary", a number or a list: the run got no
    figures (right), but the error said "1 scorer calls had a row that could not be read", counted that row as one
    "without a trace" and "not scored", and blamed MLflow's store ("could not write every row's trace ... SQLite"),
    naming neither the row nor what was wrong. The error and the run's ``mgm.error`` tag name its trace, its id and
    the reason, and nothing about traces MLflow lost."""
    server = scripted_server(Endpoint(), models=Endpoint.models)
    judge = judge_for(server)
    data = [{"inputs": {"text": text, "id": row_id}} for row_id, _, text in ARTICLES]

    def predict(text: str, id: str):
        return answer if id == "spo/1" else first_sentence(text)

    with pytest.raises(RunRowsMismatch) as raised:
        evaluate(data, [ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()], predict_fn=predict)
    message = str(raised.value)
    assert "1 row(s) could not be read: the row of trace tr-" in message and "(id 'spo/1': `outputs` must be the summary text" in message
    assert reason in message
    assert "without a trace" not in message and "could not write" not in message and "were not scored" not in message
    assert mlflow.get_run(raised.value.run_id).data.tags[ERROR_TAG] == message
