"""Small builders shared by the judge tests."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import SECRET_KEY, Verdict

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import JudgeRequest
from mlflow_genai_metrics.testing import ScriptedJudgeServer


def ask_about(text: str, *, version: str = "test:v1", answer_type: type = Verdict, **options: Any) -> JudgeRequest:
    return JudgeRequest(
        messages=[{"role": "system", "content": "You check claims."}, {"role": "user", "content": text}],
        answer_type=answer_type,
        prompt_version=version,
        **options,
    )


def judge_for(server: ScriptedJudgeServer, **options: Any) -> Judge:
    """A Judge on the scripted server with fast backoff, so retry tests take milliseconds."""
    options.setdefault("cache_dir", None)
    options.setdefault("backoff_initial_s", 0.01)
    options.setdefault("backoff_max_s", 0.05)
    return Judge(server.models[0], server.base_url, SECRET_KEY, **options)


def same_number(logged: float | None, expected: float) -> bool:
    """The same figure, or no figure on both sides (a NaN interval bound is not logged: MLflow stores no NaN)."""
    if math.isnan(expected):
        return logged is None or math.isnan(logged)
    return logged == pytest.approx(expected)


def same_metrics(a: dict[str, float], b: dict[str, float]) -> bool:
    """The same names and the same figures, an interval that is not there (NaN) equal to one that is not there."""
    return a.keys() == b.keys() and all(a[name] == b[name] or (math.isnan(a[name]) and math.isnan(b[name])) for name in a)
