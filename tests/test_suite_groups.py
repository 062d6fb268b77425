"""The suite's xdist groups work: under ``--dist loadgroup`` the tests of one ``xdist_group`` run on one worker (so one
Spark session, one ``mlflow ui`` and each module's costly fixture are made once: ``conftest.py``), while the other
tests still spread over both workers. pytest 9 does not see pytest-xdist 3.8's groups, hence ``pytest<9``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Grouped and free tests interleaved, so that without the groups load scheduling would split the grouped ones too.
PROBE = '''
import json, os, pytest
from pathlib import Path

def _record(name):
    Path(os.environ["MGM_GROUP_PROBE"], name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))

@pytest.mark.parametrize("k", range(12))
def test_probe(k):
    _record(f"free-{k}")

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("k", range(12))
def test_grouped(k):
    _record(f"grouped-{k}")
'''


def test_one_group_runs_on_one_worker_and_the_rest_on_both(tmp_path):
    (tmp_path / "probe").mkdir()
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
         str(tmp_path / "test_probe.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MGM_GROUP_PROBE": str(tmp_path / "probe"), "PYTEST_ADDOPTS": ""},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = {path.name: path.read_text() for path in Path(tmp_path / "probe").iterdir()}
    assert len(workers) == 24, json.dumps(workers)
    grouped = {w for name, w in workers.items() if name.startswith("grouped-")}
    free = {w for name, w in workers.items() if name.startswith("free-")}
    assert free == {"gw0", "gw1"}, free  # the free tests did spread: the run was parallel
    assert len(grouped) == 1, f"the group's tests ran on {sorted(grouped)}"
