"""Content-addressed, on-disk cache of what the judge endpoint answered (SQLite in WAL mode).

A key is the SHA-256 of everything that can change an answer: model, base URL, messages, answer schema,
temperature, seed, max_tokens and prompt version. The value is the request's *transcript*: the response mode and
every HTTP-200 reply it got (the repair turn included), valid or not; the Judge validates it again when it reads
it, so an invalid answer replays as the same error without a call. Transport failures (timeouts, 5xx, 429, broken
connections, bodies that are not a chat completion) are never stored. The API key is never part of a key or a
value. Several threads and processes may read and write at once: WAL lets readers run beside one writer,
``busy_timeout`` makes writers wait their turn, and ``INSERT OR IGNORE`` keeps the first transcript for a key, so a
key is stored once however many workers computed it. The file is one owner-only store (``sqlite_store``): every
store object on it in a process shares one connection, and one that cannot be read raises ``StoreUnreadable``
when the cache is made. One that cannot be written mid-run (a full disk) does not raise: the answer is returned,
and the cache stops writing and says so once (``store_writes``).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..sqlite_store import OwnerOnlyStore
from ..store_writes import JUDGE_CACHE
from .replies import CallResult

CACHE_FILE = "judge-cache.sqlite3"
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


class Transcript(BaseModel):
    """Every HTTP-200 reply one request got, in order, and the response mode they were asked in."""

    mode: str | None = None
    calls: list[CallResult] = Field(default_factory=list)


class JudgeCache(OwnerOnlyStore):
    """A SQLite file of request transcripts, safe to share between threads and processes; opened (and checked)
    when made, so a Judge whose cache cannot be read fails when it is made, before any call."""

    FILE, SCHEMA, TABLE, LABEL = CACHE_FILE, _SCHEMA, "transcripts", JUDGE_CACHE

    def get(self, key: str) -> Transcript | None:
        """The transcript stored for ``key``; None when there is none, or when it cannot be read (another version's
        form, a damaged row): then it is removed, so the answer asked again takes its place (it was kept, and every
        run paid for the request again)."""
        with self._connected() as conn:
            row = conn.execute("SELECT transcript_json FROM transcripts WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return Transcript.model_validate_json(row[0])
        except ValidationError:
            def remove() -> None:
                with self._connected() as conn:
                    conn.execute("DELETE FROM transcripts WHERE key = ? AND transcript_json = ?", (key, row[0]))

            self._write(remove, what="that an unreadable answer be asked again",
                        kept="the request is asked again now, and at each run until the cache can be written")
            return None

    def put(self, key: str, *, model: str, prompt_version: str, transcript: Transcript, replace: bool = False) -> None:
        """Store a transcript; an existing one for ``key`` is kept unless ``replace`` (a longer or re-asked one).
        A write the file refuses (a full disk) is said once and stops the cache's writes; the answer is not lost."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        row = (key, model, prompt_version, transcript.model_dump_json(), time.time())

        def insert() -> None:
            with self._connected() as conn:
                conn.execute(f"{verb} INTO transcripts VALUES (?, ?, ?, ?, ?)", row)

        self._write(insert, what="a judge's answer",
                    kept="every answer is kept in the results, but none from this one on is cached: a rerun asks those again")

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])
