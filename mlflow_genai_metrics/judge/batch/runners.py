"""Running one batch file: through OpenAI's Files and Batches API (``ApiBatches``), or by writing it to a folder for a
command such as vLLM's ``run_batch`` (``CommandBatches``).

Both do two things: ``submit`` the lines (returning the batch's id) and ``wait`` for a batch to end (returning each
line's outcome, ``files.read_output``, as a ``BatchRead``). A batch that failed or was cancelled raises
``BatchEnded``, with the lines a cancelled batch ran before it stopped; one the endpoint no longer knows raises
``BatchGone`` (its lines are submitted again). An expired batch returns what it completed; the lines it left undone
come back as ``batch_expired`` (or not at all: ``BatchRead.expired``), for the caller to ask again. A line of the
output that is not a batch result is set aside (``BatchRead.unreadable``), never the end of the other lines.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shlex
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import openai

from ..errors import config_error, is_config_error, unreachable_error
from ..models import check_served_model
from ..runner import run_sync, started_loop
from ..settings import JudgeSettings
from .files import BATCH_ENDPOINT, BatchLine, LineOutcome, read_output, write_input
from .options import BatchFilesWritten, BatchOptions

log = logging.getLogger(__name__)

_RUNNING = ("validating", "in_progress", "finalizing", "cancelling")


@dataclass
class BatchRead:
    """What a batch's files gave: each answered line's outcome; ``expired`` when its window ended (a line without a
    result never ran); the lines of its files that are no batch result (``files.read_output``)."""

    outcomes: dict[str, LineOutcome]
    expired: bool = False
    unreadable: list[str] = field(default_factory=list)


class BatchEnded(Exception):
    """The batch failed (its file was refused) or was cancelled: ``ran`` holds the lines a cancelled batch ran before
    it stopped (OpenAI keeps them in its output file, and bills them); no other line of it was answered."""

    def __init__(self, batch_id: str, status: str, message: str, ran: BatchRead | None = None) -> None:
        super().__init__(f"batch {batch_id} {status}: {message}")
        self.status = status
        self.ran = ran or BatchRead({})


class BatchGone(Exception):
    """The endpoint does not know the batch (any more): its lines are submitted again."""


class BatchRunner:
    """What batch mode needs of a way to run batches."""

    async def submit(self, lines: list[BatchLine]) -> str:
        raise NotImplementedError

    async def wait(self, batch_id: str) -> BatchRead:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the runner holds (connections); nothing by default."""


class ApiBatches(BatchRunner):
    """OpenAI's Files and Batches API through the ``openai`` client: upload, create, poll every ``poll_s``, download
    the output and error files. The model is checked against the endpoint's listing before the first upload."""

    def __init__(self, settings: JudgeSettings, options: BatchOptions) -> None:
        self.settings, self.options = settings, options
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()
        self._checked = False

    def _client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:  # an async client belongs to the event loop it was made on; its own retries back off
            client = openai.AsyncOpenAI(api_key=self.settings.key, base_url=self.settings.base_url,
                                        timeout=self.settings.timeout_s, max_retries=self.settings.max_retries)
            self._clients[loop] = client
        return client

    def close(self) -> None:
        """Close the client of the process's background loop (the synchronous methods'); a client of a loop that
        has ended is closed with it."""
        loop = started_loop()
        client = self._clients.pop(loop, None) if loop is not None else None
        if client is not None:
            run_sync(client.close())

    def _fatal(self, exc: openai.APIError) -> Exception:
        """A failure of the Files or Batches API itself: every request would meet it."""
        settings = self.settings
        if is_config_error(exc):
            return settings.redacted(config_error(exc, model=settings.model, base_url=settings.base_url, available=None))
        if isinstance(exc, openai.APIConnectionError):
            return settings.redacted(unreachable_error(exc, base_url=settings.base_url))
        return exc

    async def submit(self, lines: list[BatchLine]) -> str:
        """Upload the lines as a batch input file and create the batch; its id."""
        client = self._client()
        if not self._checked and self.settings.check_model:
            await check_served_model(client, self.settings, reached=False)
            self._checked = True
        try:
            uploaded = await client.files.create(file=("mgm-batch.jsonl", write_input(lines), "application/jsonl"), purpose="batch")
            batch = await client.batches.create(
                input_file_id=uploaded.id, endpoint=BATCH_ENDPOINT, completion_window=self.options.completion_window,  # type: ignore[arg-type]
                metadata={"made_by": "mlflow_genai_metrics", "requests": str(len(lines))},
            )
        except openai.APIStatusError as exc:
            if is_config_error(exc):
                raise self._fatal(exc) from None
            raise BatchEnded("(not created)", "failed", self.settings.redact(str(exc))) from None
        except openai.APIError as exc:
            raise self._fatal(exc) from None
        log.info("submitted batch %s (%d requests) to %s", batch.id, len(lines), self.settings.shown_url)
        return batch.id

    async def wait(self, batch_id: str) -> BatchRead:
        """Poll the batch until it ends; what each of its lines gave."""
        client = self._client()
        try:
            while True:
                batch = await client.batches.retrieve(batch_id)
                if batch.status not in _RUNNING:
                    break
                await asyncio.sleep(self.options.poll_s)
            files = [await self._content(client, file_id) for file_id in (batch.output_file_id, batch.error_file_id)]
        except openai.APIStatusError as exc:
            if exc.status_code == 404:  # a batch of another account, or of a server since restarted
                raise BatchGone(batch_id) from None
            raise self._fatal(exc) from None
        except openai.APIError as exc:
            raise self._fatal(exc) from None
        unreadable: list[str] = []
        read = BatchRead(read_output(*files, redact=self.settings.redact, unreadable=unreadable), batch.status == "expired", unreadable)
        if batch.status in ("failed", "cancelled"):
            errors = [error.message or error.code or "" for error in (batch.errors.data or [])] if batch.errors else []
            raise BatchEnded(batch_id, batch.status, self.settings.redact("; ".join(e for e in errors if e) or "no reason given"), read)
        return read

    @staticmethod
    async def _content(client: openai.AsyncOpenAI, file_id: str | None) -> bytes | None:
        if not file_id:
            return None
        return (await client.files.content(file_id)).content


class CommandBatches(BatchRunner):
    """Batch files in a folder, for a batch runner with no Batches API (vLLM's ``run_batch``).

    ``submit`` writes ``batch-<hash of the input>.input.jsonl`` (the same lines make the same file in every run);
    ``wait`` reads ``batch-<hash>.output.jsonl`` when it is there, else runs ``command`` (its ``{input}`` and
    ``{output}`` replaced by the files' paths) to make it, else raises ``BatchFilesWritten`` saying what to run.
    """

    def __init__(self, options: BatchOptions, redact: Callable[[str], str] = str) -> None:
        assert options.files_dir is not None
        self.folder, self.command, self.redact = Path(options.files_dir).expanduser(), options.command, redact

    def paths(self, batch_id: str) -> tuple[Path, Path]:
        """The input and output files of a batch."""
        return self.folder / f"{batch_id}.input.jsonl", self.folder / f"{batch_id}.output.jsonl"

    async def submit(self, lines: list[BatchLine]) -> str:
        data = write_input(sorted(lines, key=lambda line: line.custom_id))
        batch_id = "batch-" + hashlib.sha256(data).hexdigest()[:16]
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        source, _ = self.paths(batch_id)
        if not source.exists():
            source.write_bytes(data)
        return batch_id

    async def wait(self, batch_id: str) -> BatchRead:
        source, output = self.paths(batch_id)
        if not output.exists():
            if self.command is None:
                raise BatchFilesWritten(
                    f"batch mode wrote the judge's requests to {source}; run your batch runner on it, writing "
                    f"{output} (e.g. vllm run_batch -i {shlex.quote(str(source))} -o {shlex.quote(str(output))} "
                    "--model <the judge model>), then run again: the answers are read from it")
            await self._run_command(source, output)
        if not output.exists():
            raise BatchEnded(batch_id, "failed", f"the batch command made no output file {output}")
        unreadable: list[str] = []
        return BatchRead(read_output(output, redact=self.redact, unreadable=unreadable), unreadable=unreadable)

    async def _run_command(self, source: Path, output: Path) -> None:
        assert self.command is not None
        words = [word.format(input=str(source), output=str(output)) for word in shlex.split(self.command)]
        process = await asyncio.create_subprocess_exec(*words, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        printed, _ = await process.communicate()
        if process.returncode != 0:
            shown = printed.decode("utf-8", errors="replace")[-2000:]
            raise BatchEnded(source.stem, "failed", f"the batch command {words[0]} exited with {process.returncode}: {shown}")


def runner_for(settings: JudgeSettings) -> BatchRunner:
    """The runner for a Judge's batch options: the folder and command when ``files_dir`` is set, else the API."""
    options = settings.batch or BatchOptions()
    if options.files_dir is not None:
        return CommandBatches(options, settings.redact)
    return ApiBatches(settings, options)
