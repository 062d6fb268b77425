"""The suite's xdist groups work: under ``--dist loadgroup`` the tests of one ``xdist_group`` run on one worker (so one
Spark session, one ``mlflow ui`` and each module's costly fixture are made once: ``conftest.py``), while the other
tests still spread over both workers. pytest 9 does not see pytest-xdist 3.8's groups, hence ``pytest<9``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Free tests and tests grouped two ways, interleaved, so that without the groups load scheduling would split the
# grouped ones too: by an explicit mark, and by the suite's own hook (``conftest.pytest_collection_modifyitems``,
# loaded from this suite's conftest) for the tests that ask for the fixtures it groups by.
PROBE = '''
import os, time, pytest
from pathlib import Path

def _record(name):
    Path(os.environ["MGM_GROUP_PROBE"], name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))

@pytest.fixture(scope="module")
def uninterrupted():
    return "made once per worker"

@pytest.fixture(scope="session")
def spark():
    return "a session"

@pytest.mark.parametrize("k", range(12))
def test_probe(k):
    _record(f"free-{k}")
    time.sleep(0.2)  # a worker busy on a free test leaves the next ones to the other (instant tests may all go to one)

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("k", range(12))
def test_grouped(k):
    _record(f"grouped-{k}")

@pytest.mark.parametrize("k", range(12))
def test_module_fixture(k, uninterrupted):
    _record(f"module-{k}")

@pytest.mark.parametrize("k", range(12))
def test_session_fixture(k, spark):
    _record(f"session-{k}")
'''

CONFTEST = '''
import importlib.util
import sys
spec = importlib.util.spec_from_file_location("mgm_suite_conftest", {conftest!r})
suite = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = suite  # as an import would: a dataclass looks its module up there
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems
'''


def test_one_group_runs_on_one_worker_and_the_rest_on_both(tmp_path):
    (tmp_path / "probe").mkdir()
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "conftest.py").write_text(CONFTEST.format(conftest=str(Path(__file__).with_name("conftest.py"))))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MGM_GROUP_PROBE": str(tmp_path / "probe"), "PYTEST_ADDOPTS": "", "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = {path.name: path.read_text() for path in Path(tmp_path / "probe").iterdir()}
    assert len(workers) == 48, json.dumps(workers)
    ran_on = {kind: {w for name, w in workers.items() if name.startswith(f"{kind}-")} for kind in ("free", "grouped", "module", "session")}
    assert ran_on["free"] == {"gw0", "gw1"}, ran_on  # the free tests did spread: the run was parallel
    for kind in ("grouped", "module", "session"):
        assert len(ran_on[kind]) == 1, f"the {kind} group's tests ran on {sorted(ran_on[kind])}"

