"""The on-disk cache: content-addressed, exact on a hit, safe across threads and processes."""

from __future__ import annotations

import multiprocessing
import sqlite3

from pydantic import BaseModel

from mlflow_genai_metrics.judge import JudgeCache, cache_key
from mlflow_genai_metrics.testing import Reply, ScriptedJudgeServer

from conftest import verdict_json
from helpers import ask_about, judge_for

BASE = dict(
    model="m",
    base_url="http://127.0.0.1:1/v1",
    messages=[{"role": "user", "content": "claim"}],
    answer_schema={"title": "Verdict"},
    temperature=0.0,
    seed=None,
    max_tokens=None,
    prompt_version="verify:v1-aaaa",
)


def test_the_cache_key_changes_with_everything_that_can_change_the_answer():
    baseline = cache_key(**BASE)
    changes = dict(
        model="other",
        base_url="http://127.0.0.1:2/v1",
        messages=[{"role": "user", "content": "claim!"}],
        answer_schema={"title": "Other"},
        temperature=0.7,
        seed=7,
        max_tokens=64,
        prompt_version="verify:v2-bbbb",
    )
    for field, value in changes.items():
        assert cache_key(**{**BASE, field: value}) != baseline, field
    assert cache_key(**BASE) == baseline


def test_a_hit_returns_exactly_what_was_returned_before(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply(" " + verdict_json("idk", "not in the article") + "\n"))
    first = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    second = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert second.cached and not first.cached
    assert second.answer == first.answer and second.raw == first.raw
    assert server.request_count == 1


def test_a_new_prompt_version_is_not_served_an_old_answer(scripted_server, tmp_path):
    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path)
    judge.ask(ask_about("claim", version="verify:v1"))
    judge.ask(ask_about("claim", version="verify:v2"))
    assert server.request_count == 2


def test_a_different_answer_schema_is_not_served_an_old_answer(scripted_server, tmp_path):
    class Other(BaseModel):
        verdict: str
        reason: str
        confidence: float = 1.0

    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path)
    judge.ask(ask_about("claim"))
    assert judge.ask(ask_about("claim", answer_type=Other)).cached is False


def test_the_first_answer_for_a_key_wins_and_is_stored_once(tmp_path):
    from mlflow_genai_metrics.judge.cache import CachedAnswer

    cache = JudgeCache(tmp_path)
    for reason in ("first", "second"):
        cache.put("k", model="m", prompt_version="v", answer=CachedAnswer(answer_json=verdict_json(reason=reason), raw=None, prompt_tokens=1, completion_tokens=1))
    assert len(cache) == 1
    assert "first" in cache.get("k").answer_json


def test_the_cache_file_is_in_wal_mode(tmp_path):
    cache = JudgeCache(tmp_path)
    assert len(cache) == 0
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _worker(base_url: str, cache_dir: str, worker: int, results: "multiprocessing.Queue") -> None:
    import sys

    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from helpers import ask_about as ask
    from mlflow_genai_metrics import Judge

    judge = Judge("scripted-judge", base_url, "sk-worker", cache_dir=cache_dir, max_concurrency=8)
    # Every worker asks the same 60 questions, overlapping, in a different order.
    order = list(range(60))[worker * 15 :] + list(range(60))[: worker * 15]
    replies = judge.ask_many([ask(f"row {i}") for i in order])
    results.put((worker, sum(r.ok for r in replies)))


def test_several_processes_write_one_cache_without_errors_or_duplicates(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ScriptedJudgeServer(lambda r: Reply(verdict_json()), latency_s=0.01, models=("scripted-judge",)) as server:
        results = ctx.Queue()
        workers = [ctx.Process(target=_worker, args=(server.base_url, str(tmp_path), w, results)) for w in range(4)]
        for process in workers:
            process.start()
        for process in workers:
            process.join(timeout=120)
        assert [p.exitcode for p in workers] == [0, 0, 0, 0]
        assert sorted(results.get(timeout=5) for _ in workers) == [(0, 60), (1, 60), (2, 60), (3, 60)]
        rerun = judge_for(server, cache_dir=tmp_path)
        before = server.request_count
        assert all(r.cached for r in rerun.ask_many([ask_about(f"row {i}") for i in range(60)]))
        assert server.request_count == before
    with sqlite3.connect(tmp_path / "judge-cache.sqlite3") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM answers").fetchone() == (60, 60)


def test_a_local_server_on_a_new_port_is_served_from_the_cache(scripted_server, tmp_path):
    first = scripted_server()
    judge_for(first, cache_dir=tmp_path).ask(ask_about("claim"))
    second = scripted_server()  # the same model id on another loopback port, as LocalModelServer does each run
    assert judge_for(second, cache_dir=tmp_path).ask(ask_about("claim")).cached
    assert second.request_count == 0


def test_the_cache_files_are_readable_by_their_owner_only(scripted_server, tmp_path):
    import stat

    server = scripted_server()
    judge_for(server, cache_dir=tmp_path / "cache").ask(ask_about("claim"))
    files = list((tmp_path / "cache").iterdir())
    assert {f.name for f in files} >= {"judge-cache.sqlite3", "judge-cache.sqlite3-wal"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) & 0o077 == 0
