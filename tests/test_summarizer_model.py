"""``SummarizerModel``: an OpenAI-compatible candidate as an MLflow pyfunc model, logged as code (not pickled),
that keeps its input column, stores no key and never answers with placeholder text."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml
from conftest import SECRET_KEY, files_containing
from mlflow_helpers import ARTICLES, Endpoint

from mlflow_genai_metrics import SummarizerModel


@pytest.fixture
def endpoint(scripted_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)  # what a deployed SummarizerModel reads
    return scripted_server(Endpoint(), models=Endpoint.models)


def test_a_summarizer_model_stores_no_api_key_and_summarizes_through_the_endpoint(endpoint, mlflow_store, tmp_path):
    with mlflow.start_run():
        info = SummarizerModel("good-summarizer", endpoint.base_url, input_col="text").log(name="summarizer")
    model = mlflow.pyfunc.load_model(info.model_uri)
    out = model.predict(pd.DataFrame({"text": [ARTICLES[0][2]]}))
    assert list(out) == ["The council approved the budget on Monday."]
    local = mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "model"))
    assert files_containing(Path(local), SECRET_KEY) == []


def test_a_summarizer_model_is_logged_as_code_with_its_settings_not_as_a_pickle(mlflow_store, tmp_path):
    with mlflow.start_run():
        info = SummarizerModel("good-summarizer", "http://127.0.0.1:9/v1", input_col="article", max_tokens=60).log(name="summarizer")
    local = Path(mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "model")))
    flavor = yaml.safe_load((local / "MLmodel").read_text())["flavors"]["python_function"]
    assert flavor["model_code_path"].endswith("summarizer_code.py") and list(local.rglob("*.pkl")) == []
    assert flavor["config"]["input_col"] == "article" and flavor["config"]["max_tokens"] == 60


def test_a_loaded_summarizer_model_reads_its_input_column_among_others(endpoint, mlflow_store):
    with mlflow.start_run():
        info = SummarizerModel("bad-summarizer", endpoint.base_url, input_col="article").log(name="summarizer")
    frame = pd.DataFrame({"id": [1, 2], "category": ["business", "tech"], "article": [ARTICLES[0][2], ARTICLES[4][2]]})
    out = mlflow.pyfunc.load_model(info.model_uri).predict(frame)
    assert list(out) == ["The council rejected the budget.", "A new phone was released in Paris."]


def test_a_summarizer_that_fails_raises_instead_of_returning_placeholder_text(scripted_server, monkeypatch):
    from mlflow_genai_metrics.testing import Fault

    server = scripted_server(lambda r: Fault.server_error(503), models=("good-summarizer",))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    model = SummarizerModel("good-summarizer", server.base_url, max_retries=0)
    with pytest.raises(RuntimeError, match="failed to summarize 1 of 1 rows"):
        model.predict(None, pd.DataFrame({"text": ["An article."]}))


def test_a_summarizer_model_refuses_a_base_url_carrying_credentials():
    with pytest.raises(ValueError, match=r"http://\*\*\*@127.0.0.1:8080/v1 carries credentials"):
        SummarizerModel("good-summarizer", "http://user:s3cret@127.0.0.1:8080/v1")


@pytest.mark.parametrize("given", [{"text": [ARTICLES[0][2]]}, {"text": ARTICLES[0][2]}, [{"text": ARTICLES[0][2], "id": 1}]],
                         ids=["dict of columns", "one row's dict", "list of row dicts"])
def test_a_loaded_summarizer_model_reads_a_dict_input_by_its_column_not_its_keys(endpoint, mlflow_store, given):
    """A dict (MLflow passes it through to a model with no input schema) was read as a list, which gives its keys:
    the model summarized the word "text" (and after retries blamed the endpoint). Its column is read."""
    with mlflow.start_run():
        info = SummarizerModel("good-summarizer", endpoint.base_url, max_retries=0).log(name="summarizer")
    assert list(mlflow.pyfunc.load_model(info.model_uri).predict(given)) == ["The council approved the budget on Monday."]
    assert not any(r.last_user_message.endswith("\n\ntext") for r in endpoint.requests)
