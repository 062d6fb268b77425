"""Content-addressed, on-disk cache of what the judge endpoint answered (SQLite in WAL mode).

A key is the SHA-256 of everything that can change an answer: model, base URL, messages, answer schema,
temperature, seed, max_tokens and prompt version. The value is the request's *transcript*: the response mode and
every HTTP-200 reply it got (the repair turn included), valid or not; the Judge validates it again when it reads
it, so an invalid answer replays as the same error without a call. Transport failures (timeouts, 5xx, 429, broken
connections, bodies that are not a chat completion) are never stored. The API key is never part of a key or a
value. Several threads and processes may read and write at once: WAL lets readers run beside one writer,
``busy_timeout`` makes writers wait their turn, and ``INSERT OR IGNORE`` keeps the first transcript for a key, so a
key is stored once however many workers computed it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .replies import CallResult

__all__ = ["CACHE_FILE", "JudgeCache", "Transcript", "cache_key", "canonical_json", "canonical_material", "default_cache_dir", "open_owner_only"]

CACHE_FILE = "judge-cache.sqlite3"
_BUSY_S = 60  # how long a process waits for another one holding the cache
_KEYS_PER_QUERY = 900  # well under SQLite's limit on parameters
# A table of its own (the earlier ``answers`` table held validated answers only): old files open, their rows unused.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS transcripts (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    transcript_json TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$MGM_CACHE_DIR`` (of ``environ``, default ``os.environ``), else the user cache dir (e.g.
    ``~/.cache/mlflow_genai_metrics``)."""
    configured = (os.environ if environ is None else environ).get("MGM_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("mlflow_genai_metrics"))


def cache_key(
    *,
    model: str,
    base_url: str,
    messages: list[dict[str, str]],
    answer_schema: dict[str, Any] | str,
    temperature: float,
    seed: int | None,
    max_tokens: int | None,
    prompt_version: str,
) -> str:
    """SHA-256 over a canonical JSON of every input that can change the answer: the object below, keys sorted,
    no spaces, UTF-8 (``canonical_material``), assembled here field by field in that same order. ``answer_schema``
    may come already encoded that way (``canonical_json``), as the judge passes it: a schema is the same for every
    request of its kind, and encoding it each time was most of a cached request's cost."""
    canonical = "".join((
        '{"base_url":', canonical_json(base_url),
        ',"max_tokens":', canonical_json(max_tokens),
        ',"messages":', canonical_json(messages),
        ',"model":', canonical_json(model),
        ',"prompt_version":', canonical_json(prompt_version),
        ',"schema":', answer_schema if isinstance(answer_schema, str) else canonical_json(answer_schema),
        ',"seed":', canonical_json(seed),
        ',"temperature":', canonical_json(temperature),
        "}",
    ))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def canonical_material(**material: Any) -> str:
    """The JSON ``cache_key`` hashes (the keyword arguments, ``answer_schema`` named ``schema``): for tests."""
    material["schema"] = material.pop("answer_schema")
    return canonical_json(material)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # made once: json.dumps with
# these arguments makes a new encoder per call, which costs more than encoding a key's small fields


def canonical_json(value: Any) -> str:
    """JSON with keys sorted, no spaces, non-ASCII as is (``json.dumps`` with those settings): what cache keys hash."""
    return _CANONICAL.encode(value)



def open_owner_only(directory: Path, path: Path, schema: str) -> sqlite3.Connection:
    """A SQLite file in WAL mode, its folder 0700 and its files 0600 whatever existed before (cached answers quote
    the user's articles and summaries), with ``schema`` created; safe for many threads and processes."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    _owner_only(directory, 0o700)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))  # SQLite gives new -wal/-shm the same mode
    for existing in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):  # the last connection elsewhere may remove -wal/-shm meanwhile
            _owner_only(existing, 0o600)
    conn = sqlite3.connect(path, timeout=_BUSY_S, check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={_BUSY_S * 1000}")

    def prepare() -> None:
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(schema)

    try:
        _retry_locked(prepare)
    except BaseException:
        conn.close()
        raise
    return conn


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
    """Give ``path`` exactly ``mode`` (0700, 0600); a clear error if that cannot be done."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current == mode:
        return
    try:
        os.chmod(path, mode)
    except OSError as exc:
        raise PermissionError(
            f"the judge cache {path} has mode {current:04o} and cannot be made {mode:04o} ({exc.strerror}); cached "
            "replies quote your articles and summaries, so the cache must be readable by its owner only. Give it a "
            "folder of your own: Judge(cache_dir=...) or MGM_CACHE_DIR."
        ) from exc


class Transcript(BaseModel):
    """Every HTTP-200 reply one request got, in order, and the response mode they were asked in."""

    mode: str | None = None
    calls: list[CallResult] = Field(default_factory=list)


class OwnerOnlyStore:
    """One owner-only SQLite file (``open_owner_only``) holding one table, shared by threads (a lock) and
    processes (each opens its own connection): the judge's cache and the grounding cache are both one."""

    FILE: str
    SCHEMA: str
    TABLE: str

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory).expanduser()
        self.path = self.directory / self.FILE
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _connection(self) -> sqlite3.Connection:
        # A connection must not cross a fork; each process opens its own.
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = open_owner_only(self.directory, self.path, self.SCHEMA), os.getpid()
        return self._conn

    def __len__(self) -> int:
        with self._lock:
            return self._connection().execute(f"SELECT COUNT(*) FROM {self.TABLE}").fetchone()[0]

    def _select_many(self, query: str, keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows ``query`` (a SELECT ending ``WHERE key IN ({})``) finds for ``keys``, asked a chunk at a time."""
        distinct = list(dict.fromkeys(keys))
        found: list[tuple[Any, ...]] = []
        with self._lock:
            conn = self._connection()
            for start in range(0, len(distinct), _KEYS_PER_QUERY):
                chunk = distinct[start : start + _KEYS_PER_QUERY]
                found.extend(conn.execute(query.format(",".join("?" * len(chunk))), chunk))
        return found

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on this process's connection, under the lock. ``BEGIN IMMEDIATE`` takes the write
        lock first (waiting for another process's writer); on an error it is rolled back only if still open: SQLite
        rolls back by itself on some errors (a full disk, a busy or failing file), and a second ROLLBACK would hide
        that error behind "cannot rollback - no transaction is active"."""
        with self._lock:
            conn = self._connection()
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

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class JudgeCache(OwnerOnlyStore):
    """A SQLite file of request transcripts, safe to share between threads and processes."""

    FILE, SCHEMA, TABLE = CACHE_FILE, _SCHEMA, "transcripts"

    def get(self, key: str) -> Transcript | None:
        """The transcript stored for ``key``; None when there is none (or it cannot be read: asked again)."""
        with self._lock:
            row = self._connection().execute("SELECT transcript_json FROM transcripts WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return Transcript.model_validate_json(row[0])
        except ValidationError:
            return None

    def put(self, key: str, *, model: str, prompt_version: str, transcript: Transcript, replace: bool = False) -> None:
        """Store a transcript; an existing one for ``key`` is kept unless ``replace`` (a longer or re-asked one)."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock:
            self._connection().execute(
                f"{verb} INTO transcripts VALUES (?, ?, ?, ?, ?)",
                (key, model, prompt_version, transcript.model_dump_json(), time.time()),
            )

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])
