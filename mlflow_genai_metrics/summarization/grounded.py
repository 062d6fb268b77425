"""Judgement records -> the same records with the model-free check added (``grounding`` package).

Each row gets its ``grounding`` (the score, the flag at the model's threshold, the reasoning), whatever the judge
did: the check needs no judge, so a row the judge failed on still has it. Each judged claim gets its
``lexical_support`` and whether its verdict is ``suspect``. Both go through the grounding cache, so a rerun
recomputes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..grounding.cache import GroundingCache, cached_groundings, cached_supports, uncached_rows
from ..grounding.model import load_model
from ..grounding.scoring import RowGrounding, suspect
from ..grounding.worker import EXIT_UNWRITABLE
from ..judge import Judge
from .records import RowInput, RowJudgement

_log = logging.getLogger(__name__)
ROWS_PER_STEP = 4  # a step of the check holds the judge's loop while it scores this many rows (BBC, with its claims: about 2-4 ms each)
# From this many rows the cache lacks, the check runs in a process of its own: starting one and scoring its first row
# take 0.2-0.4 s of CPU, yet from 10 rows on, in a fresh process, that cost less CPU and wall time than the check on
# the judge's loop (which holds the loop, and loads the check's tables there); below 50 rows a process that checked
# before (tests, a notebook) has it cheaper on its loop (docs/benchmarks.md, "Where the check runs").
ROWS_FOR_A_PROCESS = 50
ROWS_PER_TASK = 32  # rows sent to that process in one line
# Rows whose claims are ready go to that process a few at a time (it reads what has arrived together as one batch:
# 4 rows a read cost it 0.35 ms a row less than 1 a read, 7%): when this many wait, or this long after the first.
ROWS_PER_SEND = 4
SEND_WITHIN_S = 0.05


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT_GROUNDING_CACHE"


DEFAULT_GROUNDING_CACHE = _Default()  # the judge's cache folder, or the default folder when there is no judge


def grounding_cache(judge: Judge | None, cache_dir: str | os.PathLike[str] | None | _Default = DEFAULT_GROUNDING_CACHE) -> GroundingCache | None:
    """The grounding cache to use: beside the judge's (none when the judge's cache is off), ``cache_dir`` when
    given, no cache for None."""
    if isinstance(cache_dir, _Default):
        if judge is None:
            return GroundingCache()
        return GroundingCache(judge.cache.directory) if judge.cache is not None else None
    return GroundingCache(cache_dir) if cache_dir is not None else None


@dataclass
class Scored:
    """What the check scored while the judge waited, by row position: each row's grounding, and its claims' supports
    by claim text. ``ground_judgements`` takes these as they are and reads (or scores) only the rest."""

    groundings: dict[int, RowGrounding] = field(default_factory=dict)
    supports: dict[int, dict[str, float]] = field(default_factory=dict)


def ground_judgements(rows: Sequence[RowInput], judgements: Sequence[RowJudgement], cache: GroundingCache | None,
                      scored: Scored | None = None) -> list[RowJudgement]:
    """``judgements`` (``rows[i]`` with ``judgements[i]``) with each row's grounding and each claim's support and
    suspect flag; ``scored``: what the check already handed over (the rest through the cache)."""
    scored = scored or Scored()
    rest = [position for position in range(len(rows)) if position not in scored.groundings]
    found, _, _ = cached_groundings([rows[p].source for p in rest], [rows[p].summary for p in rest], cache)
    by_position = {**dict(zip(rest, found)), **scored.groundings}
    groundings = [by_position[position] for position in range(len(rows))]
    claims = [(position, number, claim.claim) for position, j in enumerate(judgements) for number, claim in enumerate(j.claims)]
    supports = [scored.supports.get(position, {}).get(text) for position, _, text in claims]  # None: not handed over
    unknown = [at for at, support in enumerate(supports) if support is None]
    read = cached_supports([claims[at][2] for at in unknown], [rows[claims[at][0]].source for at in unknown], cache) if unknown else []
    for at, support in zip(unknown, read):
        supports[at] = support
    model = load_model()
    checked: dict[int, dict[int, tuple[float | None, bool]]] = {}
    for (position, number, _), support in zip(claims, supports):
        verdict = judgements[position].claims[number].verdict
        value = None if support != support else support  # NaN: a claim with no word to check
        checked.setdefault(position, {})[number] = (value, suspect(verdict, support, model=model))
    grounded = []
    for position, (judgement, grounding) in enumerate(zip(judgements, groundings)):
        flags = checked.get(position, {})
        claims_checked = [
            claim.model_copy(update={"lexical_support": flags[number][0], "suspect": flags[number][1]})
            for number, claim in enumerate(judgement.claims)
        ]
        grounded.append(judgement.model_copy(update={"grounding": grounding, "claims": claims_checked}))
    return grounded


class GroundingWhileJudging:
    """The grounding check run while the judge's requests are in flight: on the judge's own event loop, a few rows
    (or one row's claims) at a time between the pipelines' steps, storing each result in the grounding cache, so
    that ``ground_judgements`` afterwards reads every row and claim back instead of scoring it after the judge.

    A row's claims are checked as soon as they are extracted, before they are verified; rows of one source go
    together, so a source shared by many summaries is indexed once per step. Only an optimisation: a failure here is
    logged and warming stops, as it does once the cache cannot be written (a full disk: said by the cache);
    ``ground_judgements`` then scores (or raises) as it would have.
    """

    def __init__(self, rows: Sequence[RowInput], cache: GroundingCache):
        self.rows, self.cache = rows, cache
        self.scored = Scored()  # handed to ``ground_judgements``: nothing read back
        self._rows = deque(range(len(rows)))
        self._claims: deque[tuple[int, list[str]]] = deque()
        self._wake = asyncio.Event()
        self._closed = False

    def claims_ready(self, index: int, claims: list[str]) -> None:
        self._claims.append((index, list(claims)))
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        try:
            while self.cache.write_failure is None:  # scores that cannot be stored would only be computed twice
                if self._claims:
                    index, claims = self._claims.popleft()
                    supports = cached_supports(claims, [self.rows[index].source] * len(claims), self.cache)
                    self.scored.supports[index] = dict(zip(claims, supports))
                elif self._rows:
                    step = self._next_rows()
                    found, _, _ = cached_groundings([self.rows[i].source for i in step], [self.rows[i].summary for i in step], self.cache)
                    self.scored.groundings.update(zip(step, found))
                elif self._closed:
                    return
                else:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                await asyncio.sleep(0)  # the pipelines' ready steps run before the next one of ours
        except Exception as error:  # noqa: BLE001 - warming only; ground_judgements does the real work after
            _log.warning("the grounding check could not run while the judge waited (%s); it runs after instead", error)

    def _next_rows(self) -> list[int]:
        first = self._rows.popleft()
        step, source = [first], self.rows[first].source
        while self._rows and len(step) < ROWS_PER_STEP and self.rows[self._rows[0]].source == source:
            step.append(self._rows.popleft())
        if len(step) == 1:  # a source of its own: take the next few rows too
            while self._rows and len(step) < ROWS_PER_STEP:
                step.append(self._rows.popleft())
        return step


# How long a worker may take to finish after the judge's last answer: a fixed margin plus a share per row (it scores
# about 600 rows a second on one core, cold; 0.05 s a row is generous on a loaded machine).
WORKER_DEADLINE_S = 30.0
WORKER_SECONDS_PER_ROW = 0.05


class GroundingInAnotherProcess:
    """The same work as ``GroundingWhileJudging``, in a process of its own (``grounding.worker``) on another core:
    the judge's loop only writes each task as a line to the worker's input, so the check neither holds the loop nor
    takes its core. A row goes to the worker when its claims are extracted, summary and claims together (one index
    of the source for both), with the next few (``ROWS_PER_SEND``, ``SEND_WITHIN_S``); the rows still unsent when
    the judge is done (no claims, a failure) go then. The worker stores what it scores in the same grounding cache,
    and ``ground_judgements`` afterwards reads it back. Only an optimisation, like the in-loop check: a worker that
    cannot start or fails is logged, and whatever it did not store is scored after the judge. A worker that cannot
    write the cache (a full disk) exits at its first refused write with
    ``EXIT_UNWRITABLE``: that is said as this process's own write failure would be (``GroundingCache.failed_in_worker``).
    When the run stops (a configuration error, Ctrl-C), the worker is killed."""

    command = (sys.executable, "-m", "mlflow_genai_metrics.grounding.worker")

    def __init__(self, rows: Sequence[RowInput], cache: GroundingCache, unscored: Sequence[int]):
        self.rows, self.cache, self.directory = rows, cache, cache.directory
        self.scored = Scored()  # what the worker handed back (``ground_judgements`` reads only the rest)
        self._claims_sent: dict[int, list[str]] = {}
        self._unsent = dict.fromkeys(unscored)  # rows the cache lacks, in order, not yet sent
        self._process: asyncio.subprocess.Process | None = None  # set once started; kept for the caller to inspect
        self._waiting: list[dict] = []  # tasks told before the worker started
        self._outbox: list[bytes] = []  # lines not sent yet (``ROWS_PER_SEND``)
        self._due: asyncio.TimerHandle | None = None
        self._closed = asyncio.Event()

    def claims_ready(self, index: int, claims: list[str]) -> None:
        task: dict = {"row": index, "source": self.rows[index].source, "claims": list(claims)}
        self._claims_sent[index] = task["claims"]
        if index in self._unsent:
            del self._unsent[index]
            task["summary"] = self.rows[index].summary
        self._send(task)

    def close(self) -> None:
        self._closed.set()

    def _send(self, task: dict) -> None:
        """Send ``task`` with the next few (``ROWS_PER_SEND``, ``SEND_WITHIN_S``)."""
        if self._process is None:
            self._waiting.append(task)
            return
        self._outbox.append((json.dumps(task) + "\n").encode("utf-8"))
        if len(self._outbox) >= ROWS_PER_SEND:
            self._flush()
        elif self._due is None:
            self._due = asyncio.get_running_loop().call_later(SEND_WITHIN_S, self._flush)

    def _flush(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        lines, self._outbox = self._outbox, []
        if lines and self._process.returncode is None and not self._process.stdin.is_closing():
            self._process.stdin.write(b"".join(lines))

    async def run(self) -> None:
        # The worker finds modules where this process does (this copy of the package among them), in the same order.
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            environment.setdefault(variable, "1")  # one core: numpy's own threads would take the judge's
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command, env=environment,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except (OSError, NotImplementedError) as error:  # NotImplementedError: an event loop with no subprocesses
            _log.warning("the grounding check could not start a process of its own (%s); it runs after the judge instead", error)
            return
        errors = asyncio.ensure_future(process.stderr.read())
        handed = asyncio.ensure_future(self._take(process.stdout))
        try:
            process.stdin.write((json.dumps({"cache": str(self.directory)}) + "\n").encode("utf-8"))
            self._process, waiting, self._waiting = process, self._waiting, []
            for task in waiting:
                self._send(task)
            await self._closed.wait()
            rest, self._unsent = list(self._unsent), {}
            for start in range(0, len(rest), ROWS_PER_TASK):
                batch = [self.rows[p] for p in rest[start : start + ROWS_PER_TASK]]
                self._send({"rows": rest[start : start + ROWS_PER_TASK], "sources": [r.source for r in batch],
                            "summaries": [r.summary for r in batch]})
            self._flush()  # what waits goes now, not after SEND_WITHIN_S
            process.stdin.close()
            # A worker that stalls must not stall the run: past its deadline it is killed, and the rows it did not
            # store are scored after the judge, as when it fails.
            deadline = WORKER_DEADLINE_S + WORKER_SECONDS_PER_ROW * len(self.rows)
            try:
                returncode = await asyncio.wait_for(process.wait(), deadline)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
                errors.cancel()
                handed.cancel()
                _log.warning("the grounding check's process did not finish within %.3g s of the judge's last answer; it was "
                             "stopped, and what it did not store is scored after the judge", deadline)
                return
            await handed
            message = (await errors).decode("utf-8", "replace").strip()
            if returncode == EXIT_UNWRITABLE:
                self.cache.failed_in_worker(message[-500:] or "no reason given")
            elif returncode:
                _log.warning("the grounding check's process failed (exit %s: %s); what it did not store is scored after the judge",
                             returncode, message[-500:])
        except BaseException:
            if self._due is not None:
                self._due.cancel()
            if process.returncode is None:
                process.kill()
            await process.wait()
            errors.cancel()
            handed.cancel()
            raise

    async def _take(self, stdout: asyncio.StreamReader) -> None:
        """Keep the scores the worker hands back (a line per row) until it ends; a line it could not have meant is
        passed over (that row is read from the cache instead). Only an optimisation: a failure here is logged, the
        rest of the output drained unread (the worker never waits on a full pipe), and what was not kept is read back."""
        pending, keeping = b"", True
        try:
            while chunk := await stdout.read(1 << 16):
                if not keeping:
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                try:
                    for line in lines:
                        with contextlib.suppress(ValueError, TypeError, KeyError, IndexError):
                            self._keep(json.loads(line))
                except Exception as error:  # noqa: BLE001
                    keeping = False
                    _log.warning("the grounding check's process's scores could not be kept (%s); they are read from the cache instead", error)
        except Exception as error:  # noqa: BLE001
            _log.warning("the grounding check's process's scores could not be read (%s); they are read from the cache instead", error)

    def _keep(self, handed: dict) -> None:
        row = handed["row"]
        if "grounding" in handed:
            self.scored.groundings[row] = RowGrounding(**handed["grounding"])
        if handed["supports"]:
            self.scored.supports[row] = dict(zip(self._claims_sent[row], handed["supports"], strict=True))


def grounding_alongside(rows: Sequence[RowInput], cache: GroundingCache) -> GroundingWhileJudging | GroundingInAnotherProcess:
    """The check to run while the judge waits: in a process of its own when a run has many rows the cache lacks, the
    machine more than one core and this process a Python interpreter to start (not a frozen application), else on
    the judge's loop (which reads the cached rows as it goes)."""
    if len(rows) >= ROWS_FOR_A_PROCESS and (os.cpu_count() or 1) > 1 and sys.executable and not getattr(sys, "frozen", False):
        missing = uncached_rows([r.source for r in rows], [r.summary for r in rows], cache)
        if len(missing) >= ROWS_FOR_A_PROCESS:
            return GroundingInAnotherProcess(rows, cache, missing)
    return GroundingWhileJudging(rows, cache)
