"""Which batch each call was submitted in, beside the judge's cache: what lets an interrupted run poll the batch it
submitted instead of submitting (and paying for) it again.

A line is its call's ``custom_id`` (the hash of the call's body and endpoint, ``files``), so a rerun asking
the same calls finds them whatever else it asks. A batch stays ``submitted`` until its results were read; then it
is ``ended`` and its calls are never polled there again (what it answered is in the judge's cache; what failed is
asked again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ...sqlite_store import OwnerOnlyStore

BATCH_FILE = "judge-batches.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_lines (
    custom_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (custom_id, batch_id)
)
"""


class BatchStore(OwnerOnlyStore):
    """The batches submitted, by the calls they hold (an owner-only SQLite file in the cache folder)."""

    FILE, SCHEMA, TABLE, LABEL = BATCH_FILE, _SCHEMA, "batch_lines", "the judge's batch store"

    def record(self, batch_id: str, custom_ids: Iterable[str]) -> None:
        """``batch_id`` was submitted holding these calls (a write the file refuses is said once: ``store_writes``)."""
        now = time.time()
        lines = [(custom_id, batch_id, now) for custom_id in custom_ids]

        def insert() -> None:
            with self._transaction() as conn:
                conn.executemany("INSERT OR REPLACE INTO batch_lines VALUES (?, ?, 'submitted', ?)", lines)

        self._write(insert, what=f"which {len(lines)} call(s) batch {batch_id} holds",
                    kept="the batch is read as usual, but a run interrupted before then would submit (and pay for) its calls again")

    def submitted(self, custom_ids: Iterable[str]) -> dict[str, str]:
        """For each of these calls that waits in a batch not yet read, that batch's id (the latest submitted)."""
        found: dict[str, str] = {}
        with self._connected() as conn:
            for custom_id in custom_ids:
                row = conn.execute(
                    "SELECT batch_id FROM batch_lines WHERE custom_id = ? AND state = 'submitted' "
                    "ORDER BY created_at DESC LIMIT 1", (custom_id,)).fetchone()
                if row is not None:
                    found[custom_id] = row[0]
        return found

    def end(self, batch_id: str) -> None:
        """The batch's results were read: none of its calls is polled there again."""

        def update() -> None:
            with self._connected() as conn:
                conn.execute("UPDATE batch_lines SET state = 'ended' WHERE batch_id = ?", (batch_id,))

        self._write(update, what=f"that batch {batch_id} was read",
                    kept="its answers are in the results, but a rerun may poll it again")

    def batches(self) -> dict[str, str]:
        """Every batch recorded and its state (for tests and troubleshooting)."""
        with self._connected() as conn:
            rows = conn.execute("SELECT DISTINCT batch_id, state FROM batch_lines").fetchall()
        return dict(rows)
