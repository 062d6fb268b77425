#!/usr/bin/env bash
# The peers (DeepEval, Ragas, MLflow's built-in judges) live in their own virtual environment, never as
# dependencies of this package: benchmarks/bench_cost.py runs them there, side by side with ours.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv-peers/bin/python ] || "$PYTHON" -m venv .venv-peers
.venv-peers/bin/python -m pip install --quiet --upgrade pip
# The versions measured in docs/benchmarks.md, pinned so a peer's release cannot change the figures or break the
# smoke tests unnoticed. Ragas imports langchain_community.chat_models.vertexai, which langchain-community 0.4 removed.
# ppi-python (the prediction-powered inference paper's authors): people.py's closed forms are checked against it
# (tests/test_people.py); too heavy for the package itself (numba, statsmodels, a Google-Drive downloader).
.venv-peers/bin/python -m pip install --quiet "deepeval==4.3.1" "ragas==0.4.3" "mlflow==3.17.2" "langchain-community==0.3.31" \
  "ppi-python==0.2.3"
.venv-peers/bin/python -c "import deepeval, ragas, mlflow, ppi_py; print('peers:', 'deepeval', deepeval.__version__, '| ragas', ragas.__version__, '| mlflow', mlflow.__version__, '| ppi-python')"
