"""OpenAI batch files: the judge's calls written as a batch input JSONL, and a batch's output and error JSONL read
back into what the online transport gives for each call.

Only files, no HTTP: OpenAI's Batches API takes the input file as an upload, and vLLM's ``run_batch`` takes the
same file from its command line (``vllm run_batch -i input.jsonl -o output.jsonl --model ...``). Each line's
``body`` is exactly the chat completion the online transport sends, and its ``custom_id`` is the SHA-256 of that
body and the endpoint, so one call has one id in every run (what resuming a batch by its contents relies on).

An output line answered with HTTP 200 becomes the ``CallResult`` the online path would read from the same
completion (``read_completion``, usage and cached tokens included); any other line becomes the call's
``CallFailed``: its HTTP status sorted as online (400 ``bad_request``, 429 ``rate_limited``, 5xx ``server_error``),
``batch_expired`` for a line the completion window left undone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from ..errors import is_mode_rejection, row_error_kind
from ..httpx_lib import Response, placeholder_request
from ..records import JudgeError
from ..replies import BadReply, CallResult, read_completion
from ..settings import JudgeSettings
from ..transport import Call, CallFailed

BATCH_ENDPOINT = "/v1/chat/completions"

LineOutcome = CallResult | CallFailed  # what one line of a batch gave its call


def completion_body(settings: JudgeSettings, call: Call) -> dict[str, Any]:
    """The chat completion body the online transport sends for ``call`` (model, messages, temperature, seed,
    max_tokens, response_format; what is unset left out, as the ``openai`` client leaves it out)."""
    body: dict[str, Any] = {"model": settings.model, "messages": call.messages, "temperature": settings.temperature}
    optional = {"seed": call.seed, "max_tokens": call.max_tokens, "response_format": call.response_format}
    body.update((name, value) for name, value in optional.items() if value is not None)
    return body


@dataclass(frozen=True)
class BatchLine:
    """One request of a batch input file."""

    custom_id: str
    body: dict[str, Any]

    def json(self) -> str:
        return json.dumps({"custom_id": self.custom_id, "method": "POST", "url": BATCH_ENDPOINT, "body": self.body},
                          ensure_ascii=False, separators=(",", ":"))


def batch_line(settings: JudgeSettings, call: Call) -> BatchLine:
    """The batch line for ``call``; its id is the same for the same body at the same endpoint in every run."""
    body = completion_body(settings, call)
    canonical = json.dumps([settings.cache_endpoint, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return BatchLine("mgm-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:40], body)


def write_input(lines: Iterable[BatchLine], path: str | Path | None = None) -> bytes:
    """The batch input JSONL of ``lines`` (one request per line), also written to ``path`` when given."""
    data = "".join(line.json() + "\n" for line in lines).encode("utf-8")
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _line_response(status: int, body: Any) -> Response:
    """A batch line's response as the HTTP response ``read_completion`` and ``openai``'s errors read: the line's
    status and body, with the batch endpoint's request (no credentials: the batch file holds none)."""
    return Response(status, content=json.dumps(body).encode("utf-8"), headers={"content-type": "application/json"},
                    request=placeholder_request(BATCH_ENDPOINT))


def _status_failure(status: int, body: Any, redact: Callable[[str], str]) -> CallFailed:
    """A line the endpoint answered with an HTTP error status: the error the online path gives that status."""
    response = _line_response(status, body)
    message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    exc = openai.APIStatusError(redact(str(message or f"HTTP {status} in the batch")), response=response, body=body)  # type: ignore[arg-type]
    error = JudgeError(kind=row_error_kind(exc), message=str(exc), status_code=status)
    return CallFailed(error, rejects_mode=is_mode_rejection(exc))


def _line_outcome(line: dict[str, Any], redact: Callable[[str], str]) -> LineOutcome:
    response = line.get("response")
    if isinstance(response, dict) and response.get("status_code") is not None:
        body = response.get("body")
        try:
            status = int(response["status_code"])
        except (TypeError, ValueError):  # the line ran (it has a response) but says nothing readable of how
            error = JudgeError(kind="bad_reply", message=redact(f"the batch line's status_code is not a number: {response['status_code']!r}"))
            return CallFailed(error, rejects_mode=False)
        if status != 200:
            return _status_failure(status, body, redact)
        try:
            return read_completion(_line_response(200, body), redact)
        except BadReply as exc:
            error = JudgeError(kind="bad_reply", message=redact(str(exc)), raw=exc.excerpt)
            return CallFailed(error, rejects_mode=False)
    error = line.get("error") if isinstance(line.get("error"), dict) else {}
    code, message = str(error.get("code") or "batch_failed"), redact(str(error.get("message") or "no response in the batch"))
    kind = "batch_expired" if code == "batch_expired" else "batch_failed"
    return CallFailed(JudgeError(kind=kind, message=f"{code}: {message}"), rejects_mode=False)


def read_output(*files: bytes | str | Path | None, redact: Callable[[str], str] = str,
                unreadable: list[str] | None = None) -> dict[str, LineOutcome]:
    """Each ``custom_id`` of a batch's output and error files (bytes, or paths; None for a file the batch did not
    make) and what its line gave: a ``CallResult`` or a ``CallFailed``. ``redact`` removes credentials from messages.
    A line that is not JSON, or has no ``custom_id``, belongs to no request: with ``unreadable`` (a list) it is
    described there and skipped, the other lines read (the requests it held get no result, for the caller to say
    so); without it, it raises ``ValueError``: the file is not a batch's."""
    outcomes: dict[str, LineOutcome] = {}
    for data in files:
        if data is None:
            continue
        if isinstance(data, (str, Path)):
            data = Path(data).read_bytes()
        for number, text in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                custom_id = line["custom_id"]
            except (ValueError, KeyError, TypeError):
                described = f"line {number} of a batch output is not a batch result: {redact(text[:120])!r}"
                if unreadable is None:
                    raise ValueError(described) from None
                unreadable.append(described)
                continue
            outcomes[str(custom_id)] = _line_outcome(line, redact)
    return outcomes
