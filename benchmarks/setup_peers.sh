#!/usr/bin/env bash
# The peers (DeepEval, Ragas, MLflow's built-in judges) live in their own virtual environment, never as
# dependencies of this package: benchmarks/bench_cost.py runs them there, side by side with ours.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv-peers/bin/python ] || "$PYTHON" -m venv .venv-peers
.venv-peers/bin/python -m pip install --quiet --upgrade pip
# Ragas imports langchain_community.chat_models.vertexai, which langchain-community 0.4 removed.
.venv-peers/bin/python -m pip install --quiet deepeval ragas "mlflow>=3.1" "langchain-community<0.4"
.venv-peers/bin/python -c "import deepeval, ragas, mlflow; print('peers:', 'deepeval', deepeval.__version__, '| ragas', ragas.__version__, '| mlflow', mlflow.__version__)"
