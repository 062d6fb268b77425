"""Running a peer (DeepEval, MLflow's judge, Ragas) from a benchmark: ``peers/run_peer.py`` in the peers' own
virtual environment (``.venv-peers``, made by ``setup_peers.sh``), never imported into ours."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
RUN_PEER = ROOT / "benchmarks" / "peers" / "run_peer.py"
PEERS = ["deepeval", "deepeval-no-reason", "mlflow-summarization", "ragas-faithfulness"]
MISSING = f"peers skipped: {PEERS_PYTHON} is missing (run benchmarks/setup_peers.sh)"


def write_rows(path: Path, sources: Iterable[str], summaries: Iterable[str], ids: Iterable[str] | None = None) -> Path:
    """The JSONL ``run_peer.py`` reads: one {"id", "source", "summary"} per row."""
    sources, summaries = list(sources), list(summaries)
    ids = list(ids) if ids is not None else [str(i) for i in range(len(sources))]
    path.write_text("".join(json.dumps({"id": str(i), "source": s, "summary": m}) + "\n" for i, s, m in zip(ids, sources, summaries)))
    return path


def run_peer(system: str, rows_file: Path, base_url: str, model: str, *options: str, timeout_s: float = 3600) -> dict:
    """Run one peer over the rows; its status line ({"errors", "error_sample", "wall_s", "cpu_s"...}), or
    {"errors": "did not run", ...} with the end of its stderr when it printed none."""
    done = subprocess.run(
        [str(PEERS_PYTHON), str(RUN_PEER), system, str(rows_file), "--base-url", base_url, "--model", model, *options],
        capture_output=True, text=True, timeout=timeout_s,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"errors": "did not run", "error_sample": done.stderr[-400:]}
