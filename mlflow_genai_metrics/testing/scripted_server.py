"""A scripted OpenAI-compatible judge server on 127.0.0.1, for deterministic verdicts and injected faults.

Real HTTP (uvicorn + starlette, in a background thread), so the real ``openai`` client, its connection pool
and its timeouts are exercised. A *script* is a function from the incoming request to what to send back:

    def script(req: ScriptedRequest) -> Reply | Fault:
        if req.attempt == 0 and "row-7" in req.last_user_message:
            return Fault.rate_limit(retry_after_s=1)
        return Reply(json.dumps({"verdict": "yes"}))

    with ScriptedJudgeServer(script, latency_s=0.2, slots=32) as server:
        Judge("scripted", server.base_url, "any-key")

Every request is logged (``server.requests``): purpose tag, status, tokens, when it arrived and left.
Token counts are whitespace-separated words: deterministic, and what the benchmarks compare ratios with.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .batch_endpoints import ScriptedBatches
from .script import Fault, LoggedRequest, Reply, Script, ScriptedRequest, count_tokens

try:  # the `testing` extra: only a started server needs them; the records (script.py) import without them
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as missing:
    _SERVER_DEPENDENCIES_MISSING: ImportError | None = missing
    Response = object  # the base of _Disconnect, which nothing builds while the server cannot start
else:
    _SERVER_DEPENDENCIES_MISSING = None


def _require_server_dependencies() -> None:
    """Starting the server without the `testing` extra is an ImportError that says what to install."""
    if _SERVER_DEPENDENCIES_MISSING is not None:
        raise ImportError(
            f"the scripted judge server needs starlette and uvicorn ({_SERVER_DEPENDENCIES_MISSING}): "
            'pip install "mlflow_genai_metrics[testing]"'
        ) from _SERVER_DEPENDENCIES_MISSING


class _Disconnect(Response):
    """Promise a long body, send part of it, then drop the connection."""

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[override]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")]})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-cut", "choi', "more_body": True})
        raise ConnectionAbortedError("scripted disconnect mid-reply")


@dataclass
class ScriptedJudgeServer:
    """Start with ``with ScriptedJudgeServer(script) as server:``; ``server.base_url`` ends in ``/v1``.

    - ``latency_s``: added to every reply (the benchmarks' fixed endpoint latency);
    - ``slots``: at most this many requests are served at once, the rest queue (an endpoint's concurrency);
    - ``reject_response_formats``: answer HTTP 500 to these ``response_format`` types; ``("json_schema",)`` is
      what llama-cpp-python's server does;
    - ``api_key``: when set, any other bearer token gets 401, echoing part of the key as OpenAI does;
    - ``models``: the ids ``/v1/models`` lists; a request for any other model gets 404;
    - ``list_models``: False answers 404 to ``/v1/models``, as endpoints without a listing do;
    - ``forward_to``: a base URL (e.g. a ``LocalModelServer``'s) to pass every request on to, recording it, instead
      of answering from the script: the recording endpoint the benchmarks put in front of a real model;
    - ``prefix_cache_block``: emulate a prompt cache with blocks of this many tokens (vLLM's are 16): a prompt's
      leading whole blocks that an earlier prompt began with are reported as cached, in the reply's
      ``usage.prompt_tokens_details.cached_tokens`` and in ``LoggedRequest.cached_tokens`` (None: no cache, and no
      ``prompt_tokens_details`` in replies);
    - ``batch_api``: OpenAI's Files and Batches endpoints, their delays, partial failures and expiry
      (``ScriptedBatches``); each batch line runs through ``script`` and is logged in ``requests``.

    ``model_listings`` counts the ``/v1/models`` requests (they are not in ``requests``).
    """

    script: Script | None = None
    latency_s: float = 0.0
    slots: int | None = None
    reject_response_formats: tuple[str, ...] = ()
    api_key: str | None = None
    models: tuple[str, ...] = ("scripted-judge",)
    forward_to: str | None = None
    list_models: bool = True
    prefix_cache_block: int | None = None
    batch_api: ScriptedBatches = field(default_factory=ScriptedBatches)
    requests: list[LoggedRequest] = field(default_factory=list)
    max_in_flight: int = 0
    model_listings: int = 0

    def __post_init__(self) -> None:
        self._seen: Counter[str] = Counter()
        self._cached_blocks: set[bytes] = set()  # digests of every block-aligned prompt prefix seen so far
        self._in_flight = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._slots: asyncio.Semaphore | None = None
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedJudgeServer:
        _require_server_dependencies()
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                *self.batch_api.routes(self._batch_line),
            ]
        )
        # IPPROTO_TCP named explicitly: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP,
        # and with Nagle on, every reply after the first on a kept-alive connection waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="critical", access_log=False, timeout_keep_alive=30, backlog=4096)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="scripted-judge")
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted judge server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedJudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the tests read --------------------------------------------------------------------------

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def count(self, *, status: int | None = None, purpose: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (status is None or r.status == status) and (purpose is None or r.purpose == purpose)
            )

    # -- handlers -------------------------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        with self._lock:
            self.model_listings += 1
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        if self.forward_to is not None:
            status, payload = await _get(f"{self.forward_to.rstrip('/')}/models")
            return Response(payload, status_code=status, media_type="application/json")
        if not self.list_models:
            return _error(404, "Not Found", None)
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "scripted"} for m in self.models]})

    def _refused_key(self, request: Request) -> Response | None:
        """401 for a bearer token other than ``api_key``, echoing part of it as OpenAI does."""
        if self.api_key is None:
            return None
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if given == self.api_key:
            return None
        shown = f"{given[:5]}...{given[-4:]}" if len(given) > 12 else "***"
        return _error(401, f"Incorrect API key provided: {shown}.", "invalid_api_key")

    async def _chat(self, request: Request) -> Response:
        if self._slots is None and self.slots:
            self._slots = asyncio.Semaphore(self.slots)
        if self._slots is None:
            return await self._serve(request)
        async with self._slots:
            return await self._serve(request)

    async def _serve(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return JSONResponse({"error": {"message": "request body is not JSON"}}, status_code=400)
        scripted, entry = self._log(body)
        entry.client_port = request.client.port if request.client else None
        try:
            response = await self._respond(request, body, scripted, entry)
        finally:
            with self._lock:
                self._in_flight -= 1
                entry.finished = time.monotonic()
        return response

    def _log(self, body: dict[str, Any], batch_id: str | None = None) -> tuple[ScriptedRequest, LoggedRequest]:
        """Log a chat completion's arrival (counted in flight until its caller ends it); what the script sees."""
        fingerprint = json.dumps([body.get("messages"), body.get("response_format")], sort_keys=True)
        with self._lock:
            attempt = self._seen[fingerprint]
            self._seen[fingerprint] += 1
            index = len(self.requests)
            entry = LoggedRequest(
                index=index,
                body=body,
                purpose=_purpose(body),
                status=0,
                response_format=(body.get("response_format") or {}).get("type"),
                prompt_tokens=sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", [])),
                completion_tokens=0,
                arrived=time.monotonic(),
                batch_id=batch_id,
            )
            entry.cached_tokens = self._cache_prefix(body)
            self.requests.append(entry)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return ScriptedRequest(body=body, index=index, attempt=attempt), entry

    def _cache_prefix(self, body: dict[str, Any]) -> int:
        """The emulated prompt cache (call under the lock): how many leading tokens, in whole blocks, an earlier
        prompt began with; this prompt's blocks are remembered for the next."""
        if not self.prefix_cache_block:
            return 0
        words = [word for m in body.get("messages", []) for word in str(m.get("content", "")).split()]
        block, digest, cached, hit = self.prefix_cache_block, hashlib.sha256(), 0, True
        for start in range(0, len(words) - block + 1, block):
            digest.update("\0".join(words[start : start + block]).encode() + b"\1")
            key = digest.copy().digest()
            hit = hit and key in self._cached_blocks
            cached += block if hit else 0
            self._cached_blocks.add(key)
        return cached

    async def _forward(self, request: Request, *, raw_body: bytes, entry: LoggedRequest) -> Response:
        headers = {"Content-Type": "application/json", "Authorization": request.headers.get("authorization", "")}
        status, payload = await _post(f"{self.forward_to.rstrip('/')}/chat/completions", raw_body, headers)
        entry.status = status
        try:
            answer = json.loads(payload)
            usage = answer.get("usage") or {}
            # The real server's token counts replace the word counts.
            entry.prompt_tokens = int(usage.get("prompt_tokens", entry.prompt_tokens))
            entry.completion_tokens = int(usage.get("completion_tokens", 0))
            entry.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        except (ValueError, AttributeError):
            pass
        return Response(payload, status_code=status, media_type="application/json")

    async def _respond(self, request: Request, body: dict, scripted: ScriptedRequest, entry: LoggedRequest) -> Response:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        refused = self._refused_key(request)
        if refused is not None:
            entry.status = 401
            return refused
        if self.forward_to is not None:
            return await self._forward(request, raw_body=json.dumps(body).encode(), entry=entry)
        outcome = self._outcome(body, scripted)
        if isinstance(outcome, Fault):
            entry.status = -1 if outcome.kind == "disconnect" else outcome.status
            if outcome.kind == "disconnect":
                return _Disconnect()
            if outcome.kind == "raw":
                return Response(outcome.body, status_code=outcome.status, media_type=outcome.content_type)
            headers = {"Retry-After": f"{outcome.retry_after_s:g}"} if outcome.retry_after_s is not None else None
            return _error(outcome.status, outcome.message, outcome.code, headers=headers)
        if outcome.delay_s:
            await asyncio.sleep(outcome.delay_s)
        completion = JSONResponse(self._completion(body, scripted, outcome, entry))
        if outcome.trickle_s:
            return StreamingResponse(_trickle(completion.body, outcome.trickle_s), media_type="application/json")
        return completion

    def _batch_line(self, body: dict[str, Any], batch_id: str) -> tuple[int, dict[str, Any]]:
        """One batch line through the script, logged as a chat completion is (``ScriptedBatches``' ``LineAnswerer``)."""
        scripted, entry = self._log(body, batch_id)
        try:
            outcome = self._outcome(body, scripted)
            if not isinstance(outcome, Fault):
                return 200, self._completion(body, scripted, outcome, entry)
            status = outcome.status if outcome.kind == "status" or outcome.kind == "rate_limit" else 500
            entry.status = status
            return status, {"error": {"message": outcome.message, "type": "scripted_error", "param": None, "code": outcome.code}}
        finally:
            with self._lock:
                self._in_flight -= 1
                entry.finished = time.monotonic()

    def _outcome(self, body: dict[str, Any], scripted: ScriptedRequest) -> Reply | Fault:
        """What the server answers a chat completion: the script's reply or fault, or its own refusal."""
        if body.get("model") not in self.models:
            return Fault("status", status=404, message=f"The model `{body.get('model')}` does not exist.", code="model_not_found")
        if scripted.response_format_type in self.reject_response_formats:
            return Fault.server_error(500, f"response_format type {scripted.response_format_type} is not supported")
        return self.script(scripted)

    def _completion(self, body: dict[str, Any], scripted: ScriptedRequest, outcome: Reply, entry: LoggedRequest) -> dict[str, Any]:
        """The chat completion body of a scripted reply (its tokens logged)."""
        entry.status = 200
        entry.completion_tokens = count_tokens(outcome.content)
        usage: dict[str, Any] = {
            "prompt_tokens": entry.prompt_tokens,
            "completion_tokens": entry.completion_tokens,
            "total_tokens": entry.prompt_tokens + entry.completion_tokens,
        }
        if self.prefix_cache_block:
            usage["prompt_tokens_details"] = {"cached_tokens": entry.cached_tokens}
        return {
            "id": f"chatcmpl-scripted-{scripted.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": outcome.model or body.get("model"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": outcome.content}, "finish_reason": outcome.finish_reason}
            ],
            "usage": usage,
        }


async def _trickle(body: bytes, interval_s: float):
    for position in range(len(body)):
        yield body[position : position + 1]
        await asyncio.sleep(interval_s)


async def _post(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    return await _send(url, data=data, headers=headers, method="POST")


async def _get(url: str) -> tuple[int, bytes]:
    return await _send(url, data=None, headers={}, method="GET")


async def _send(url: str, *, data: bytes | None, headers: dict[str, str], method: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    def send() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers, method=method), timeout=600) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    return await asyncio.to_thread(send)


def _purpose(body: dict[str, Any]) -> str:
    """The answer schema's name tells what a request was for (claims, verification, ...)."""
    fmt = body.get("response_format") or {}
    if isinstance(fmt, dict):
        named = (fmt.get("json_schema") or {}).get("name")
        if named:
            return str(named)
        schema = fmt.get("schema") or {}
        if isinstance(schema, dict) and schema.get("title"):
            return str(schema["title"])
    return "text"


def _error(status: int, message: str, code: str | None, headers: dict[str, str] | None = None) -> Response:
    payload = {"error": {"message": message, "type": "scripted_error", "param": None, "code": code}}
    return JSONResponse(payload, status_code=status, headers=headers)

