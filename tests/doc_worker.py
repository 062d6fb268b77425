"""One page's Python interpreter for the docs test: ``python doc_worker.py FD`` reads requests from the socket FD,
one JSON line each (``code``, ``filename``, ``line``, ``env``, ``cwd``, ``output``), runs each block in one shared
namespace, as a reader's interpreter session would, and answers one JSON line (``ok``, ``exception``, ``error``).

Everything the block writes, its subprocesses' output included, goes to the file ``output`` names (file
descriptors 1 and 2 are pointed at it while the block runs).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback


def run(request: dict, namespace: dict) -> dict:
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # Blank lines first, so that tracebacks give the line numbers of the Markdown page.
    source = "\n" * request["line"] + request["code"]
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(request["output"], "wb") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    try:
        exec(compile(source, request["filename"], "exec"), namespace)
        return {"ok": True, "exception": None, "error": ""}
    except BaseException as exc:  # noqa: BLE001 - a block's failure, whatever it is, is the answer
        return {"ok": False, "exception": type(exc).__name__, "error": traceback.format_exc()}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    namespace: dict = {"__name__": "__main__"}
    reader = channel.makefile("r", encoding="utf-8")
    for line in reader:
        answer = run(json.loads(line), namespace)
        channel.sendall((json.dumps(answer) + "\n").encode())


if __name__ == "__main__":
    main()
