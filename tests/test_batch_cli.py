"""``mgm evaluate --batch``: the MLflow evaluation run's judge asks through the Batches API."""

from __future__ import annotations

from conftest import SECRET_KEY
from mlflow_helpers import Endpoint, frame

from mlflow_genai_metrics.cli import main as mgm


def test_mgm_evaluate_with_batch_asks_every_request_through_batches(scripted_server, mlflow_store, monkeypatch, tmp_path):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                        "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "summaries.csv"
    frame().head(3).to_csv(path, index=False)
    assert mgm(["evaluate", str(path), "--id-col", "id", "--tracking-uri", mlflow_store, "--batch", "--batch-poll-s", "0.01"]) == 0
    assert server.request_count > 0 and all(request.batch_id for request in server.requests)
    assert server.batch_api.created >= 2  # claims and key points, then verification and coverage


def test_mgm_evaluate_estimate_with_batch_prices_the_calls_at_the_batch_price(tmp_path, capsys):
    from mlflow_genai_metrics.summarization.estimate import estimate_cost

    path = tmp_path / "rows.csv"
    rows = frame().head(2)
    rows.to_csv(path, index=False)
    assert mgm(["evaluate", str(path), "--estimate", "--prices", "0.15,0.60", "--batch"]) == 0
    online = estimate_cost(rows["text"], rows["summary"], prices=(0.15, 0.60))
    assert f"expected cost for 2 rows: ${online.cost_usd / 2:.4f}" in capsys.readouterr().out
