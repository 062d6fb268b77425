"""A warm interpreter for the tests that run the project's programs as a reader does (the docs pages, the examples,
the benchmarks): ``python warm_server.py SOCKET [MODULE ...]`` imports the package and what its commands use (MLflow, scipy,
openai, ...: 5-9 s of every ``mgm`` process on this machine; or the MODULEs named), then forks one child per request that
``warm_client.py`` sends on the Unix socket SOCKET. The child takes the client's standard input, output and error,
its environment, folder and arguments, runs ``mgm ARGS``, ``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` and
ends as that program would (its exit status goes back to the client).

Each child starts from the same freshly imported state, so nothing one command does reaches the next; only the
imports are shared. The server forks from one thread (no thread runs while it forks) and reaps children with a
non-blocking wait; a command whose client goes away (killed) gets SIGTERM; SIGTERM stops the server and its
children.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import sys
import threading

PRELOAD = (
    "mlflow_genai_metrics", "mlflow_genai_metrics.cli", "mlflow_genai_metrics.tracking", "mlflow_genai_metrics.tracking.genai",
    "mlflow_genai_metrics.tracking.evaluate", "mlflow_genai_metrics.meta_evaluation", "mlflow_genai_metrics.plots",
    "mlflow_genai_metrics.generate", "mlflow_genai_metrics.reference", "mlflow_genai_metrics.study",
    "mlflow", "mlflow.genai", "mlflow.genai.evaluation.harness", "mlflow.store.tracking.sqlalchemy_store", "mlflow.tracing",
    "mlflow.pyfunc", "mlflow.server", "databricks.sdk", "scipy.stats", "openai", "pandas", "matplotlib.pyplot", "nltk",
    "sklearn.metrics", "rouge_score.rouge_scorer", "sacrebleu", "alembic", "git", "pygments.lexers",
)
HEADER = struct.Struct("!I")


def preload(names: tuple[str, ...] = PRELOAD) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module this checkout lacks: its importer pays for it, as without the server
            pass
    if threading.active_count() != 1:  # forking with a thread running could copy a lock it holds
        raise RuntimeError(f"importing {names} started threads: {threading.enumerate()}")


def receive(connection: socket.socket) -> tuple[dict, list[int]]:
    header, fds, _flags, _address = socket.recv_fds(connection, HEADER.size, 3)
    if len(header) != HEADER.size or len(fds) != 3:
        raise ConnectionError("a request without its header and three file descriptors")
    (size,) = HEADER.unpack(header)
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the request ended early")
        body += chunk
    return json.loads(body), fds


def become(request: dict, fds: list[int]) -> None:
    """In the child: the client's descriptors, environment and folder, then its program; never returns (the
    program's SystemExit, or exception, ends the interpreter as it would end a process of its own)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    kind, target, args = request["kind"], request["target"], request["args"]
    if kind == "mgm":
        from mlflow_genai_metrics.cli import main

        sys.argv = [target, *args]
        sys.path.insert(0, os.path.dirname(target))
        sys.exit(main())
    if kind == "script":
        sys.argv = [target, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
        sys.exit(0)
    if kind == "module":
        sys.argv = [target, *args]  # run_module puts the module's file in argv[0]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
        sys.exit(0)
    raise SystemExit(f"warm_server: unknown kind {kind!r}")


def receive_nothing(connection: socket.socket) -> bytes:
    """What a client sent after its request (nothing while it lives; b"" once it is gone)."""
    try:
        return connection.recv(1)
    except OSError:
        return b""


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # the path appears only when the server answers
    listener.listen(16)
    children: dict[int, socket.socket] = {}
    gone: set[int] = set()  # children whose client went away
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping:
        try:
            readable, _, _ = select.select([listener, *(c for pid, c in children.items() if pid not in gone)], [], [], 0.05)
        except InterruptedError:
            readable = []
        for pid, connection in list(children.items()):
            if connection in readable and not receive_nothing(connection):  # its client is gone: so goes the command
                gone.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection = children.pop(pid, None)
            gone.discard(pid)
            if connection is not None:
                try:
                    connection.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass
                connection.close()
        if listener not in readable:
            continue
        connection, _ = listener.accept()
        try:
            request, fds = receive(connection)
        except (OSError, ValueError, ConnectionError) as exc:
            connection.sendall(f"error {exc}\n".encode())
            connection.close()
            continue
        print(f"request {request['kind']} {request['target']} {request['args'][:3]}", flush=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            for other in children.values():
                other.close()
            connection.close()
            become(request, fds)
        for fd in fds:
            os.close(fd)
        children[pid] = connection
        try:
            connection.sendall(f"pid {pid}\n".encode())
        except OSError:
            pass
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    listener.close()
    os.unlink(path)


def main() -> None:
    sys.path.pop(0)  # this file's folder: the programs it runs see the path they would see as processes of their own
    preload(tuple(sys.argv[2:]) or PRELOAD)
    serve(sys.argv[1])


if __name__ == "__main__":
    main()
