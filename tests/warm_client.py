"""The client of ``warm_server.py``, installed as ``mgm`` and ``python`` in a test's ``bin`` folder
(``install_shims``): ``mgm ARGS``, ``python SCRIPT.py ARGS`` and ``python -m MODULE ARGS`` run in a child of the
warm server named by ``$MGM_TEST_WARM_SOCKET``, with this process's standard streams, environment and folder, and
this process ends with the child's exit status (SIGINT, SIGTERM and SIGHUP are passed on to it). Any other command
line, or no server named, runs the real program (``$MGM_TEST_REAL_BIN``) in this process's place.

Standard library only, and run with ``-S``: the shim itself costs a few milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

SOCKET_VARIABLE = "MGM_TEST_WARM_SOCKET"
REAL_BIN_VARIABLE = "MGM_TEST_REAL_BIN"
SHIMMED = ("mgm", "python", "python3", "python3.11")
HEADER = struct.Struct("!I")
CONNECT_TIMEOUT_S = 300  # the server imports for 5-20 s before it listens, longer on a loaded machine


def request_for(name: str, args: list[str]) -> dict | None:
    """What the warm server runs for this command line (``mgm``, a script, one of the package's modules), or None
    where only the real program will do (``python -c``, ``-m pytest``, interpreter options)."""
    real_bin = os.environ[REAL_BIN_VARIABLE]
    if name == "mgm":
        return {"kind": "mgm", "target": os.path.join(real_bin, "mgm"), "args": args}
    if args[:1] == ["-m"] and len(args) > 1 and args[1].split(".")[0] == "mlflow_genai_metrics":
        return {"kind": "module", "target": args[1], "args": args[2:]}
    if args and args[0].endswith(".py") and os.path.isfile(args[0]):
        return {"kind": "script", "target": args[0], "args": args[1:]}
    return None


def connect(path: str) -> socket.socket:
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
            return connection
        except (FileNotFoundError, ConnectionRefusedError):
            connection.close()
            if time.monotonic() > deadline:
                raise SystemExit(f"warm_client: no warm server at {path} after {CONNECT_TIMEOUT_S} s")
            time.sleep(0.05)


def run(request: dict, path: str) -> int:
    connection = connect(path)
    body = json.dumps({**request, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(connection, [HEADER.pack(len(body))], [0, 1, 2])
    connection.sendall(body)
    reader = connection.makefile("r", encoding="utf-8")
    child: list[int] = []

    def pass_on(signum, _frame):
        if child:
            os.kill(child[0], signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, pass_on)
    for line in reader:
        word, _, value = line.strip().partition(" ")
        if word == "pid":
            child.append(int(value))
        elif word == "exit":
            return int(value)
        else:
            raise SystemExit(f"warm_client: the warm server says: {line.strip()}")
    raise SystemExit("warm_client: the warm server ended before the command did")


def main() -> None:
    name, args = os.path.basename(sys.argv[0]), sys.argv[1:]
    request = request_for(name, args)
    path = os.environ.get(SOCKET_VARIABLE)
    if request is None or not path:
        real = os.path.join(os.environ[REAL_BIN_VARIABLE], name)
        os.execv(real, [real, *args])
    status = run(request, path)
    if status < 0:  # ended by a signal: end by the same one
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


def install_shims(folder: Path, real_bin: Path) -> Path:
    """``folder`` as a ``bin`` folder: the shims for ``SHIMMED``, a link to ``real_bin``'s entry for everything else;
    returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = f"#!{sys.executable} -sSE\n" + Path(__file__).read_text()
    for entry in real_bin.iterdir():
        if entry.name.startswith("activate"):  # `source .venv/bin/activate` puts this folder first on PATH, not real_bin
            (folder / entry.name).write_text(entry.read_text().replace(str(real_bin.parent), str(folder.parent)))
        elif entry.name not in SHIMMED:
            os.symlink(entry, folder / entry.name)
    for name in SHIMMED:
        (folder / name).write_text(shim)
        (folder / name).chmod(0o755)
    return folder


if __name__ == "__main__":
    main()
