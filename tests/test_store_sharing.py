"""The SQLite stores under concurrency and damage: every store object on a file in a process shares one connection
(closing a second descriptor of the file dropped the process's locks, and another process then broke the WAL under
it), and a file that cannot be read stops a run before any judge call, naming the file."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.grounding.cache import CACHE_FILE as GROUNDING_FILE
from mlflow_genai_metrics.grounding.cache import GroundingCache
from mlflow_genai_metrics.judge.cache import CACHE_FILE, JudgeCache, Transcript
from mlflow_genai_metrics.sqlite_store import StoreUnreadable
from mlflow_genai_metrics.summarization.method import Method
from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript

SOURCES = [f"Article {i} says the council approved budget number {i}. The mayor welcomed the decision." for i in range(6)]
SUMMARIES = [f"The council approved budget number {i}. The mayor welcomed it." for i in range(6)]


# -- one connection per file per process ------------------------------------------------------------------------


def _write_and_reopen(directory: str, seconds: float, ready, results) -> None:
    """Another process on the same file: it writes, reads, and closes and reopens its store every 20 operations."""
    cache, errors, done = JudgeCache(directory), Counter(), 0
    ready.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if done % 20 == 0:
                cache.close()
                cache = JudgeCache(directory)
            cache.put(f"other-{done}", model="m", prompt_version="v", transcript=Transcript())
            cache.get(f"other-{done // 2}")
        except sqlite3.Error as exc:
            errors[str(exc)] += 1
        done += 1
    cache.close()
    results.put((done, dict(errors)))


def test_two_stores_on_one_file_beside_a_process_writing_it_see_no_sqlite_error(tmp_path):
    """A store kept open and a second one opened and closed on the same file (a row store per batch), while another
    process writes: the second store's own descriptor, closed, dropped the first one's locks, and the test saw
    thousands of "disk I/O error" and "database disk image is malformed" in 3 s; now none."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_write_and_reopen, args=(str(tmp_path), 3.0, ready, results))
    writer.start()
    assert ready.wait(60)
    kept, errors, done = JudgeCache(tmp_path), Counter(), 0
    while writer.is_alive() or done < 2000:
        try:
            kept.put(f"kept-{done}", model="m", prompt_version="v", transcript=Transcript())
            kept.get(f"kept-{done // 2}")
            if done % 5 == 0:
                second = JudgeCache(tmp_path)
                len(second)
                second.close()
        except sqlite3.Error as exc:
            errors[str(exc)] += 1
        done += 1
    writer.join(30)
    other_done, other_errors = results.get(timeout=10)
    assert (dict(errors), other_errors, writer.exitcode) == ({}, {}, 0)
    assert done >= 2000 and other_done >= 500
    assert len(kept) == len({f"kept-{i}" for i in range(done)} | {f"other-{i}" for i in range(other_done)})


def test_store_objects_on_one_file_share_one_connection_closed_with_the_last(tmp_path):
    first, second = JudgeCache(tmp_path), JudgeCache(tmp_path)
    connection = first._connection()
    assert second._connection() is connection
    first.close()
    second.put("k", model="m", prompt_version="v", transcript=Transcript())  # closing one keeps the other working
    assert connection.execute("SELECT COUNT(*) FROM transcripts").fetchone() == (1,)
    second.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        connection.execute("SELECT 1")
    assert len(JudgeCache(tmp_path)) == 1  # a store made afterwards opens the file again


def test_a_store_collected_without_close_gives_up_its_share(tmp_path):
    store = JudgeCache(tmp_path)
    connection = store._connection()
    del store
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        connection.execute("SELECT 1")


def test_different_stores_on_one_file_share_its_connection_and_other_files_have_their_own(scripted_server, tmp_path):
    from mlflow_genai_metrics.summarization.stored_rows import RowStore

    judge = judge_for(scripted_server(), cache_dir=tmp_path)
    rows = RowStore(judge, Method(), coverage=True, max_source_tokens=None)
    grounding = GroundingCache(tmp_path)
    assert rows._connection() is judge.cache._connection()
    assert grounding._connection() is not judge.cache._connection()
    rows.close()
    grounding.close()
    assert len(judge.cache) == 0 and len(RowStore(judge, Method(), coverage=True, max_source_tokens=None)) == 0


def _in_forked_child(store: JudgeCache, results) -> None:
    parents = _PARENT_CONNECTION[0]  # the parent's connection, as this child inherited it
    mine = store._connection()  # the store made before the fork, used here
    another = JudgeCache(store.directory)
    store.put("from-the-child", model="m", prompt_version="v", transcript=Transcript())
    results.put((mine is not parents, another._connection() is mine, store.get("from-the-parent") is not None))


_PARENT_CONNECTION: list[sqlite3.Connection] = []


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_forked_child_opens_its_own_connection_and_the_parents_keeps_working(tmp_path):
    store = JudgeCache(tmp_path)
    store.put("from-the-parent", model="m", prompt_version="v", transcript=Transcript())
    _PARENT_CONNECTION[:] = [store._connection()]
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    child = ctx.Process(target=_in_forked_child, args=(store, results))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert results.get(timeout=5) == (True, True, True)  # its own, shared by the child's stores, the same file
    assert store._connection() is _PARENT_CONNECTION[0] and store.get("from-the-child") is not None


# -- two processes judging with one cache folder ----------------------------------------------------------------

_JUDGING_PROCESS = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from mlflow_genai_metrics import Judge, judge_summaries

sources, summaries, base_url = json.loads(sys.argv[1])
runs = []
for round in range(10):  # a judge per round, closed after it: processes come and go on a shared cache
    with Judge("scripted-judge", base_url, max_concurrency=4, backoff_initial_s=0.01, backoff_max_s=0.05) as judge:
        with ThreadPoolExecutor(2) as pool:  # two candidates judged at once, as mgm demo judges them
            futures = [pool.submit(judge_summaries, sources, [s + suffix for s in summaries], judge=judge)
                       for suffix in (f" Round {round}.", f" Round {round} again.")]
            for future in futures:
                rows = future.result().rows
                runs.append(rows[[c for c in rows if not c.startswith("judge_")]].to_json(orient="records"))
print(json.dumps(runs))
"""


def test_two_judging_processes_sharing_one_cache_folder_both_finish_with_the_same_results(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    environment = {**os.environ, "MGM_CACHE_DIR": str(tmp_path / "shared-cache")}
    argument = json.dumps([SOURCES, SUMMARIES, server.base_url])
    processes = [subprocess.Popen([sys.executable, "-c", _JUDGING_PROCESS, argument], env=environment, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], [err[-3000:] for _, err in outputs]
    first, second = (json.loads(out) for out, _ in outputs)
    assert len(first) == 20 and first == second


# -- a store that cannot be read stops the run before any call ---------------------------------------------------


@pytest.fixture(scope="module")
def judged_cache(tmp_path_factory) -> Path:
    """A cache folder holding a real run (transcripts, stored rows and grounding results), made once: each test
    below damages a copy of it (``_judged_cache``)."""
    folder = tmp_path_factory.mktemp("judged-cache")
    with ScriptedJudgeServer(SummarizationJudgeScript()) as server:
        judge = judge_for(server, cache_dir=folder)
        judge_summaries(SOURCES * 8, [f"{s} Row {i}." for i, s in enumerate(SUMMARIES * 8)], judge=judge)
        judge.close()
    gc.collect()
    return folder


def _judged_cache(judged: Path, folder: Path) -> None:
    """A copy of the ``judged_cache`` folder at ``folder``, every store on it closed."""
    shutil.copytree(judged, folder, dirs_exist_ok=True)


def _overwrite_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["judge cache overwritten", "judge cache truncated", "grounding cache overwritten",
                                    "grounding cache not a database", "judge cache a folder"])
def test_a_store_that_cannot_be_read_stops_the_run_before_any_call_naming_the_file(scripted_server, judged_cache, tmp_path, damage):
    server = scripted_server(SummarizationJudgeScript())
    _judged_cache(judged_cache, tmp_path)
    path = tmp_path / (CACHE_FILE if damage.startswith("judge") else GROUNDING_FILE)
    assert path.stat().st_size > 4 * 4096 and not Path(f"{path}-wal").exists()
    if damage.endswith("overwritten"):
        _overwrite_middle(path)
    elif damage.endswith("truncated"):
        os.truncate(path, path.stat().st_size // 2)
    elif damage.endswith("not a database"):
        path.write_text("these are my notes, not a cache\n")
    else:
        path.unlink()
        path.mkdir()
    before = server.request_count
    with pytest.raises(StoreUnreadable) as raised:
        judge_summaries(SOURCES, [s + " Again." for s in SUMMARIES], judge=judge_for(server, cache_dir=tmp_path))
    assert server.request_count == before  # not one chat completion paid
    message = str(raised.value)
    assert f"the cache file {path} cannot be read (" in message
    assert message.endswith("move it away (a new one is made in its place), or point MGM_CACHE_DIR or Judge(cache_dir=...) at another folder")
    assert isinstance(raised.value, OSError)


def test_a_truncated_file_is_told_apart_by_its_size_and_a_damaged_page_by_the_quick_check(judged_cache, tmp_path):
    _judged_cache(judged_cache, tmp_path)
    path = tmp_path / CACHE_FILE
    size = path.stat().st_size
    os.truncate(path, size - 4096)
    with pytest.raises(StoreUnreadable, match=rf"it is truncated: {size - 4096} of the {size} bytes its header states"):
        JudgeCache(tmp_path)
    _judged_cache(judged_cache, tmp_path / "other")
    _overwrite_middle(tmp_path / "other" / CACHE_FILE)
    with pytest.raises(StoreUnreadable, match=r"cannot be read \(\*\*\* in database main \*\*\*"):
        JudgeCache(tmp_path / "other")


def test_mgm_evaluate_on_a_cache_that_cannot_be_read_exits_2_with_one_line(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / CACHE_FILE).write_text("not a database\n")
    rows = tmp_path / "rows.csv"
    pd.DataFrame({"id": [1, 2], "source": SOURCES[:2], "summary": SUMMARIES[:2]}).to_csv(rows, index=False)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment.update(MGM_CACHE_DIR=str(cache), MGM_JUDGE_MODEL="scripted-judge", MGM_JUDGE_BASE_URL=server.base_url)
    done = subprocess.run(
        [sys.executable, "-m", "mlflow_genai_metrics.cli", "evaluate", str(rows), "--id-col", "id", "--source-col", "source",
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        capture_output=True, text=True, timeout=180, env=environment,
    )
    expected = (f"mgm evaluate: the cache file {cache / CACHE_FILE} cannot be read (it is not a SQLite database); move it "
                "away (a new one is made in its place), or point MGM_CACHE_DIR or Judge(cache_dir=...) at another folder")
    assert (done.returncode, done.stderr.splitlines()) == (2, [expected])
    assert server.request_count == 0
