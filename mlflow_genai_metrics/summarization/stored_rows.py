"""Whole rows stored beside the judge's cache: an identical rerun reads each row once instead of replaying each of
its requests.

A row's record (claims with verdicts, key points with coverage) is a function of its source and summary, the
judge's settings that enter cache keys, the prompts, the run's options, the transcripts the cache holds for its
requests and the code that turns those into a record. The key hashes all of them but the transcripts, which are
the ones the record was made from (the first transcript stored for a request is kept for good); the code by the
text of the modules that do it, so an upgrade or an edit that could change a record never reads an old one. Only
rows judged without error are stored (a failure is asked again on the next run, as its transcript says), in the
judge's cache file, so they go with the transcripts they were made from. What the row's requests counted is stored
with it (requests, the model ids and response modes their replies named), so a row read here counts exactly as
its replayed requests would: as cache hits, in the row's usage and in the Judge's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .._version import __version__
from ..judge import CACHE_FILE, ExampleSet, Judge, Usage, canonical_json
from ..prompts import SUMMARY_PROMPTS, load_prompt
from ..sqlite_store import OwnerOnlyStore
from ..store_writes import JUDGE_CACHE
from .method import Method
from .order import OrderCheck
from .records import CheckedClaim, CoveredKeyPoint, RowInput

_SCHEMA = """
CREATE TABLE IF NOT EXISTS row_records (
    key TEXT PRIMARY KEY,
    record_json TEXT NOT NULL
)
"""


class Asked(BaseModel):
    """What a set of requests counted: how many, and the model ids and response modes their replies named."""

    requests: int = 0
    reported_models: dict[str, int] = {}
    response_modes: dict[str, int] = {}

    @classmethod
    def of(cls, usage: Usage) -> Asked:
        return cls(requests=usage.requests, reported_models=usage.reported_models, response_modes=usage.response_modes)

    def count_cached(self, judge: Judge) -> Usage:
        return judge.count_cached(self.requests, self.reported_models, self.response_modes)


class StoredRow(BaseModel):
    """A row judged without error: its claims and key points, what its own requests counted (its claim passes in
    ``asked``, its coverage check in ``coverage_asked``), and what its source's key-point requests counted (with
    coverage; those are counted once per source, on the source's first row)."""

    claims: list[CheckedClaim]
    key_points: list[CoveredKeyPoint] | None
    order_check: OrderCheck | None = None
    asked: Asked
    coverage_asked: Asked | None = None
    key_points_asked: Asked | None = None


def _code_hash(package: Path = Path(__file__).resolve().parents[1]) -> str:
    """Every module of the package, by path and text: any edit or upgrade changes every key (a hand-kept list of the
    modules that make a record missed ``statements.py``, which de-duplicates claims). A few milliseconds per run."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class RowStore(OwnerOnlyStore):
    """Stored rows of one judge and one set of options, in the judge's cache file."""

    FILE, SCHEMA, TABLE, LABEL = CACHE_FILE, _SCHEMA, "row_records", JUDGE_CACHE

    def __init__(self, judge: Judge, method: Method, *, coverage: bool, max_source_tokens: int | None, examples: ExampleSet | None = None):
        assert judge.cache is not None, "rows are stored only beside a judge's cache"
        super().__init__(judge.cache.directory)
        settings = judge.settings
        material = {
            "model": settings.model, "base_url": settings.cache_endpoint, "temperature": settings.temperature,
            "seed": settings.seed, "stability": method.stability, "order_check": method.order_check,
            "max_tokens": settings.max_tokens, "prompts": [load_prompt(name).tag for name in SUMMARY_PROMPTS],
            "coverage": coverage, "max_source_tokens": max_source_tokens, "code": _code_hash(), "mgm": __version__,
            "examples": examples.tag if examples is not None else None,  # the run's: the method's less the rows'
        }
        self._run = hashlib.sha256(canonical_json(material).encode("utf-8"))

    def key(self, row: RowInput) -> str:
        digest = self._run.copy()
        for text in (row.source, row.summary):  # each text's length first: no two pairs of texts read the same
            encoded = text.encode("utf-8")
            digest.update(b"%d:" % len(encoded))
            digest.update(encoded)
        return digest.hexdigest()

    def read(self, keys: Sequence[str]) -> dict[str, StoredRow]:
        """The rows stored under ``keys`` (a row that cannot be read is left out: judged again)."""
        found = {}
        for key, text in self._select_many("SELECT key, record_json FROM row_records WHERE key IN ({})", keys):
            try:
                found[key] = StoredRow.model_validate_json(text)
            except ValidationError:
                continue
        return found

    def write(self, rows: Sequence[tuple[str, StoredRow]]) -> None:
        """Store rows; a key stored before keeps its first record. Stored rows only spare a rerun the replay of
        their transcripts, so failing to store them (a full disk, say) is a warning, never the loss of a run; like
        any write the file refuses, it stops the writes to the judge's cache file (``store_writes``)."""
        records = [(key, row.model_dump_json()) for key, row in rows]
        self._write(lambda: self._insert_many("INSERT OR IGNORE INTO row_records VALUES (?, ?)", records),
                    what=f"{len(rows)} judged row(s)",
                    kept="the results are unaffected, and a rerun replays these rows from the judge's cache instead of reading them whole")
