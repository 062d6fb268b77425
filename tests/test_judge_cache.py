"""The on-disk cache: content-addressed, exact on a hit, safe across threads and processes."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3

import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for
from pydantic import BaseModel

from mlflow_genai_metrics import JudgeConfigError
from mlflow_genai_metrics.judge import JudgeCache, cache_key
from mlflow_genai_metrics.judge.cache import Transcript, canonical_material
from mlflow_genai_metrics.sqlite_store import OwnerOnlyStore, StoreUnreadable
from mlflow_genai_metrics.testing import Fault, Reply, ScriptedJudgeServer

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


def test_the_cache_key_is_the_sha256_of_the_canonical_json_whatever_form_the_schema_comes_in():
    """Keys stay those of earlier versions (the whole material as one sorted JSON), so a cache keeps answering."""
    import hashlib

    from mlflow_genai_metrics.judge.answers import answer_schema, answer_schema_json
    from mlflow_genai_metrics.summarization.passes import ExtractedClaims

    material = {**BASE, "messages": [{"role": "user", "content": "Café £5 \u2014 ünïcode"}], "answer_schema": answer_schema(ExtractedClaims)}
    expected = hashlib.sha256(canonical_material(**dict(material)).encode("utf-8")).hexdigest()
    assert expected == hashlib.sha256(
        json.dumps({**{k: v for k, v in material.items() if k != "answer_schema"}, "schema": material["answer_schema"]},
                   sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ).hexdigest()
    assert cache_key(**material) == expected
    assert cache_key(**{**material, "answer_schema": answer_schema_json(ExtractedClaims)}) == expected


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


def test_the_first_transcript_for_a_key_wins_and_is_stored_once(tmp_path):
    from mlflow_genai_metrics.judge.cache import Transcript
    from mlflow_genai_metrics.judge.replies import CallResult

    cache = JudgeCache(tmp_path)
    for reason in ("first", "second"):
        transcript = Transcript(mode="json_schema", calls=[CallResult(content=verdict_json(reason=reason), finish_reason="stop")])
        cache.put("k", model="m", prompt_version="v", transcript=transcript)
    assert len(cache) == 1
    assert "first" in cache.get("k").calls[0].content


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
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM transcripts").fetchone() == (60, 60)


def _open_and_close_many_times(directory: str) -> int:
    for i in range(150):
        cache = JudgeCache(directory)
        cache.put(f"k{i}", model="m", prompt_version="v", transcript=Transcript())
        cache.close()
    return 1


def test_many_processes_opening_one_new_cache_at_once_never_see_database_is_locked(tmp_path):
    """Spark workers open one cache together: switching to WAL answers "database is locked" at once (no busy
    wait) and the last connection elsewhere removes the -wal file while another is fixing its mode."""
    for trial in range(3):
        folder = tmp_path / str(trial)
        with multiprocessing.get_context("fork").Pool(6) as pool:
            assert pool.map(_open_and_close_many_times, [str(folder)] * 6) == [1] * 6
        assert len(JudgeCache(folder)) == 150


class _Notes(OwnerOnlyStore):
    FILE, SCHEMA, TABLE = "notes.sqlite3", "CREATE TABLE IF NOT EXISTS notes (key TEXT PRIMARY KEY, text TEXT)", "notes"

    def write(self, first: int, count: int) -> None:
        self._insert_many("INSERT OR IGNORE INTO notes VALUES (?, ?)", [(f"k{i}", "x" * 2000) for i in range(first, first + count)])


def test_a_write_that_sqlite_rolled_back_itself_raises_its_own_error_and_the_store_writes_afterwards(tmp_path):
    """SQLite rolls a transaction back by itself on a full disk (or a busy or failing file); a second ROLLBACK
    raised "cannot rollback - no transaction is active" and hid why the write failed."""
    notes = _Notes(tmp_path)
    notes.write(0, 1)
    conn = notes._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages + 1}")  # this connection's file is "full" a page later
    with pytest.raises(sqlite3.OperationalError, match="full"):
        notes.write(1, 50)
    assert not conn.in_transaction and len(notes) == 1
    conn.execute("PRAGMA max_page_count=1073741823")
    notes.write(1, 50)
    assert len(notes) == 51


def _write_notes(args: tuple[str, int]) -> int:
    directory, worker = args
    notes = _Notes(directory)
    for batch in range(40):  # overlapping batches: every worker writes keys the others write too
        notes.write((worker * 7 + batch * 5) % 300, 20)
    notes.close()
    return 1


def test_many_processes_writing_batches_to_one_store_at_once_all_land(tmp_path):
    with multiprocessing.get_context("fork").Pool(6) as pool:
        assert pool.map(_write_notes, [(str(tmp_path), worker) for worker in range(6)]) == [1] * 6
    written = {(worker * 7 + batch * 5) % 300 + i for worker in range(6) for batch in range(40) for i in range(20)}
    assert len(_Notes(tmp_path)) == len(written)


def test_a_local_server_on_a_new_port_is_served_from_the_cache(scripted_server, tmp_path):
    first = scripted_server()
    judge_for(first, cache_dir=tmp_path).ask(ask_about("claim"))
    second = scripted_server()  # the same model id on another loopback port, as LocalModelServer does each run
    assert judge_for(second, cache_dir=tmp_path).ask(ask_about("claim")).cached
    assert second.request_count == 0


def test_the_cache_files_are_readable_by_their_owner_only(scripted_server, tmp_path):
    import stat

    server = scripted_server()
    judge = judge_for(server, cache_dir=tmp_path / "cache")  # held: the -wal and -shm last while the cache is open
    judge.ask(ask_about("claim"))
    files = list((tmp_path / "cache").iterdir())
    assert {f.name for f in files} >= {"judge-cache.sqlite3", "judge-cache.sqlite3-wal"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) & 0o077 == 0


# -- the cache holds what the endpoint answered ------------------------------------------------------------


def test_an_invalid_answer_is_replayed_from_the_cache_as_the_same_error_without_a_call(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply("I think the claim is true."))
    first = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert first.error.kind == "invalid_answer" and server.request_count == 2  # the reply and its repair
    rerun = judge_for(server, cache_dir=tmp_path)
    again = rerun.ask(ask_about("claim"))
    assert server.request_count == 2 and rerun.usage.calls == 0 and again.cached
    assert again.error == first.error


def test_a_truncated_reply_is_replayed_as_truncated(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply('{"verdict": "yes", "reas', finish_reason="length"))
    judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    again = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert again.cached and again.error.kind == "truncated" and server.request_count == 1


def test_an_answer_that_needed_the_repair_turn_is_replayed_without_a_call(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply(verdict_json("no")) if r.is_repair else Reply("not json"))
    first = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    again = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert again.cached and again.answer == first.answer and again.raw == first.raw
    assert server.request_count == 2


@pytest.mark.parametrize("fault", [Fault.server_error(503), Fault.rate_limit(retry_after_s=0), Fault.disconnect(), Fault.raw("null")])
def test_a_transport_failure_is_not_cached_and_a_rerun_asks_again(scripted_server, tmp_path, fault):
    server = scripted_server(lambda r: fault if r.index == 0 else Reply(verdict_json()))
    assert not judge_for(server, cache_dir=tmp_path, max_retries=0).ask(ask_about("claim")).ok
    again = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert again.ok and not again.cached and server.request_count == 2


def test_a_transcript_cut_short_by_a_transport_failure_continues_where_it_stopped(scripted_server, tmp_path):
    def script(request):
        if not request.is_repair:
            return Reply("not json")
        return Fault.server_error(503) if request.index == 1 else Reply(verdict_json())

    server = scripted_server(script)
    assert judge_for(server, cache_dir=tmp_path, max_retries=0).ask(ask_about("claim")).error.kind == "server_error"
    again = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert again.ok and server.request_count == 3  # only the repair turn was asked again
    assert server.requests[-1].body["messages"][-2]["content"] == "not json"


def test_reask_invalid_asks_again_and_the_new_answer_is_kept(scripted_server, tmp_path):
    server = scripted_server(lambda r: Reply("garbage") if r.index < 2 else Reply(verdict_json("no")))
    assert judge_for(server, cache_dir=tmp_path).ask(ask_about("claim")).error.kind == "invalid_answer"
    reasked = judge_for(server, cache_dir=tmp_path, reask_invalid=True).ask(ask_about("claim"))
    assert reasked.ok and not reasked.cached and server.request_count == 3
    later = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert later.cached and later.answer.verdict == "no" and server.request_count == 3


def test_reask_invalid_leaves_valid_cached_answers_alone(scripted_server, tmp_path):
    server = scripted_server()
    judge_for(server, cache_dir=tmp_path).ask(ask_about("claim"))
    assert judge_for(server, cache_dir=tmp_path, reask_invalid=True).ask(ask_about("claim")).cached
    assert server.request_count == 1


def test_a_cached_reply_is_validated_again_when_read(scripted_server, tmp_path):
    from pydantic import BaseModel, field_validator

    class Verdict(BaseModel):  # the same name and JSON schema as the tests' Verdict, so the same cache key
        verdict: str
        reason: str

    class StricterVerdict(Verdict):
        @field_validator("verdict")
        @classmethod
        def known(cls, value: str) -> str:
            if value not in ("yes", "no", "idk"):
                raise ValueError("verdict must be yes, no or idk")
            return value

    StricterVerdict.__name__ = "Verdict"
    server = scripted_server(lambda r: Reply(verdict_json("yes")) if r.is_repair else Reply(verdict_json("maybe")))
    assert judge_for(server, cache_dir=tmp_path).ask(ask_about("claim", answer_type=Verdict)).answer.verdict == "maybe"
    stricter = judge_for(server, cache_dir=tmp_path).ask(ask_about("claim", answer_type=StricterVerdict))
    assert stricter.answer.verdict == "yes" and server.request_count == 2  # replayed, refused, repaired with one call


def test_a_cache_file_of_the_earlier_schema_still_opens(tmp_path):
    with sqlite3.connect(tmp_path / "judge-cache.sqlite3") as db:
        db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, prompt_version TEXT NOT NULL, "
                   "answer_json TEXT NOT NULL, raw TEXT, finish_reason TEXT, prompt_tokens INTEGER NOT NULL, "
                   "completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL)")
        db.execute("INSERT INTO answers VALUES ('k', 'm', 'v', '{}', NULL, NULL, 1, 1, 0)")
    cache = JudgeCache(tmp_path)
    assert len(cache) == 0 and cache.get("k") is None


def test_a_cache_folder_and_files_made_before_with_wider_modes_are_made_owner_only(tmp_path):
    import stat

    folder = tmp_path / "shared-cache"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for name in ("judge-cache.sqlite3", "judge-cache.sqlite3-wal"):
        (folder / name).touch()
        (folder / name).chmod(0o644)
    cache = JudgeCache(folder)
    assert len(cache) == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_cache_folder_that_cannot_be_made_owner_only_is_a_clear_error(tmp_path, monkeypatch):
    import os

    folder = tmp_path / "not-mine"
    folder.mkdir()
    folder.chmod(0o755)

    def refuse(path, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refuse)
    with pytest.raises(PermissionError, match="has mode 0755 and cannot be made 0700.*cache_dir") as raised:
        len(JudgeCache(folder))
    assert isinstance(raised.value, StoreUnreadable)  # what mgm answers with exit code 2 and one line


def test_a_reply_paid_for_before_a_configuration_error_is_kept_and_not_asked_again(scripted_server, tmp_path):
    """The first reply did not fit the schema and the repair turn met HTTP 401 (a key revoked mid-run): the first
    reply, paid for, was not cached, so the rerun after the fix asked it again."""
    def revoked(request):
        return Reply('{"not": "a verdict"}') if request.index == 0 else Fault.http(401, "Incorrect API key provided")

    with pytest.raises(JudgeConfigError):
        judge_for(scripted_server(revoked), cache_dir=tmp_path).ask(ask_about("claim"))
    fixed = scripted_server(lambda request: Reply(verdict_json()))
    reply = judge_for(fixed, cache_dir=tmp_path).ask(ask_about("claim"))
    first = len(ask_about("claim").messages)
    assert reply.ok and [len(r.body["messages"]) > first for r in fixed.requests] == [True]  # the repair turn alone, after the kept reply


def test_a_transcript_the_cache_cannot_read_is_replaced_by_the_answer_asked_again(scripted_server, tmp_path):
    """A row another version wrote in another form (a token count as text) was kept forever, and every run paid
    for the request again."""
    import sqlite3

    server = scripted_server(lambda r: Reply(verdict_json("yes")))
    assert not judge_for(server, cache_dir=tmp_path).ask(ask_about("claim")).cached
    with sqlite3.connect(tmp_path / "judge-cache.sqlite3") as db:
        (stored,) = db.execute("SELECT transcript_json FROM transcripts").fetchone()
        db.execute("UPDATE transcripts SET transcript_json = ?", (stored.replace('"prompt_tokens":', '"prompt_tokens":"many","x":'),))
    replies = [judge_for(server, cache_dir=tmp_path).ask(ask_about("claim")) for _ in range(3)]
    assert [r.cached for r in replies] == [False, True, True] and server.request_count == 2
