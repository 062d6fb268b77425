"""A store that cannot be written mid-run: what was judged is kept, and the failure is said once, naming the file.

A write to one of the owner-only SQLite stores (``sqlite_store``: the judge's cache and the rows stored beside it, the
grounding cache, the batch store) can fail in the middle of a run: its disk full ("database or disk is full"), the
file or its folder made read-only ("attempt to write a readonly database"), a failing disk ("disk I/O error"),
another process holding the file past the busy timeout. What the write would have stored was already paid for (a
judge's answer) or computed, and it is in memory. So a failed write never raises: the store writes nothing more to
that file for as long as this process has it open (every later write would fail the same way, some only after the
busy timeout), the first failure is said once as a ``StoreWriteWarning`` (what could not be stored, the file, why,
what that costs, the fix), and the run goes on and returns every answer. ``store.write_failure`` holds it;
``watching_store_writes`` collects the failures met while it is open, whichever store and thread met them: ``mgm``
prints the first in one line and exits 2. The grounding check's worker process reports its own (``grounding.worker``);
a Spark executor says its own in its log, which the driver does not see. A store that cannot be written when it is
opened (before any call) raises ``StoreUnreadable``, "cannot be written", with the same fix.

Chosen over raising an error that carries the partial result: every path (summaries, answers, rewrites, monitoring,
Spark) would have to carry one, an answer paid for after the failure would still be lost to a caller that does not
catch it, and the rows in flight would be thrown away. Kept going, a run loses nothing; a rerun pays again only for
the answers judged after the failure, which were not cached.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

JUDGE_CACHE = "the judge's cache"  # the store whose failure costs money: said first
API_FIX = "free space on its disk (or make it writable), or point MGM_CACHE_DIR or Judge(cache_dir=...) at another folder"
CLI_FIX = "free space on its disk (or make it writable), or set MGM_CACHE_DIR to another folder"


class StoreWriteWarning(RuntimeWarning):
    """A store could not be written (``StoreWriteError`` says which, why and the fix); what was judged is kept."""


class StoreWriteError(OSError):
    """A write to a store that failed: ``path`` (the file), ``label`` (which store), ``what`` (what was not stored),
    ``problem`` (SQLite's words) and ``kept`` (what it costs). Said as a ``StoreWriteWarning``, not raised, by the
    stores; ``mgm`` answers it with exit code 2 and one line."""

    def __init__(self, path: str | Path, label: str, what: str, problem: str, kept: str) -> None:
        self.path, self.label, self.what, self.problem, self.kept = Path(path), label, what, problem, kept
        super().__init__(self.sentence(API_FIX))

    def sentence(self, fix: str) -> str:
        """``could not store WHAT in LABEL PATH (PROBLEM); KEPT; FIX``."""
        return f"could not store {self.what} in {self.label} {self.path} ({self.problem}); {self.kept}; {fix}"


_WATCHERS: list[list[StoreWriteError]] = []
_WATCHERS_LOCK = threading.Lock()


def is_write_failure(error: BaseException) -> bool:
    """A SQLite error that is the file's or the disk's (full, read-only, failing, held too long, damaged), not the
    code's (a closed connection, a constraint, a value SQLite cannot take)."""
    return isinstance(error, sqlite3.DatabaseError) and not isinstance(
        error, (sqlite3.ProgrammingError, sqlite3.IntegrityError, sqlite3.NotSupportedError, sqlite3.DataError))


def cannot_write(path: Path, problem: str) -> bool:
    """Is ``problem``, met opening ``path``, the file's disk or mode refusing a write (not a file that cannot be
    read)? SQLite says "disk I/O error" when a full disk leaves no room for the ``-shm`` file: so also when less
    than 1 MiB is free where the file is."""
    said = ("disk is full", "readonly", "No space left", "Read-only file system", "Disk quota exceeded")
    if any(words in problem for words in said):
        return True
    for folder in path.parents:  # the nearest that exists
        try:
            return shutil.disk_usage(folder).free < 1 << 20
        except OSError:
            continue
    return False


def say_write_failure(failure: StoreWriteError) -> None:
    """Tell every ``watching_store_writes`` open, then warn (``StoreWriteWarning``): once per failure."""
    note_write_failure(failure)
    warnings.warn(str(failure), StoreWriteWarning, stacklevel=4)


def note_write_failure(failure: StoreWriteError) -> None:
    """Tell the ``watching_store_writes`` open that do not know it yet: a write skipped because of an earlier
    failure (met before they opened: an earlier command in this process, its store still open) counts too."""
    with _WATCHERS_LOCK:
        for watcher in _WATCHERS:
            if not any(known is failure for known in watcher):
                watcher.append(failure)


@contextlib.contextmanager
def watching_store_writes() -> Iterator[list[StoreWriteError]]:
    """The store write failures met while open, in any thread of this process, in the order they were met."""
    failures: list[StoreWriteError] = []
    with _WATCHERS_LOCK:
        _WATCHERS.append(failures)
    try:
        yield failures
    finally:
        with _WATCHERS_LOCK:
            _WATCHERS.remove(failures)


def one_line(failures: list[StoreWriteError]) -> str:
    """What ``mgm`` says of the failures its command met: the first in full, the other files by name."""
    first = next((f for f in failures if f.label == JUDGE_CACHE), failures[0])
    others = list(dict.fromkeys(f"{f.label} {f.path}" for f in failures if f.path != first.path))
    also = f" (also {', '.join(others)})" if others else ""
    return first.sentence(CLI_FIX) + also
