"""On-disk cache of grounding results, keyed by (model tag, source hash, summary hash), beside the judge's cache.

A SQLite file (``grounding-cache.sqlite3``) in ``sqlite_store.default_cache_dir()``, owner-only like the judge's
(0700 folder, 0600 file: the reasoning quotes the summaries). Looking a row up costs tens of microseconds against
about a millisecond and a half to score it (``docs/benchmarks.md``), so a rerun reads instead of recomputing. A
new model file has a new tag, so its rows are never mixed with another model's. A write the file refuses (a full
disk) is said once and stops the cache's writes (``store_writes``): the results are computed all the same.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence

from ..sqlite_store import OwnerOnlyStore, default_cache_dir
from .features import SourceIndex
from .model import GroundingModel, load_model
from .scoring import RowGrounding, lexical_supports, score_pairs

CACHE_FILE = "grounding-cache.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS grounding (
    key TEXT PRIMARY KEY,  -- model tag|source hash|summary hash
    model_tag TEXT NOT NULL,
    result_json TEXT NOT NULL
)
"""

Key = tuple[str, str, str]
_KEPT = "every score is kept in the results, but none from these on is stored: a rerun computes those again"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class GroundingCache(OwnerOnlyStore):
    """Grounding results by (model tag, source hash, summary hash); safe to share between threads and processes."""

    FILE, SCHEMA, TABLE, LABEL = CACHE_FILE, _SCHEMA, "grounding", "the grounding cache"

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        super().__init__(directory if directory is not None else default_cache_dir())

    def failed_in_worker(self, problem: str) -> None:
        """The grounding check's worker process could not write this file (``problem``: SQLite's words): said once,
        as this process's own failure would be, and this process stops writing it too."""
        self._writes_failed("the grounding check's worker process's scores", problem, _KEPT)

    def get_many(self, keys: Sequence[Key]) -> dict[Key, RowGrounding]:
        """The stored results among ``keys`` (absent keys are simply missing)."""
        wanted = {"|".join(key): key for key in keys}
        rows = self._select_many("SELECT key, result_json FROM grounding WHERE key IN ({})", list(wanted))
        return {wanted[key]: RowGrounding(**json.loads(value)) for key, value in rows}

    def put_many(self, items: Sequence[tuple[Key, RowGrounding]]) -> None:
        """Store results; a key stored before keeps its first value (same model and texts, same result). A write
        the file refuses is said once and stops the cache's writes; the results are the caller's all the same."""
        # vars: the three fields, in order, as ``asdict`` gives them without its deep copy
        records = [("|".join(key), key[0], json.dumps(vars(value))) for key, value in items]
        self._write(lambda: self._insert_many("INSERT OR IGNORE INTO grounding VALUES (?, ?, ?)", records),
                    what=f"the grounding of {len(records)} text(s)",
                    kept=_KEPT)


def _through_cache(keys: list[Key], cache: GroundingCache | None, compute) -> tuple[list[RowGrounding], int, int]:
    """Each key's result: from the cache where it has one, else ``compute`` (given the positions of the first
    occurrence of each missing key) and stored. Returns the results in order, how many distinct keys were computed
    and how many keys were read from the cache."""
    fresh: list[tuple[Key, RowGrounding]] = []
    results = _through_found(keys, cache.get_many(keys) if cache is not None else {}, compute, fresh)
    if fresh and cache is not None:
        cache.put_many(fresh)
    return results


def _through_found(keys: list[Key], found: dict[Key, RowGrounding], compute,
                   fresh: list[tuple[Key, RowGrounding]]) -> tuple[list[RowGrounding], int, int]:
    """``_through_cache`` given what the cache holds (``found``): the results computed now are added to ``fresh``
    (for the caller to store), not stored."""
    missing = list(dict.fromkeys(key for key in keys if key not in found))
    if missing:
        first = {key: position for position, key in reversed(list(enumerate(keys)))}
        computed = list(zip(missing, compute([first[key] for key in missing])))
        fresh.extend(computed)
        found = {**found, **dict(computed)}
    recomputed = set(missing)
    hits = sum(1 for key in keys if key not in recomputed)
    return [found[key] for key in keys], len(missing), hits


def _hashes(texts: Sequence[str]) -> dict[str, str]:
    """``text_hash`` of each distinct text (a source shared by many rows or claims is hashed once)."""
    return {text: text_hash(text) for text in dict.fromkeys(texts)}


def _row_keys(tag: str, sources: Sequence[str], summaries: Sequence[str], hashes: dict[str, str] | None = None) -> list[Key]:
    """Each (source, summary) pair's key (``hashes``: the sources' hashes when the caller has them)."""
    hashes = hashes if hashes is not None else _hashes(sources)
    return [(tag, hashes[source], text_hash(summary)) for source, summary in zip(sources, summaries)]


def cached_groundings(sources: Sequence[str], summaries: Sequence[str], cache: GroundingCache | None,
                      indexes: dict[str, SourceIndex] | None = None) -> tuple[list[RowGrounding], int, int]:
    """Each (source, summary) pair's ``RowGrounding`` with the shipped model, computed once per distinct pair and
    only when the cache lacks it; also how many pairs were computed now and how many rows came from the cache.
    ``indexes``: the caller's source indexes (``scoring.source_indexes``), shared with its next call."""
    model = load_model()
    return _through_cache(_row_keys(model.tag, sources, summaries), cache, _groundings_of(sources, summaries, model, indexes))


def uncached_rows(sources: Sequence[str], summaries: Sequence[str], cache: GroundingCache) -> list[int]:
    """The positions of the (source, summary) pairs whose grounding the cache lacks."""
    keys = _row_keys(load_model().tag, sources, summaries)
    stored = cache.get_many(keys)
    return [position for position, key in enumerate(keys) if key not in stored]


def cached_supports(claims: Sequence[str], sources: Sequence[str], cache: GroundingCache | None,
                    indexes: dict[str, SourceIndex] | None = None) -> list[float]:
    """Each claim's ``lexical_support`` against its source (NaN for a claim with no word), through the cache;
    ``indexes`` as for ``cached_groundings``."""
    model = load_model()
    results, _, _ = _through_cache(_claim_keys(model.tag, claims, sources), cache, _supports_of(claims, sources, model, indexes))
    return _support_values(results)


def cached_scores(sources: Sequence[str], summaries: Sequence[str], claims: Sequence[str], claim_sources: Sequence[str],
                  cache: GroundingCache | None, indexes: dict[str, SourceIndex] | None = None,
                  unstored: dict[Key, RowGrounding] | None = None) -> tuple[list[RowGrounding], list[float]]:
    """``cached_groundings(sources, summaries)`` and ``cached_supports(claims, claim_sources)`` with one read of the
    cache and one write for both (a transaction less for each of the grounding worker's rows). ``unstored``: results
    the caller holds to store later (``store_unstored``), read as the cache's; what this call computes is added to it
    instead of written."""
    model = load_model()
    hashes = _hashes([*sources, *claim_sources])  # a row's source hashed once, for its summary and its claims
    row_keys = _row_keys(model.tag, sources, summaries, hashes)
    claim_keys = _claim_keys(model.tag, claims, claim_sources, hashes)
    keys = row_keys + claim_keys
    held = {key: unstored[key] for key in keys if key in unstored} if unstored else {}
    asked = [key for key in keys if key not in held]  # what only the cache can have
    found = {**(cache.get_many(asked) if cache is not None and asked else {}), **held}
    fresh: list[tuple[Key, RowGrounding]] = []
    groundings, _, _ = _through_found(row_keys, found, _groundings_of(sources, summaries, model, indexes), fresh)
    supports, _, _ = _through_found(claim_keys, found, _supports_of(claims, claim_sources, model, indexes), fresh)
    if unstored is not None:
        unstored.update(fresh)
    elif fresh and cache is not None:
        cache.put_many(fresh)
    return groundings, _support_values(supports)


def store_unstored(cache: GroundingCache, unstored: dict[Key, RowGrounding]) -> None:
    """Write the results ``cached_scores`` held back (one transaction), and forget them."""
    if unstored:
        cache.put_many(list(unstored.items()))
        unstored.clear()


def _claim_keys(tag: str, claims: Sequence[str], sources: Sequence[str], hashes: dict[str, str] | None = None) -> list[Key]:
    # A claim's entry is keyed apart from a summary's: the same text scored as a claim is stored as its support.
    hashes = hashes if hashes is not None else _hashes(sources)
    return [(tag, hashes[source], "claim:" + text_hash(claim)) for claim, source in zip(claims, sources)]


def _groundings_of(sources: Sequence[str], summaries: Sequence[str], model: GroundingModel,
                   indexes: dict[str, SourceIndex] | None) -> Callable[[list[int]], list[RowGrounding]]:
    """``compute`` for ``_through_found``: the groundings of the pairs at the positions given."""
    return lambda positions: score_pairs([sources[p] for p in positions], [summaries[p] for p in positions], model=model, indexes=indexes)


def _supports_of(claims: Sequence[str], sources: Sequence[str], model: GroundingModel,
                 indexes: dict[str, SourceIndex] | None) -> Callable[[list[int]], list[RowGrounding]]:
    """``compute`` for ``_through_found``: the supports of the claims at the positions given, as ``RowGrounding``s."""
    def compute(positions: list[int]) -> list[RowGrounding]:
        supports = lexical_supports([claims[p] for p in positions], [sources[p] for p in positions], model=model, indexes=indexes)
        return [RowGrounding(None if math.isnan(s) else s, None, "") for s in supports]

    return compute


def _support_values(results: list[RowGrounding]) -> list[float]:
    return [math.nan if r.grounding is None else r.grounding for r in results]
