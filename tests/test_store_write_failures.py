"""A store that cannot be written mid-run (a full disk, a read-only file): the run keeps every answer it paid for and
every score it computed, the failure is said once naming the file and the fix (``store_writes``), and ``mgm`` exits
2 with one line. It once raised a raw ``sqlite3.OperationalError`` naming no file, after the requests were paid,
with no result (issue 45, item 11)."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow_helpers import Endpoint, frame

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.grounding.worker import EXIT_UNWRITABLE
from mlflow_genai_metrics.judge.cache import CACHE_FILE
from mlflow_genai_metrics.store_writes import StoreWriteError, StoreWriteWarning
from mlflow_genai_metrics.summarization import grounded, grounding_metrics
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import load_run

GROUNDING_FILE = "grounding-cache.sqlite3"
ROWS = 12
SOURCES = [f"Article {i} says the council approved budget number {i}. The mayor welcomed the decision. Critics objected." for i in range(ROWS)]
SUMMARIES = [f"The council approved budget number {i}. The mayor welcomed it." for i in range(ROWS)]


class ReadOnlyAfter:
    """A store connection whose file turns read-only after ``answers`` writes into ``table``: the error SQLite raises
    then, in its words."""

    def __init__(self, connection: sqlite3.Connection, table: str, answers: int):
        self._connection, self._table, self._left = connection, table, answers

    def _check(self, statement: str) -> None:
        if f"INTO {self._table} " in statement:
            if self._left <= 0:
                raise sqlite3.OperationalError("attempt to write a readonly database")
            self._left -= 1

    def execute(self, statement: str, *args):
        self._check(statement)
        return self._connection.execute(statement, *args)

    def executemany(self, statement: str, *args):
        self._check(statement)
        return self._connection.executemany(statement, *args)

    def __getattr__(self, name: str):
        return getattr(self._connection, name)


def unwritable_after(monkeypatch, file_name: str, *, pages: int | None = None, answers: int | None = None) -> Callable:
    """Every connection this process opens to a store file named ``file_name`` finds its disk full ``pages`` pages
    on (SQLite's ``max_page_count``: "database or disk is full"), or the file read-only after ``answers`` answers
    (``ReadOnlyAfter``). Returns the real ``open_owner_only``, to put back."""
    from mlflow_genai_metrics import sqlite_store

    opened = sqlite_store.open_owner_only

    def limited(directory: Path, path: Path, schema: str):
        connection = opened(directory, path, schema)
        if path.name != file_name:
            return connection
        if pages is not None:
            connection.execute(f"PRAGMA max_page_count={connection.execute('PRAGMA page_count').fetchone()[0] + pages}")
            return connection
        return ReadOnlyAfter(connection, "transcripts", answers)

    monkeypatch.setattr(sqlite_store, "open_owner_only", limited)
    return opened


def stored_answers(cache_dir: Path) -> int:
    with sqlite3.connect(cache_dir / CACHE_FILE) as db:
        return db.execute("SELECT COUNT(*) FROM transcripts").fetchone()[0]


def judged(result) -> pd.DataFrame:
    """The rows' values and reasons, without what timing and the cache change."""
    return result.rows.drop(columns=[c for c in result.rows if "latency" in c or c.startswith("judge_")])


@pytest.mark.parametrize("failure, said", [
    (dict(pages=2), "database or disk is full"),
    (dict(answers=5), "attempt to write a readonly database"),
])
def test_a_judge_cache_that_cannot_be_written_mid_run_keeps_every_answer_and_names_the_file_and_the_fix(
        scripted_server, tmp_path, monkeypatch, failure, said):
    server = scripted_server(SummarizationJudgeScript())
    expected = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "roomy", max_concurrency=1), coverage=False)
    asked = server.request_count  # every request one run makes

    opened = unwritable_after(monkeypatch, CACHE_FILE, **failure)
    cache = tmp_path / "full"
    judge = judge_for(server, cache_dir=cache, max_concurrency=1)
    with pytest.warns(StoreWriteWarning) as warned:
        result = judge_summaries(SOURCES, SUMMARIES, judge=judge, coverage=False)
    # every answer paid for is in the result: every row judged, each request asked once, the same values
    assert server.request_count == 2 * asked
    assert (result.rows["error"] == "").all() and len(result.rows) == ROWS
    pd.testing.assert_frame_equal(judged(result), judged(expected))
    assert result.metrics["judge/calls"] == asked
    # said once, naming the file, why and the fix
    assert len([w for w in warned if w.category is StoreWriteWarning]) == 1
    message = str(warned[0].message)
    assert message.startswith(f"could not store a judge's answer in the judge's cache {cache / CACHE_FILE} ({said}); ")
    assert message.endswith("free space on its disk (or make it writable), or point MGM_CACHE_DIR or Judge(cache_dir=...) at another folder")
    assert isinstance(judge.cache.write_failure, StoreWriteError) and judge.cache.write_failure.path == cache / CACHE_FILE
    stored = stored_answers(cache)
    assert 0 < stored < asked
    if "answers" in failure:
        assert stored == failure["answers"]

    # the answers stored before the failure are kept for a rerun: once the disk has room, it asks only the others
    judge.close()
    monkeypatch.setattr("mlflow_genai_metrics.sqlite_store.open_owner_only", opened)
    rerun = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=cache, max_concurrency=1), coverage=False)
    assert server.request_count == 3 * asked - stored
    pd.testing.assert_frame_equal(judged(rerun), judged(expected))


def test_mgm_evaluate_on_a_full_disk_logs_every_row_then_exits_2_in_one_line_naming_the_file(
        scripted_server, mlflow_store, tmp_path, monkeypatch, capsys):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    cache = tmp_path / "cache"
    for name, value in {"MGM_CACHE_DIR": str(cache), "OPENAI_API_KEY": SECRET_KEY, "MGM_JUDGE_MODEL": "scripted-judge",
                        "MGM_JUDGE_BASE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "summaries.csv"
    frame().to_csv(path, index=False)
    unwritable_after(monkeypatch, CACHE_FILE, pages=2)

    code = mgm(["evaluate", str(path), "--id-col", "id", "--tracking-uri", mlflow_store])
    out, err = capsys.readouterr()
    assert code == 2, err
    # MLflow's own progress bar aside ("Evaluating: ..."), one line: no traceback, no warning
    said = [line for line in err.splitlines() if line.strip() and not line.startswith("Evaluating:")]
    assert said == [
        f"mgm evaluate: could not store a judge's answer in the judge's cache {cache / CACHE_FILE} (database or disk is full); "
        "every answer is kept in the results, but none from this one on is cached: a rerun asks those again; "
        "free space on its disk (or make it writable), or set MGM_CACHE_DIR to another folder"
    ]
    # what was judged is kept: the run is logged with every row judged
    run_id = re.search(r"^run ([0-9a-f]{32}) ", out, re.MULTILINE).group(1)
    rows = load_run(run_id).rows
    assert len(rows) == len(frame()) and (rows["error"].fillna("") == "").all()
    assert 0 < stored_answers(cache) < server.request_count


def test_a_grounding_cache_that_cannot_be_written_keeps_every_score_and_names_the_file(tmp_path, monkeypatch):
    expected = grounding_metrics(SOURCES, SUMMARIES, cache_dir=tmp_path / "roomy")
    unwritable_after(monkeypatch, GROUNDING_FILE, pages=0)
    with pytest.warns(StoreWriteWarning, match=re.escape(f"in the grounding cache {tmp_path / 'full' / GROUNDING_FILE} (database or disk is full)")):
        result = grounding_metrics(SOURCES, SUMMARIES, cache_dir=tmp_path / "full")
    pd.testing.assert_frame_equal(result.rows, expected.rows)
    assert result.computed_rows == ROWS


WORKER_ROWS = grounded.ROWS_FOR_A_PROCESS + 8
# the worker as it runs, but its own connection to the grounding cache finds the disk full (no page to add)
FULL_WORKER = (sys.executable, "-c", """
import runpy
from mlflow_genai_metrics import sqlite_store
opened = sqlite_store.open_owner_only
def full(directory, path, schema):
    connection = opened(directory, path, schema)
    connection.execute(f"PRAGMA max_page_count={connection.execute('PRAGMA page_count').fetchone()[0]}")
    return connection
sqlite_store.open_owner_only = full
runpy.run_module("mlflow_genai_metrics.grounding.worker", run_name="__main__")
""")


def test_a_grounding_worker_that_cannot_write_the_cache_stops_and_is_reported_and_the_run_keeps_every_score(
        scripted_server, tmp_path, monkeypatch):
    workers = []
    original = grounded.GroundingInAnotherProcess.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.command = FULL_WORKER
        workers.append(self)

    monkeypatch.setattr(grounded.GroundingInAnotherProcess, "__init__", init)
    sources = [f"Article {i}: the council approved budget {i} on Monday. The mayor welcomed budget {i}." for i in range(WORKER_ROWS)]
    summaries = [f"The council approved budget {i}." for i in range(WORKER_ROWS)]
    server = scripted_server(SummarizationJudgeScript())
    cache = tmp_path / "cache"
    with pytest.warns(StoreWriteWarning) as warned:
        result = judge_summaries(sources, summaries, judge=judge_for(server, cache_dir=cache, max_concurrency=8), coverage=False)
    # the worker stopped by itself at the failure (a worker killed at its deadline exits -9), and said why
    assert len(workers) == 1 and workers[0]._process.returncode == EXIT_UNWRITABLE
    said = [str(w.message) for w in warned if w.category is StoreWriteWarning]
    assert said == [
        f"could not store the grounding check's worker process's scores in the grounding cache {cache / GROUNDING_FILE} "
        "(database or disk is full); every score is kept in the results, but none from these on is stored: a rerun "
        "computes those again; free space on its disk (or make it writable), or point MGM_CACHE_DIR or "
        "Judge(cache_dir=...) at another folder"
    ]
    # every row scored all the same, in this process after the judge: the numbers the check gives without a cache
    expected = grounding_metrics(sources, summaries, cache=False)
    assert (result.rows["error"] == "").all()
    assert list(result.rows["grounding"]) == list(expected.rows["grounding"])


def test_a_batch_store_that_cannot_be_written_says_so_once_and_the_run_goes_on(tmp_path, monkeypatch):
    from mlflow_genai_metrics.judge.batch.store import BATCH_FILE, BatchStore

    unwritable_after(monkeypatch, BATCH_FILE, pages=0)
    store = BatchStore(tmp_path)
    with pytest.warns(StoreWriteWarning) as warned:
        store.record("batch-1", [f"call-{i}" for i in range(500)])
        store.end("batch-1")  # not written either, and not said again
    assert [str(w.message) for w in warned if w.category is StoreWriteWarning] == [
        f"could not store which 500 call(s) batch batch-1 holds in the judge's batch store {tmp_path / BATCH_FILE} "
        "(database or disk is full); the batch is read as usual, but a run interrupted before then would submit (and "
        "pay for) its calls again; free space on its disk (or make it writable), or point MGM_CACHE_DIR or "
        "Judge(cache_dir=...) at another folder"
    ]
    assert store.batches() == {} and store.write_failure is not None
    store.close()
