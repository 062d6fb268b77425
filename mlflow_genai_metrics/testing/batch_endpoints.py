"""OpenAI's Files and Batches endpoints for the ``ScriptedJudgeServer``: a batch runs each input line through the
same script as the server's chat completions (logged in ``server.requests`` with their ``batch_id``).

    with ScriptedJudgeServer(script, batch_api=ScriptedBatches(polls_before_done=2, expire_batches=1)) as server: ...

- ``polls_before_done``: how many looks at a batch (``GET /v1/batches/{id}``) see it ``validating``, then
  ``in_progress``, before it runs (read at each look: raise it to hold batches, lower it to let them run);
  ``seconds_before_done``: the same in seconds since the batch was created (both must have passed);
- ``expire_batches`` and ``lines_before_expiry``: the first ``expire_batches`` batches expire having run only their
  first ``lines_before_expiry`` lines; the others go to the error file with the code ``batch_expired``;
- ``list_expired_lines``: False leaves an expired batch's undone lines out of its error file (OpenAI need not list them);
- ``fail_batches``: the first ``fail_batches`` batches fail validation (no line runs);
- ``lines_before_cancel``: a cancel (``POST /v1/batches/{id}/cancel``) of a batch still running leaves its first
  ``lines_before_cancel`` lines run, in its output file, as OpenAI's cancel keeps what ran (and bills it);
- ``edit_output``: given a batch's output file as a list of result dicts, what to write instead (a dict is written
  as JSON, a string as it is): lines broken, lost, repeated or without usage;
- a line whose script answers a ``Fault`` comes back with that HTTP status in the error file (partial failure).

The counters (``uploads``, ``created``, ``retrieves``, ``downloads``, ``cancels``) say what a client asked.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

LineAnswerer = Callable[[dict[str, Any], str], tuple[int, dict[str, Any]]]
"""How the server answers one batch line: its chat completion body and the batch's id in, the line's HTTP status and
response body out (logged as the server's chat completions are). The server hands it over, so this module needs
nothing of the server's (no import circle)."""


def _json(payload: Any, status: int = 200) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse(payload, status_code=status)


def _not_found(what: str) -> Any:
    return _json({"error": {"message": f"No such {what}", "type": "invalid_request_error", "code": None}}, 404)


def _form_file(content_type: str, body: bytes) -> tuple[dict[str, str], bytes | None]:
    """The fields and the uploaded file of a multipart/form-data body."""
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields: dict[str, str] = {}
    upload = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "file":
            upload = payload
        elif name:
            fields[str(name)] = payload.decode("utf-8")
    return fields, upload


@dataclass
class ScriptedBatches:
    """The Files and Batches API of one scripted server (see the module's docstring for the options)."""

    polls_before_done: int = 0
    seconds_before_done: float = 0.0
    expire_batches: int = 0
    lines_before_expiry: int = 0
    list_expired_lines: bool = True
    fail_batches: int = 0
    lines_before_cancel: int = 0
    edit_output: Callable[[list[dict[str, Any]]], list[Any]] | None = None
    uploads: int = 0
    created: int = 0
    retrieves: int = 0
    downloads: int = 0
    cancels: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._server_tag = uuid.uuid4().hex[:8]  # ids of one server's batches never name another server's
        self._lock = threading.Lock()
        self._looks: dict[str, int] = {}
        self._answer_line: LineAnswerer | None = None

    def routes(self, answer_line: LineAnswerer) -> list[Any]:
        """The Starlette routes; each batch line is answered by ``answer_line`` (the server's)."""
        from starlette.routing import Route

        self._answer_line = answer_line
        return [
            Route("/v1/files", self._upload, methods=["POST"]),
            Route("/v1/files/{file_id}/content", self._content, methods=["GET"]),
            Route("/v1/batches", self._create, methods=["POST"]),
            Route("/v1/batches/{batch_id}", self._retrieve, methods=["GET"]),
            Route("/v1/batches/{batch_id}/cancel", self._cancel, methods=["POST"]),
        ]

    @property
    def requests_made(self) -> int:
        """Every request to the Files and Batches endpoints."""
        return self.uploads + self.created + self.retrieves + self.downloads + self.cancels

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-scripted-{self._server_tag}-{next(self._ids)}"

    def _store_file(self, data: bytes, purpose: str) -> dict[str, Any]:
        file_id = self._new_id("file")
        self.files[file_id] = data
        return {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": f"{file_id}.jsonl", "purpose": purpose, "status": "processed"}

    # -- handlers -------------------------------------------------------------------------------------------------

    async def _upload(self, request: Any) -> Any:
        fields, upload = _form_file(request.headers.get("content-type", ""), await request.body())
        with self._lock:
            self.uploads += 1
            if upload is None:
                return _json({"error": {"message": "no file in the upload", "code": None}}, 400)
            return _json(self._store_file(upload, fields.get("purpose", "batch")))

    async def _content(self, request: Any) -> Any:
        from starlette.responses import Response

        with self._lock:
            self.downloads += 1
            data = self.files.get(request.path_params["file_id"])
        return _not_found("file") if data is None else Response(data, media_type="application/octet-stream")

    async def _create(self, request: Any) -> Any:
        asked = json.loads(await request.body())
        with self._lock:
            self.created += 1
            if asked.get("input_file_id") not in self.files:
                return _not_found("file")
            number = self.created
            batch = {
                "id": self._new_id("batch"), "object": "batch", "endpoint": asked.get("endpoint"), "errors": None,
                "input_file_id": asked["input_file_id"], "completion_window": asked.get("completion_window", "24h"),
                "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                "metadata": asked.get("metadata"), "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "_expire": number <= self.expire_batches, "_fail": number <= self.fail_batches, "_created": time.monotonic(),
            }
            self.batches[batch["id"]] = batch
            self._looks[batch["id"]] = 0
        return _json(self._shown(batch))

    async def _retrieve(self, request: Any) -> Any:
        batch_id = request.path_params["batch_id"]
        with self._lock:
            self.retrieves += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return _not_found("batch")
            self._looks[batch_id] += 1
            if batch["status"] in ("validating", "in_progress"):
                looks = self._looks[batch_id]
                if looks <= self.polls_before_done or time.monotonic() - batch["_created"] < self.seconds_before_done:
                    batch["status"] = "validating" if looks == 1 else "in_progress"
                else:
                    self._run(batch)
        return _json(self._shown(batch))

    async def _cancel(self, request: Any) -> Any:
        with self._lock:
            self.cancels += 1
            batch = self.batches.get(request.path_params["batch_id"])
            if batch is None:
                return _not_found("batch")
            if batch["status"] in ("validating", "in_progress"):
                if self.lines_before_cancel:
                    self._run(batch, lines_run=self.lines_before_cancel)
                batch["status"] = "cancelled"
        return _json(self._shown(batch))

    # -- running a batch ------------------------------------------------------------------------------------------------

    @staticmethod
    def _shown(batch: dict[str, Any]) -> dict[str, Any]:
        return {name: value for name, value in batch.items() if not name.startswith("_")}

    def _run(self, batch: dict[str, Any], lines_run: int | None = None) -> None:
        """Run the batch's lines through the server's script (under the lock), its first ``lines_run`` only when
        given (a cancel); write its output and error files."""
        if batch["_fail"]:
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": "scripted validation failure", "line": 1, "param": None}]}
            return
        lines = [json.loads(text) for text in self.files[batch["input_file_id"]].decode("utf-8").splitlines() if text.strip()]
        done, failed = [], []
        for position, line in enumerate(lines):
            if lines_run is not None and position >= lines_run:
                break
            if batch["_expire"] and position >= self.lines_before_expiry:
                if not self.list_expired_lines:
                    continue
                failed.append({"id": f"batch_req_{batch['id']}_{position}", "custom_id": line["custom_id"], "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})
                continue
            assert self._answer_line is not None, "a batch runs only behind a server's routes"
            status, body = self._answer_line(line["body"], batch["id"])
            result = {"id": f"batch_req_{batch['id']}_{position}", "custom_id": line["custom_id"],
                      "response": {"status_code": status, "request_id": f"req-{position}", "body": body}, "error": None}
            (done if status == 200 else failed).append(result)
        batch["request_counts"] = {"total": len(lines), "completed": len(done), "failed": len(failed)}
        batch["status"] = "expired" if batch["_expire"] else "completed"
        written: list[Any] = self.edit_output(done) if self.edit_output is not None else done
        for name, results in (("output_file_id", written), ("error_file_id", failed)):
            if results:
                data = "".join((result if isinstance(result, str) else json.dumps(result)) + "\n" for result in results).encode("utf-8")
                batch[name] = self._store_file(data, "batch_output")["id"]

