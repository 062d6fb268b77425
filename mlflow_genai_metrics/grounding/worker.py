"""The grounding check in a process of its own, filling the grounding cache while the caller does other work.

    python -m mlflow_genai_metrics.grounding.worker      # reads JSON lines on standard input

The first line names the cache folder, ``{"cache": DIR}``; then each line is one row, its summary and the claims
judged so far, ``{"row": 7, "source": "...", "summary": "...", "claims": [...]}`` (``cached_scores``: the summary's
grounding and the claims' supports on one index of the source, with one read of the cache; ``summary`` may be left
out), or a batch of rows, ``{"rows": [...], "sources": [...], "summaries": [...]}``. It stores what it scores in one
transaction once ``STORE_EVERY`` results are held (about 16 BBC rows with their claims), at a line that comes
``STORE_WITHIN_S`` or more after the first of them, and at the end (a transaction per row was 0.3 ms of its ~5 ms a
row); a worker killed meanwhile costs a later run the scoring of those rows again, nothing of this run, which had
them handed back at once (below). End of input ends the process (exit 0). A cache it cannot write (a full disk, a
read-only file) stops it at the first write refused, with exit 74 (``EXIT_UNWRITABLE``), SQLite's words on standard
error: the caller says so, naming the file (``store_writes``). Anything else, or another failure (a bad line), is
written to standard error and exits 1, after storing what it holds. Either way what it scored is stored, as far as
the file allows; the rest is left for the caller to compute.

What it scores it also hands back on standard output, a line per row as each batch is done (rows named by the
caller's ``row``): ``{"row": 7, "grounding": {...}, "supports": [...]}`` (the ``RowGrounding``'s fields; each
claim's support in the order sent, NaN for a claim with no word), so the caller need not read the cache back.

``summarization.grounded.GroundingInAnotherProcess`` starts it for a large run, so the check uses another core
instead of holding the judge's loop; it is a plain interpreter started with ``-m`` (never a fork of the caller,
nor a re-import of the caller's script, as ``multiprocessing`` would do), and it lowers its own priority so that
it takes only the CPU the caller leaves (``settle``).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import BinaryIO

from ..store_writes import StoreWriteError, StoreWriteWarning
from .cache import GroundingCache, Key, cached_scores, store_unstored
from .features import SourceIndex
from .scoring import RowGrounding

KEPT_INDEXES = 64  # sources whose index the worker keeps for their next rows (a BBC article's: tens of kB)
STORE_EVERY = 128  # results the worker holds before storing them in one transaction (a BBC row and its claims: ~9)
STORE_WITHIN_S = 1.0  # ... and how long it holds the first of them at most (checked as each read is scored)
EXIT_UNWRITABLE = 74  # sysexits' EX_IOERR: the cache could not be written; standard error holds SQLite's words


def serve(stream: BinaryIO, out: BinaryIO | None = None) -> None:
    """Fill the cache named by the first line with what the next lines ask, until the input ends, and hand each
    named row's scores to ``out``. The lines that have arrived together are scored together (one model pass), so a
    worker that falls behind catches up faster; the latest sources' indexes are kept, so a source shared by many rows
    is indexed once; the results are stored a transaction at a time (``_Held``). A cache that cannot be written
    raises its ``StoreWriteError`` at the first write that fails: scoring on would store nothing."""
    lines = _batches(stream)
    first = next(lines, [])
    if not first:
        return
    cache = GroundingCache(json.loads(first[0])["cache"])
    held = _Held(cache)
    try:
        recent: dict[str, SourceIndex] = {}  # the latest sources' indexes, oldest first: a shared source is indexed once
        for batch in itertools.chain([first[1:]], lines):
            _score(batch, cache, recent, held, out)
            held.store(due_only=True)
        held.store()
    finally:
        store_unstored(cache, held.results)  # what was scored before a failure (a bad line) is stored all the same
        cache.close()


class _Held:
    """The results scored and not yet stored (``cached_scores``'s ``unstored``), stored in one transaction once
    ``STORE_EVERY`` of them are held or the first has waited ``STORE_WITHIN_S``."""

    def __init__(self, cache: GroundingCache):
        self.cache, self.since = cache, 0.0
        self.results: dict[Key, RowGrounding] = {}

    def hold(self) -> dict[Key, RowGrounding]:
        """Where ``cached_scores`` adds what it scores next."""
        if not self.results:
            self.since = time.monotonic()
        return self.results

    def store(self, *, due_only: bool = False) -> None:
        """Store what is held (with ``due_only``, only when it is due); a write the file refused raises its error."""
        if self.results and not (due_only and len(self.results) < STORE_EVERY and time.monotonic() - self.since < STORE_WITHIN_S):
            store_unstored(self.cache, self.results)
        if self.cache.write_failure is not None:
            raise self.cache.write_failure


def _batches(stream: BinaryIO) -> Iterator[list[bytes]]:
    """The complete lines of ``stream``, a list of those that arrived together at a time."""
    pending = b""
    while chunk := stream.read1(1 << 20):
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            yield lines
    if pending.strip():
        yield [pending]


def _keep_recent(recent: dict[str, SourceIndex], sources: list[str]) -> None:
    """Mark ``sources`` as the newest in ``recent``, and drop its oldest indexes beyond ``KEPT_INDEXES``."""
    for source in dict.fromkeys(sources):
        if source in recent:
            recent[source] = recent.pop(source)
    while len(recent) > KEPT_INDEXES:
        del recent[next(iter(recent))]


def _score(lines: list[bytes], cache: GroundingCache, recent: dict[str, SourceIndex], held: _Held, out: BinaryIO | None = None) -> None:
    tasks = [json.loads(line) for line in lines if line.strip()]
    sources = [source for t in tasks for source in t.get("sources", [t["source"]] if "summary" in t else [])]
    summaries = [summary for t in tasks for summary in t.get("summaries", [t["summary"]] if "summary" in t else [])]
    claims = [(claim, t["source"]) for t in tasks for claim in t.get("claims", [])]
    found, supported = cached_scores(sources, summaries, [c for c, _ in claims], [s for _, s in claims], cache, recent, held.hold())
    groundings, supports = iter(found), iter(supported)
    _keep_recent(recent, sources + [s for _, s in claims])
    if out is not None:
        out.write("".join(_handed(tasks, groundings, supports)).encode("utf-8"))
        out.flush()


def _handed(tasks: list[dict], groundings: Iterator[RowGrounding], supports: Iterator[float]) -> Iterator[str]:
    """A line per row a task names, with its scores: the results are in the tasks' order (a batch's rows have only
    their groundings; a row's task its grounding when it sent its summary, and its claims' supports)."""
    for task in tasks:
        if "sources" in task:
            rows = task.get("rows") or [None] * len(task["sources"])
            scored = [(row, {"grounding": vars(next(groundings)), "supports": []}) for row in rows]
        else:
            scores = {"grounding": vars(next(groundings))} if "summary" in task else {}
            scored = [(task.get("row"), {**scores, "supports": [next(supports) for _ in task.get("claims", [])]})]
        yield from (json.dumps({"row": row, **scores}) + "\n" for row, scores in scored if row is not None)


def settle() -> None:
    """How the worker process runs: behind the caller (its judge's loop and a local endpoint get the cores first,
    this gets what is left), with no cyclic garbage collector, and without the store's warning (the caller says
    it, once, naming the file). Scoring makes no reference cycle (``tests/test_grounding_worker.py`` serves rows
    with every kind of line under ``gc.DEBUG_SAVEALL`` and finds none), so reference counting frees everything, as
    the collector would; its scans over the indexes the worker keeps cost a tenth to a fifth of its CPU (1,000 BBC
    rows' lines replayed, pinned, nine alternating pairs: 2.09-2.49 ms a row without, 2.47-3.39 with)."""
    if hasattr(os, "nice"):
        os.nice(10)
    gc.disable()
    warnings.simplefilter("ignore", StoreWriteWarning)


def main() -> None:
    settle()
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except StoreWriteError as failure:
        sys.stderr.write(failure.problem)
        sys.stderr.flush()
        os._exit(EXIT_UNWRITABLE)
    sys.stderr.flush()
    os._exit(0)  # everything is stored: the interpreter's teardown (a third of a second) would only delay the caller


if __name__ == "__main__":
    main()
