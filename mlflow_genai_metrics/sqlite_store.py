"""The owner-only SQLite store that the judge's cache, its stored rows, the grounding cache and the batch store each
are: one file in WAL mode, its folder 0700 and its files 0600 (they quote the user's articles and summaries), safe
for many threads and processes; and the folder they are in unless told another (``default_cache_dir``).

One connection per file per process. SQLite locks a file with POSIX advisory locks, which belong to the process:
closing *any* descriptor of the database file drops every lock the process holds on it, and another process may then
reset the WAL under this one ("disk I/O error", "database disk image is malformed"). So every store object on a file
shares this process's one connection, and the one lock under which every statement and transaction on it runs. The
connection is counted: it closes when the last store object on the file is closed (or collected without being
closed). Nothing else opens the file while it lives: the file is created, its header read and its mode set before
the process's first connection to it, and afterwards only SQLite touches it and its ``-wal`` and ``-shm``. A forked
child never uses or closes its parent's connections (they are set aside, kept open); it opens its own.

A file that cannot be used (corrupt, truncated, not a database, a folder, not ours to make owner-only) is found when
the process first opens it, before anything is asked of a judge: its size is checked against the page count its
header states (a truncated file), then ``PRAGMA quick_check(1)`` reads every page (about 40 ms for a 50 MB file);
``StoreUnreadable`` names the file and the fix. A write that fails mid-run (a full disk, a read-only file) never
raises: the store stops writing to the file and says so once (``store_writes``), and the run keeps what it judged.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .store_writes import API_FIX, StoreWriteError, cannot_write, is_write_failure, note_write_failure, say_write_failure

_BUSY_S = 60  # how long a process waits for another one holding the file
_KEYS_PER_QUERY = 900  # well under SQLite's limit on parameters
_MAGIC = b"SQLite format 3\x00"
_HEADER_TRIES = 5  # a header read while another process checkpoints may state pages not yet written: read again
_FIX = "move it away (a new one is made in its place), or point MGM_CACHE_DIR or Judge(cache_dir=...) at another folder"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the stores are in unless told another: ``$MGM_CACHE_DIR`` (of ``environ``, default
    ``os.environ``), else the user cache dir (e.g. ``~/.cache/mlflow_genai_metrics``)."""
    configured = (os.environ if environ is None else environ).get("MGM_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mlflow_genai_metrics"))


class StoreUnreadable(OSError):
    """A store file that cannot be opened or read (corrupt, truncated, not a database, a folder, wrong permissions);
    the message names the file and the fix. ``mgm`` answers it with exit code 2 and that one line."""


class _NotOwnerOnly(StoreUnreadable, PermissionError):
    """A store folder or file whose mode cannot be made owner-only (someone else's): also a ``PermissionError``."""


def _unreadable(path: Path, problem: str) -> StoreUnreadable:
    if cannot_write(path, problem):  # its folder, the file, its schema or WAL mode, made when it is opened
        return StoreUnreadable(f"the cache file {path} cannot be written ({problem}); {API_FIX}")
    return StoreUnreadable(f"the cache file {path} cannot be read ({problem}); {_FIX}")


def open_owner_only(directory: Path, path: Path, schema: str) -> sqlite3.Connection:
    """A new connection to ``path`` in WAL mode, checked, with ``schema`` created; its folder 0700 and its files 0600
    whatever existed before. Only for the process's first connection to the file (``OwnerOnlyStore`` shares it):
    the file is opened here outside SQLite, which would drop the locks of any other connection to it in this process."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise _unreadable(path, f"its folder cannot be made: {exc.strerror or exc}") from exc
    _owner_only(directory, 0o700)
    if path.exists() and not path.is_file():
        raise _unreadable(path, "it is a folder, not a file" if path.is_dir() else "it is not a regular file")
    for existing in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):  # the last connection elsewhere may remove -wal/-shm meanwhile
            _owner_only(existing, 0o600)
    _check_header(path)  # also creates the file, 0600: SQLite gives new -wal/-shm the same mode
    try:
        conn = sqlite3.connect(path, timeout=_BUSY_S, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise _unreadable(path, str(exc)) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={_BUSY_S * 1000}")
        _retry_locked(lambda: _prepare(conn, path, schema))
    except sqlite3.DatabaseError as exc:
        conn.close()
        if _busy(exc):
            raise
        raise _unreadable(path, str(exc)) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, path: Path, schema: str) -> None:
    """WAL mode, the schema, and every page read once: a damaged file stops here, not halfway through a run."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    found = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    if found != "ok":
        raise _unreadable(path, " ".join(str(found).split()))
    conn.execute(schema)


def _check_header(path: Path) -> None:
    """Create ``path`` (0600) if missing, and refuse a file that is not a SQLite database or is shorter than the
    pages its header states (truncated). A checkpoint in another process writes page 1 before the pages after it,
    so a shortfall is read again before it is believed."""
    for attempt in range(_HEADER_TRIES):
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        except OSError as exc:
            raise _unreadable(path, exc.strerror or str(exc)) from exc
        try:
            header, size = os.pread(fd, 100, 0), os.fstat(fd).st_size
        finally:
            os.close(fd)
        problem = _header_problem(header, size)
        if problem is None:
            return
        if attempt + 1 < _HEADER_TRIES:
            time.sleep(0.05)
    raise _unreadable(path, problem)


def _header_problem(header: bytes, size: int) -> str | None:
    """What is wrong with a database file of ``size`` bytes starting ``header`` (its first 100 bytes); None if nothing."""
    if size == 0:
        return None  # a new file: SQLite makes it a database
    if len(header) < 100 or not header.startswith(_MAGIC):
        return "it is not a SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The stated page count holds only while the change counter equals "version valid for" (any recent SQLite).
    if header[24:28] == header[92:96] and pages * page_size > size:
        return f"it is truncated: {size} of the {pages * page_size} bytes its header states"
    return None


def _busy(exc: sqlite3.Error) -> bool:
    """Another process holds the file: a wait that ran out, not a file that cannot be read."""
    return "locked" in str(exc) or "busy" in str(exc)


def _retry_locked(action: Callable[[], object]) -> None:
    """``action``, again while SQLite answers "database is locked" at once, up to the busy timeout. Switching to
    WAL, recovering a WAL another process is opening, and starting a write transaction meanwhile answer so without
    waiting on ``busy_timeout``: many Spark workers opening and writing one cache together meet it."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def _owner_only(path: Path, mode: int) -> None:
    """Give ``path`` exactly ``mode`` (0700, 0600); a clear error if that cannot be done. A chmod by name opens
    no descriptor, so it drops no lock."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current == mode:
        return
    try:
        os.chmod(path, mode)
    except OSError as exc:
        raise _NotOwnerOnly(
            f"the judge cache {path} has mode {current:04o} and cannot be made {mode:04o} ({exc.strerror}); cached "
            "replies quote your articles and summaries, so the cache must be readable by its owner only. Give it a "
            "folder of your own: Judge(cache_dir=...) or MGM_CACHE_DIR."
        ) from exc


@dataclass(eq=False)
class _Shared:
    """This process's one connection to a store file, the lock every statement on it runs under, and how many
    store objects hold it."""

    key: tuple[int, str]  # (process id, resolved path)
    connection: sqlite3.Connection
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0
    schemas: set[str] = field(default_factory=set)
    write_failure: StoreWriteError | None = None  # the first write that failed: nothing more is written

    @property
    def pid(self) -> int:
        return self.key[0]


_OPEN: dict[tuple[int, str], _Shared] = {}  # the one state shared across calls that issue 24 allows: see the module
_OPEN_LOCK = threading.Lock()
_GIVEN_UP: list[_Shared] = []  # references given up, counted off by whoever holds _OPEN_LOCK next
_INHERITED: list[_Shared] = []  # in a forked child, the parent's connections: kept (closing one drops locks), unused


def _share(directory: Path, path: Path, schema: str) -> _Shared:
    """This process's connection to ``path`` (opened and checked if it is the first), one more user counted."""
    key = (os.getpid(), os.path.realpath(path))
    try:
        with _OPEN_LOCK:
            shared = _OPEN.get(key)
            if shared is None:
                shared = _OPEN[key] = _Shared(key, open_owner_only(directory, path, schema))
                shared.schemas.add(schema)
            shared.users += 1
    finally:
        _count_off_given_up()
    if schema not in shared.schemas:  # another kind of store on the same file (rows beside the transcripts)
        try:
            with shared.lock:
                _retry_locked(lambda: shared.connection.execute(schema))
                shared.schemas.add(schema)
        except BaseException as exc:
            _give_up(shared)
            if isinstance(exc, sqlite3.DatabaseError) and is_write_failure(exc) and not _busy(exc):
                raise _unreadable(path, str(exc)) from exc
            raise
    return shared


def _give_up(shared: _Shared) -> None:
    """One user fewer. Also what a collected store object's finalizer calls, which may run inside any code, even
    ``_share`` in this thread holding the lock: so it only queues, and counts off when the lock is free."""
    _GIVEN_UP.append(shared)
    _count_off_given_up()


def _count_off_given_up() -> None:
    while _GIVEN_UP and _OPEN_LOCK.acquire(blocking=False):
        try:
            while _GIVEN_UP:
                shared = _GIVEN_UP.pop()
                if shared.pid != os.getpid():
                    continue  # a parent's connection seen from a forked child: never touched
                shared.users -= 1
                if shared.users == 0:
                    del _OPEN[shared.key]
                    shared.connection.close()
        finally:
            _OPEN_LOCK.release()


def _forget_parent_connections() -> None:
    """In a forked child: the parent's connections are set aside, never used nor closed."""
    global _OPEN_LOCK
    _OPEN_LOCK = threading.Lock()  # another thread of the parent may have held it at the fork
    _INHERITED.extend(_OPEN.values())
    _OPEN.clear()
    _GIVEN_UP.clear()


os.register_at_fork(after_in_child=_forget_parent_connections)


class OwnerOnlyStore:
    """One owner-only SQLite file (``open_owner_only``) holding one table, shared by threads and by every store
    object on the file in this process (one connection and its lock), and by processes (each opens its own). The
    file is opened, and checked, when the store is made: ``StoreUnreadable`` if it cannot be used."""

    FILE: str
    SCHEMA: str
    TABLE: str
    LABEL = "the cache file"  # the store as its write failure names it ("the judge's cache")

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory).expanduser()
        self.path = self.directory / self.FILE
        self._attach_lock = threading.Lock()
        self._shared: _Shared | None = None
        self._release: weakref.finalize | None = None
        self._here()

    def _here(self) -> _Shared:
        """This process's shared connection, taken again after ``close`` or a fork."""
        shared = self._shared
        if shared is not None and shared.pid == os.getpid():
            return shared
        with self._attach_lock:
            if self._shared is None or self._shared.pid != os.getpid():
                if self._release is not None:
                    self._release.detach()  # a parent's reference, inherited: not this process's to give up
                self._shared = _share(self.directory, self.path, self.SCHEMA)
                self._release = weakref.finalize(self, _give_up, self._shared)
            return self._shared

    def _connection(self) -> sqlite3.Connection:
        return self._here().connection

    @contextlib.contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """The shared connection, under the lock every store object on this file takes."""
        shared = self._here()
        with shared.lock:
            yield shared.connection

    def __len__(self) -> int:
        with self._connected() as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {self.TABLE}").fetchone()[0]

    def _select_many(self, query: str, keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows ``query`` (a SELECT ending ``WHERE key IN ({})``) finds for ``keys``, asked a chunk at a time."""
        distinct = list(dict.fromkeys(keys))
        found: list[tuple[Any, ...]] = []
        with self._connected() as conn:
            for start in range(0, len(distinct), _KEYS_PER_QUERY):
                chunk = distinct[start : start + _KEYS_PER_QUERY]
                found.extend(conn.execute(query.format(",".join("?" * len(chunk))), chunk))
        return found

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the shared connection, under its lock. ``BEGIN IMMEDIATE`` takes the write
        lock first (waiting for another process's writer); on an error it is rolled back only if still open: SQLite
        rolls back by itself on some errors (a full disk, a busy or failing file), and a second ROLLBACK would hide
        that error behind "cannot rollback - no transaction is active"."""
        with self._connected() as conn:
            _retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _insert_many(self, statement: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """``statement`` (an INSERT) for every row, in one transaction."""
        with self._transaction() as conn:
            conn.executemany(statement, rows)

    @property
    def write_failure(self) -> StoreWriteError | None:
        """The write to this file that failed in this process, if one did: nothing more is written while it is open."""
        return self._here().write_failure

    def _write(self, write: Callable[[], object], *, what: str, kept: str) -> bool:
        """``write()``, unless a write to this file failed before; True if it wrote. A write the file or its disk
        refuses (``store_writes``) is said once, naming ``what`` could not be stored and what that costs (``kept``),
        and stops the writes to the file: it never raises, for what it would store is already in memory."""
        failure = self._here().write_failure
        if failure is not None:
            note_write_failure(failure)
            return False
        try:
            write()
            return True
        except sqlite3.DatabaseError as exc:
            if not is_write_failure(exc):
                raise
            self._writes_failed(what, " ".join(str(exc).split()), kept)
            return False

    def _writes_failed(self, what: str, problem: str, kept: str) -> None:
        """No more writes to this file in this process, said once (also when another process failed to write it)."""
        shared = self._here()
        with shared.lock:
            if shared.write_failure is not None:
                return
            shared.write_failure = failure = StoreWriteError(self.path, self.LABEL, what, problem, kept)
        say_write_failure(failure)

    def close(self) -> None:
        """Give up this store's share of the connection (closed with the last one); using the store again reopens."""
        with self._attach_lock:
            if self._release is not None:
                self._release()  # once: a finalizer runs at most once
            self._shared, self._release = None, None
