"""The warm interpreter that the docs test runs a page's ``mgm`` and ``python`` commands in (``warm_server.py``,
``warm_client.py``): a command run through it must behave as the same command run as a process of its own, or the
docs test would pass pages that fail for a reader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from warm_client import install_shims

WARM_SERVER = Path(__file__).resolve().with_name("warm_server.py")

SCRIPT = textwrap.dedent("""
    import os, sys
    print("argv", sys.argv[1:])
    print("cwd", os.getcwd())
    print("env", os.environ.get("WARM_TEST_VALUE"))
    print("stdin", sys.stdin.read().strip())
    print("to stderr", file=sys.stderr)
    print("pid", os.getpid())
    sys.exit(int(sys.argv[1]))
""")


@pytest.fixture
def warm(tmp_path):
    socket_folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"mgm-warm-test-{os.getpid()}"
    socket_folder.mkdir()
    bin_folder = install_shims(tmp_path / "venv" / "bin", Path(sys.executable).parent)
    env = {**os.environ, "MGM_TEST_WARM_SOCKET": str(socket_folder / "socket"), "MGM_TEST_REAL_BIN": str(Path(sys.executable).parent),
           "WARM_TEST_VALUE": "seen"}
    server = subprocess.Popen([sys.executable, str(WARM_SERVER), env["MGM_TEST_WARM_SOCKET"], "json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield bin_folder, env, server
    finally:
        server.terminate()
        server.wait(timeout=30)
        for entry in socket_folder.iterdir():
            entry.unlink()
        socket_folder.rmdir()


def test_a_script_run_warm_gets_its_arguments_folder_environment_streams_and_exit_status(warm, tmp_path):
    bin_folder, env, server = warm
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    (tmp_path / "elsewhere").mkdir()
    done = subprocess.run([str(bin_folder / "python"), str(script), "3", "extra"], input="from stdin\n", env=env,
                          cwd=tmp_path / "elsewhere", capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["argv ['3', 'extra']", f"cwd {tmp_path / 'elsewhere'}", "env seen", "stdin from stdin"]
    assert done.stderr == "to stderr\n"
    pid = int(lines[4].split()[1])
    server.terminate()
    server.wait(timeout=30)
    assert f"request script {script}" in server.stdout.read()  # it ran in the server's child, not in a process of its own
    assert pid != server.pid


def test_what_the_server_cannot_run_runs_as_the_real_program(warm, tmp_path):
    bin_folder, env, server = warm
    done = subprocess.run([str(bin_folder / "python"), "-c", "import sys; print(sys.executable); sys.exit(4)"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4
    assert done.stdout.strip() == str(Path(sys.executable).parent / "python")
    assert (bin_folder / "activate").read_text().count(str(bin_folder.parent)) >= 1  # activate puts the shims first


def test_a_signal_to_the_client_reaches_the_command_and_ends_the_client_by_it(warm, tmp_path):
    bin_folder, env, server = warm
    script = tmp_path / "wait.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    client = subprocess.Popen([str(bin_folder / "python"), str(script)], env=env, stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline().strip() == "ready"
    started = time.monotonic()
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=30) == -signal.SIGTERM
    assert time.monotonic() - started < 20


def test_a_command_whose_client_is_killed_is_ended(warm, tmp_path):
    bin_folder, env, server = warm
    script = tmp_path / "wait.py"
    script.write_text("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n")
    client = subprocess.Popen([str(bin_folder / "python"), str(script)], env=env, stdout=subprocess.PIPE, text=True)
    pid = int(client.stdout.readline())
    client.kill()  # no signal to pass on: the server sees its connection close
    client.wait(timeout=30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not ended(pid):
        time.sleep(0.05)
    assert ended(pid)


def ended(pid: int) -> bool:
    """The process is gone or a zombie (its /proc entry can go between any two reads: a read that finds it gone is
    an end too; reading it after a check for it once failed the suite)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return True
