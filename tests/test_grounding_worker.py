"""The grounding check in a process of its own (``grounding.worker``), for large runs: the same numbers as on the
judge's loop, stored while the judge waits, a worker that fails or cannot start costing nothing but time, and a
stopped run taking its worker with it."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import sqlite3
import sys
import time

import pytest
from helpers import judge_for

from mlflow_genai_metrics import JudgeConfigError, judge_summaries
from mlflow_genai_metrics.grounding import GroundingCache, cached_groundings, cached_supports
from mlflow_genai_metrics.grounding.worker import serve
from mlflow_genai_metrics.summarization import grounded
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

ROWS = grounded.ROWS_FOR_A_PROCESS + 16
SOURCES = [f"Article {i}: the council approved budget {i} on Monday. The mayor welcomed budget {i}. Critics objected to cuts." for i in range(ROWS)]
SUMMARIES = [f"The council approved budget {i}. The mayor welcomed it." if i % 3 else f"The council rejected budget {i + 7} on Friday." for i in range(ROWS)]


def stored(directory) -> tuple[int, int]:
    """(rows, claims) in the grounding cache file under ``directory``."""
    path = directory / "grounding-cache.sqlite3"
    if not path.exists():
        return 0, 0
    with sqlite3.connect(path) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM grounding")]
    return sum("|claim:" not in k for k in keys), sum("|claim:" in k for k in keys)


class Spy:
    """Records every ``GroundingInAnotherProcess`` made (the worker it started, if any)."""

    def __init__(self, monkeypatch, command=None):
        self.made: list[grounded.GroundingInAnotherProcess] = []
        original = grounded.GroundingInAnotherProcess.__init__
        spy = self

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if command is not None:
                self.command = command
            spy.made.append(self)

        monkeypatch.setattr(grounded.GroundingInAnotherProcess, "__init__", init)


def row_columns(result) -> list[tuple]:
    rows = result.rows.sort_values("id")
    return list(zip(rows["id"], rows["grounding"], rows["grounded"], rows["grounding_reasoning"]))


def claim_columns(result) -> list[tuple]:
    claims = result.claims.sort_values(["id", "claim"])
    return list(zip(claims["id"], claims["claim"], claims["lexical_support"].round(12), claims["suspect"]))


def test_a_large_run_checks_in_another_process_while_the_judge_waits_with_the_in_loop_numbers(scripted_server, tmp_path, monkeypatch):
    """Before the judge's last answer every row was scored and handed back (the worker checked each as its claims
    came), the cache holds them all after the run, and the rows and claims are exactly those the check gives on the
    judge's loop."""
    judge_script, seen = SummarizationJudgeScript(), {}

    def script(request):
        if request.index == 2 * ROWS - 1:  # the last verification: every row's claims were extracted before it
            deadline = time.monotonic() + 30
            while len(spy.made[0].scored.groundings) < ROWS and time.monotonic() < deadline:
                time.sleep(0.05)
            seen["rows"], seen["claims"] = len(spy.made[0].scored.groundings), sum(map(len, spy.made[0].scored.supports.values()))
        return judge_script(request)

    spy = Spy(monkeypatch)
    server = scripted_server(script)
    ids = list(range(ROWS))
    judge = judge_for(server, cache_dir=tmp_path / "worker", max_concurrency=8)
    worker = judge_summaries(SOURCES, SUMMARIES, judge=judge, coverage=False, ids=ids)
    assert len(spy.made) == 1 and spy.made[0]._process is not None and spy.made[0]._process.returncode == 0
    assert seen["rows"] == ROWS and seen["claims"] > 0
    assert stored(tmp_path / "worker")[0] == ROWS

    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)  # the same run, the check on the judge's loop
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert len(spy.made) == 1
    assert row_columns(worker) == row_columns(in_loop)
    assert claim_columns(worker) == claim_columns(in_loop)
    assert worker.rows["grounded"].sum() == in_loop.rows["grounded"].sum() < ROWS  # the rejected budgets are not grounded


def test_a_rerun_starts_no_worker_and_a_small_run_none(scripted_server, tmp_path, monkeypatch):
    spy = Spy(monkeypatch)
    server = scripted_server(SummarizationJudgeScript())
    judge = judge_for(server, cache_dir=tmp_path / "cache", max_concurrency=8)
    judge_summaries(SOURCES, SUMMARIES, judge=judge, coverage=False)
    judge_summaries(SOURCES, SUMMARIES, judge=judge, coverage=False)  # every row from the caches
    judge_summaries(SOURCES[:20], [s + " Extra." for s in SUMMARIES[:20]], judge=judge, coverage=False)
    assert len(spy.made) == 1


@pytest.mark.parametrize("command, said", [
    ((sys.executable, "-c", "import sys; sys.stdin.readline(); sys.stderr.write('worker broke'); sys.exit(3)"), "exit 3: worker broke"),
    (("/nonexistent/python-for-grounding",), "could not start a process of its own"),
])
def test_a_worker_that_fails_or_cannot_start_costs_only_time(scripted_server, tmp_path, monkeypatch, caplog, command, said):
    """Nothing stored by the worker: the check then scores every row after the judge, the same numbers, with a
    warning that says why."""
    spy = Spy(monkeypatch, command=command)
    server = scripted_server(SummarizationJudgeScript())
    ids = list(range(ROWS))
    with caplog.at_level(logging.WARNING, logger=grounded.__name__):
        failed = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "failed", max_concurrency=8), coverage=False, ids=ids)
    assert len(spy.made) == 1 and said in caplog.text
    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert row_columns(failed) == row_columns(in_loop) and claim_columns(failed) == claim_columns(in_loop)
    assert failed.rows["grounding"].notna().all()


def test_a_stalled_worker_is_stopped_at_its_deadline_and_its_rows_are_scored_after_the_judge(scripted_server, tmp_path, monkeypatch, caplog):
    # a worker that reads its tasks and then hangs: the run once waited for it forever
    stall = (sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(3600)")
    spy = Spy(monkeypatch, command=stall)
    monkeypatch.setattr(grounded, "WORKER_DEADLINE_S", 0.5)
    monkeypatch.setattr(grounded, "WORKER_SECONDS_PER_ROW", 0.0)
    server = scripted_server(SummarizationJudgeScript())
    ids = list(range(ROWS))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=grounded.__name__):
        stalled = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "stalled", max_concurrency=8), coverage=False, ids=ids)
    assert time.monotonic() - started < 300 and len(spy.made) == 1
    assert "did not finish within 0.5 s of the judge's last answer" in caplog.text
    assert spy.made[0]._process.returncode is not None  # stopped, not left behind
    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert row_columns(stalled) == row_columns(in_loop) and stalled.rows["grounding"].notna().all()


def test_a_stopped_run_kills_its_worker(scripted_server, tmp_path, monkeypatch):
    """A configuration error after the worker has started (403 once a few rows are judged) raises at once, and
    the worker is gone with the run: killed and reaped, not left scoring."""
    spy = Spy(monkeypatch)
    judge_script = SummarizationJudgeScript()
    server = scripted_server(lambda request: judge_script(request) if request.index < 60 else Fault.http(403, "Project does not have access to model"))
    with pytest.raises(JudgeConfigError, match="refused access"):
        judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "cache", max_concurrency=4), coverage=False)
    process = spy.made[0]._process
    assert process is not None and process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)  # reaped: no such process any more
    assert stored(tmp_path / "cache")[0] < ROWS


class Pipe(io.RawIOBase):
    """A stream that hands out ``chunks`` one a read, as a pipe hands out what has arrived."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = list(chunks)

    def read1(self, n: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


@pytest.mark.parametrize("size", [7, 1 << 20])
def test_the_worker_stores_what_its_lines_ask_however_they_arrive(tmp_path, size):
    """Rows with their claims, claims alone and batches of rows, split at any byte: the cache ends with exactly
    what ``cached_groundings`` and ``cached_supports`` give."""
    lines = [{"cache": str(tmp_path / "worker")},
             {"source": SOURCES[0], "summary": SUMMARIES[0], "claims": ["The council approved budget 0."]},
             {"source": SOURCES[1], "claims": ["The mayor welcomed it.", "Budget 1 doubled ünexpectedly."]},
             {"sources": SOURCES[2:5], "summaries": SUMMARIES[2:5]}]
    serve(Pipe(pieces("".join(json.dumps(line) + "\n" for line in lines).encode("utf-8"), size)))
    worker, direct = GroundingCache(tmp_path / "worker"), GroundingCache(tmp_path / "direct")
    try:
        pairs = [(SOURCES[0], SUMMARIES[0]), *zip(SOURCES[2:5], SUMMARIES[2:5])]
        claims = [("The council approved budget 0.", SOURCES[0]), ("The mayor welcomed it.", SOURCES[1]), ("Budget 1 doubled ünexpectedly.", SOURCES[1])]
        expected_rows, computed, _ = cached_groundings([s for s, _ in pairs], [m for _, m in pairs], direct)
        expected_claims = cached_supports([c for c, _ in claims], [s for _, s in claims], direct)
        assert stored(tmp_path / "worker") == (4, 3)
        assert cached_groundings([s for s, _ in pairs], [m for _, m in pairs], worker) == (expected_rows, 0, 4)
        assert cached_supports([c for c, _ in claims], [s for _, s in claims], worker) == expected_claims
    finally:
        worker.close()
        direct.close()


def test_the_worker_hands_back_each_named_rows_scores_as_the_cache_holds_them(tmp_path):
    """Issue 47: the worker writes a line per row its tasks name (a row with its claims, a row's claims alone, a
    named batch), the numbers ``cached_groundings`` and ``cached_supports`` give (NaN for a claim with no word);
    tasks that name no row are stored and handed back to no one."""
    claims0, claims1 = ["The council approved budget 0."], ["The mayor welcomed it.", "...", "Budget 1 doubled."]
    lines = [{"cache": str(tmp_path / "worker")},
             {"row": 0, "source": SOURCES[0], "summary": SUMMARIES[0], "claims": claims0},
             {"source": SOURCES[9], "summary": SUMMARIES[9], "claims": ["Budget 9 passed."]},  # no row named
             {"row": 1, "source": SOURCES[1], "claims": claims1},
             {"sources": SOURCES[7:9], "summaries": SUMMARIES[7:9]},  # no rows named
             {"rows": [5, 6], "sources": SOURCES[5:7], "summaries": SUMMARIES[5:7]}]
    out = io.BytesIO()
    serve(Pipe([("".join(json.dumps(line) + "\n" for line in lines)).encode("utf-8")]), out)
    handed = [json.loads(line) for line in out.getvalue().decode("utf-8").splitlines()]
    direct = GroundingCache(tmp_path / "direct")
    try:
        rows, _, _ = cached_groundings([SOURCES[0], SOURCES[5], SOURCES[6]], [SUMMARIES[0], SUMMARIES[5], SUMMARIES[6]], direct)
        supports = cached_supports(claims0 + claims1, [SOURCES[0]] + [SOURCES[1]] * 3, direct)
    finally:
        direct.close()
    assert [h["row"] for h in handed] == [0, 1, 5, 6]
    assert [h.get("grounding") for h in handed] == [vars(rows[0]), None, vars(rows[1]), vars(rows[2])]
    assert handed[0]["supports"] == supports[:1] and handed[2]["supports"] == handed[3]["supports"] == []
    assert handed[1]["supports"][0] == supports[1] and math.isnan(handed[1]["supports"][1]) and math.isnan(supports[2])
    assert handed[1]["supports"][2] == supports[3]
    assert stored(tmp_path / "worker") == (6, 5)  # every task stored, named or not


def test_a_large_run_reads_back_nothing_the_worker_handed_over(scripted_server, tmp_path, monkeypatch):
    """After the judge's last answer the run reads no row or claim back from the cache that the worker scored: it
    handed each over as it went (the readback was a third of the run's tail after the last answer)."""
    spy, read = Spy(monkeypatch), {"groundings": [], "supports": []}
    groundings, supports = grounded.cached_groundings, grounded.cached_supports

    def reading_groundings(sources, *args, **kwargs):
        read["groundings"].append(len(sources))
        return groundings(sources, *args, **kwargs)

    def reading_supports(claims, *args, **kwargs):
        read["supports"].append(len(claims))
        return supports(claims, *args, **kwargs)

    monkeypatch.setattr(grounded, "cached_groundings", reading_groundings)
    monkeypatch.setattr(grounded, "cached_supports", reading_supports)
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "cache", max_concurrency=8), coverage=False)
    assert len(spy.made) == 1 and spy.made[0]._process.returncode == 0
    assert len(spy.made[0].scored.groundings) == ROWS and len(result.claims) > ROWS
    assert read == {"groundings": [0], "supports": []}


def test_a_worker_handing_back_lines_no_row_can_use_costs_only_time(scripted_server, tmp_path, monkeypatch):
    """Lines that are not JSON, name no row sent or lack fields are passed over: those rows are scored after the
    judge, the in-loop numbers."""
    junk = ('import sys; sys.stdin.read(); sys.stdout.write("not json\\n" + \'{"row": 99999, "supports": [0.5]}\\n\' + '
            '\'{"row": 0, "grounding": {"grounding": 0.5}}\\n\' + \'{"supports": []}\\n\')')
    spy = Spy(monkeypatch, command=(sys.executable, "-c", junk))
    server = scripted_server(SummarizationJudgeScript())
    ids = list(range(ROWS))
    handed = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "junk", max_concurrency=8), coverage=False, ids=ids)
    assert len(spy.made) == 1 and spy.made[0]._process.returncode == 0 and spy.made[0].scored.groundings == {}
    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert row_columns(handed) == row_columns(in_loop) and claim_columns(handed) == claim_columns(in_loop)


def test_the_worker_reads_the_cache_once_a_read_and_stores_a_transaction_at_a_time(tmp_path, monkeypatch):
    """Issue 47: a row's summary and claims are looked up in one query (two were a tenth of the worker's CPU); the
    scores are stored in one transaction once ``STORE_EVERY`` are held, or at a read after the first has waited
    ``STORE_WITHIN_S``, and at the end (a transaction a row was 0.3 ms of its ~5); rows already stored, or held, are
    read, not scored or written again."""
    from mlflow_genai_metrics.grounding import worker

    calls = []
    for name in ("get_many", "put_many"):
        real = getattr(GroundingCache, name)
        monkeypatch.setattr(GroundingCache, name, lambda self, items, real=real, name=name: calls.append((name, len(items))) or real(self, items))
    rows = [{"row": n, "source": SOURCES[n], "summary": SUMMARIES[n], "claims": [f"Budget {n} passed.", "The mayor spoke."]} for n in range(3)]

    def reads(folder, tasks):
        return [(json.dumps(line) + "\n").encode("utf-8") for line in [{"cache": str(tmp_path / folder)}, *tasks]]

    monkeypatch.setattr(worker, "STORE_WITHIN_S", 1e9)  # (however slow the machine: the time rule is tested below)
    every = reads("all", [*rows, {"sources": SOURCES[3:5], "summaries": SUMMARIES[3:5]}])
    serve(Pipe(every), io.BytesIO())  # 11 results: held to the end
    assert calls == [("get_many", 3)] * 3 + [("get_many", 2), ("put_many", 11)]
    assert stored(tmp_path / "all") == (5, 6)
    calls.clear()
    out = io.BytesIO()
    serve(Pipe([b"".join(every[:3])]), out)  # the first two rows again, arriving together: all read, none scored
    assert calls == [("get_many", 6)] and len(out.getvalue().splitlines()) == 2
    calls.clear()
    monkeypatch.setattr(worker, "STORE_EVERY", 6)
    from mlflow_genai_metrics.grounding import cache as cache_module

    scored = []
    real_score = cache_module.score_pairs
    monkeypatch.setattr(cache_module, "score_pairs", lambda sources, summaries, **k: scored.extend(summaries) or real_score(sources, summaries, **k))
    out = io.BytesIO()
    serve(Pipe(reads("six", [rows[0], rows[0], *rows[1:]])), out)  # the row held is neither looked up nor scored again
    assert calls == [("get_many", 3), ("get_many", 3), ("put_many", 6), ("get_many", 3), ("put_many", 3)]
    handed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [h["row"] for h in handed] == [0, 0, 1, 2] and handed[0] == handed[1] and scored == SUMMARIES[:3]
    calls.clear()
    monkeypatch.setattr(worker, "STORE_WITHIN_S", 0.0)
    serve(Pipe(reads("due", rows)), io.BytesIO())
    assert calls == [("get_many", 3), ("put_many", 3)] * 3
    assert stored(tmp_path / "six") == stored(tmp_path / "due") == (3, 6)


def test_a_bad_line_fails_the_worker_with_what_it_stored_kept(tmp_path):
    """The rows that arrived before a bad line are stored; the bad line raises (the process exits 1 and says why)."""
    good = (json.dumps({"cache": str(tmp_path)}) + "\n" + json.dumps({"sources": SOURCES[:2], "summaries": SUMMARIES[:2]}) + "\n").encode("utf-8")
    with pytest.raises(json.JSONDecodeError):
        serve(Pipe([good, b"not json\n", json.dumps({"sources": SOURCES[2:4], "summaries": SUMMARIES[2:4]}).encode("utf-8") + b"\n"]))
    assert stored(tmp_path) == (2, 0)


def test_a_source_shared_by_many_rows_is_indexed_once_however_its_rows_arrive(tmp_path, monkeypatch):
    """Ten summaries of one article, each with its claims, in ten reads: one index of the article (the worker keeps
    the latest sources' indexes); the oldest are let go past ``KEPT_INDEXES``."""
    from mlflow_genai_metrics.grounding import scoring, worker

    built = []
    original = scoring.SourceIndex

    def counted(text):
        built.append(text)
        return original(text)

    monkeypatch.setattr(scoring, "SourceIndex", counted)
    monkeypatch.setattr(worker, "KEPT_INDEXES", 2)
    article = SOURCES[0]
    reads = [(json.dumps({"cache": str(tmp_path)}) + "\n").encode("utf-8")]
    reads += [(json.dumps({"source": article, "summary": f"The council approved budget 0 in week {week}.", "claims": [f"Budget 0 passed in week {week}."]}) + "\n").encode("utf-8")
              for week in range(10)]
    reads += [(json.dumps({"source": source, "summary": SUMMARIES[i + 1]}) + "\n").encode("utf-8") for i, source in enumerate(SOURCES[1:4])]
    reads.append((json.dumps({"source": article, "summary": "The mayor welcomed budget 0."}) + "\n").encode("utf-8"))
    serve(Pipe(reads))
    assert built.count(article) == 2  # once for its ten rows; again after three other sources pushed it out
    assert stored(tmp_path) == (14, 10)


def test_rows_the_judge_failed_on_are_checked_by_the_worker_too(scripted_server, tmp_path, monkeypatch):
    """A judge that answers no JSON for a third of the rows' claims: those rows carry their error and no claim, and
    still get their grounding (sent to the worker when the judge is done), the in-loop check's numbers."""
    def fault(request, kind):
        text = json.dumps(request.body["messages"])
        return Reply("no JSON here, sorry") if kind == "claims" and "rejected budget" in text else None

    spy, computed_after = Spy(monkeypatch), []
    read_back = grounded.cached_groundings

    def reading_back(*args, **kwargs):  # ground_judgements' read after the judge: what it had to compute itself
        found = read_back(*args, **kwargs)
        computed_after.append(found[1])
        return found

    monkeypatch.setattr(grounded, "cached_groundings", reading_back)
    server = scripted_server(SummarizationJudgeScript(fault=fault))
    ids = list(range(ROWS))
    worker = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "worker", max_concurrency=8), coverage=False, ids=ids)
    failed = worker.rows["error"] != ""
    assert len(spy.made) == 1 and spy.made[0]._process.returncode == 0
    assert failed.sum() == sum(1 for s in SUMMARIES if "rejected" in s) and worker.rows["grounding"].notna().all()
    assert computed_after == [0]  # every row, failed ones included, was scored by the worker
    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert row_columns(worker) == row_columns(in_loop) and claim_columns(worker) == claim_columns(in_loop)


LEAN = """
import sys, threading
from mlflow_genai_metrics.grounding.vectors import load_vectors
from mlflow_genai_metrics.grounding.words import _stem_table, _stemmer, stem
words = sorted({t.lstrip("#").lower() for t in load_vectors().rows if t.lstrip("#").isalpha()})
lean_stemmer = _stemmer()  # a process of one thread: the lean load
stems = [lean_stemmer.stem(w) for w in words]
table = _stem_table()
lean = dict(nltk_left=sorted(m for m in sys.modules if m.startswith("nltk")),
            scipy="scipy.stats" in sys.modules, threads=threading.active_count())
import nltk  # the real package after it, whole
from nltk.stem.porter import PorterStemmer
plain = PorterStemmer()
print(repr(dict(lean, words=len(words), differ=[w for w, s in zip(words, stems) if plain.stem(w) != s][:5],
                table=len(table), table_differs=[w for w, s in table.items() if plain.stem(w) != s][:5],
                stem_reads_table=all(stem(w) == table[w] for w in table),
                real=hasattr(nltk, "word_tokenize"))))
"""


def test_the_worker_s_stemmer_loads_without_nltk_s_package_and_stems_as_nltk_does():
    """Issue 47: in a process of one thread (the grounding worker) the Porter stemmer's module loads without running
    ``nltk/__init__`` (2 s of CPU: scipy.stats, NLTK's corpora and metrics), leaves no ``nltk`` module behind, and
    stems every word of the word-vector vocabulary exactly as NLTK's own import does; a later ``import nltk`` is the
    real package. The shipped table of stems holds NLTK's own, and ``stem`` reads them from it."""
    import ast
    import subprocess

    done = subprocess.run([sys.executable, "-c", LEAN], capture_output=True, text=True, timeout=120, check=True)
    found = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert found["threads"] == 1 and found["words"] > 15_000 and found["differ"] == []
    # the shipped table (scripts/build_stem_table.py) holds NLTK's own stems, and stem() reads it
    assert found["table"] > 20_000 and found["table_differs"] == [] and found["stem_reads_table"]
    assert found["nltk_left"] == [] and found["real"]
    assert not found["scipy"]  # NLTK's package imports scipy.stats (its collocations' metrics): it never ran


SERVED = """
import io, json, sys
from mlflow_genai_metrics.grounding.worker import serve
lines = [{"cache": sys.argv[1]}, {"source": "The council approved the budget on Monday. Critics objected.",
         "summary": "The council approved the budget.", "claims": ["The council rejected the budget."]}]
serve(io.BufferedReader(io.BytesIO("".join(json.dumps(line) + "\\n" for line in lines).encode())))
print(sorted({m.split(".")[0] for m in sys.modules} & {"scipy", "nltk", "pandas", "mlflow"}))
"""


def test_the_worker_scores_without_importing_scipy_pandas_or_mlflow(tmp_path):
    """Issue 47: the worker's start-up is part of the check's CPU a row. Scoring a row and a claim loads none of
    scipy (its ``expit`` alone cost a third of a second), pandas or MLflow, and leaves no ``nltk`` module loaded
    (the stemmer's lean load takes its modules out again)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", SERVED, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split()[-1] == "[]"
    assert stored(tmp_path) == (1, 1)


CYCLES = """
import gc, io, json, sys
from mlflow_genai_metrics.grounding import worker
articles = [f"Article {i}: the council approved budget {i} on Monday. The mayor welcomed it. Critics objected." for i in range(70)]
def lines(directory):
    yield {"cache": directory}
    for i, article in enumerate(articles):  # more sources than the worker keeps: indexes are let go
        yield {"row": i, "source": article, "summary": f"The council approved budget {i}.", "claims": [f"Budget {i} passed.", "!!", ""]}
    yield {"row": 70, "source": articles[0], "claims": ["The mayor welcomed it."]}  # claims alone, a kept index
    yield {"rows": [71, 72], "sources": articles[1:3], "summaries": ["", "Gibberish xqzv wrpl."]}  # a batch, an empty summary
    yield {"source": articles[3], "summary": "An unnamed row: stored, not handed back."}
def served(directory):
    worker.serve(io.BufferedReader(io.BytesIO("".join(json.dumps(line) + "\\n" for line in lines(directory)).encode())), io.BytesIO())
worker.STORE_EVERY = 16  # several stores
served(sys.argv[1] + "/warm")  # the model, the word vectors and the stemmer load (numpy's loader leaves cycles)
gc.collect()
gc.disable()
gc.set_debug(gc.DEBUG_SAVEALL)
served(sys.argv[1] + "/counted")
gc.collect()
print(len(gc.garbage), sorted({type(found).__qualname__ for found in gc.garbage}))
"""


def test_serving_rows_leaves_no_reference_cycle_so_the_worker_runs_without_the_collector(tmp_path):
    """Issue 47: the worker process turns Python's cyclic garbage collector off (``worker.settle``; its scans were
    a tenth to a fifth of the worker's CPU), which is only safe while scoring makes no reference cycle: rows with claims
    (words, none, empty), claims alone, a batch with an empty summary, an unnamed row, more sources than the worker
    keeps and several stores leave nothing that only the collector could free. In a process of its own, so that no
    other thread's garbage is counted."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", CYCLES, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split()[0] == "0", done.stdout
    assert stored(tmp_path / "counted") == (73, 211)  # every row and claim scored and stored


def test_the_worker_process_runs_behind_its_caller_without_the_cyclic_collector():
    """``python -m mlflow_genai_metrics.grounding.worker`` (``main``) serves with the collector off and its priority
    lowered (its nice value 10 above the caller's, as far as the system allows)."""
    import subprocess

    code = ("import gc, os\nfrom mlflow_genai_metrics.grounding import worker\n"
            "worker.serve = lambda stream, out: print(gc.isenabled(), os.nice(0), flush=True)\nworker.main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", str(min(os.nice(0) + 10, 19))]


def test_with_other_threads_the_stemmer_is_nltk_s_plain_import():
    """Where another thread could be importing ``nltk`` meanwhile, no bare stand-in is ever put in ``sys.modules``:
    the plain import, which leaves the whole package loaded."""
    import subprocess

    code = ("import threading, time, sys\nthreading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
            "from mlflow_genai_metrics.grounding.words import stem\nprint(stem('flumphing'), 'nltk' in sys.modules, 'nltk.collocations' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["flumph", "True", "True"]  # a word the shipped table lacks: NLTK stems it


def test_the_check_on_the_judges_loop_hands_over_every_row_and_claim_it_scored(scripted_server, tmp_path, monkeypatch):
    """A small run (the check on the judge's loop): what the check scored while the judge waited reaches
    ``ground_judgements`` as it is, every row and every judged claim, so nothing is read back after the judge."""
    from mlflow_genai_metrics.summarization import judging

    seen, original = [], judging.ground_judgements

    def handed(rows, judgements, cache, scored=None):
        seen.append((scored, judgements))
        return original(rows, judgements, cache, scored)

    monkeypatch.setattr(judging, "ground_judgements", handed)
    server = scripted_server(SummarizationJudgeScript())
    judge_summaries(SOURCES[:20], SUMMARIES[:20], judge=judge_for(server, cache_dir=tmp_path / "cache"), coverage=False)
    (scored, judgements), = seen
    assert sorted(scored.groundings) == list(range(20))
    assert all(claim.claim in scored.supports[position] for position, j in enumerate(judgements) for claim in j.claims)
    assert sum(len(j.claims) for j in judgements) > 20


def test_a_failure_keeping_the_workers_scores_costs_only_the_readback(scripted_server, tmp_path, monkeypatch, caplog):
    """The run's side of the handover failing (here: keeping a row's scores raises) is logged; the worker's output is
    still drained, so it finishes on its own (exit 0, not killed at its deadline), and every row is read back."""
    def broken(self, handed):
        raise RuntimeError("no room for row scores")

    spy = Spy(monkeypatch)
    monkeypatch.setattr(grounded.GroundingInAnotherProcess, "_keep", broken)
    server = scripted_server(SummarizationJudgeScript())
    ids = list(range(ROWS))
    with caplog.at_level(logging.WARNING, logger=grounded.__name__):
        kept_none = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "broken", max_concurrency=8), coverage=False, ids=ids)
    assert "scores could not be kept (no room for row scores)" in caplog.text and "did not finish" not in caplog.text
    assert len(spy.made) == 1 and spy.made[0]._process.returncode == 0 and spy.made[0].scored.groundings == {}
    monkeypatch.setattr(grounded, "ROWS_FOR_A_PROCESS", 10**9)
    in_loop = judge_summaries(SOURCES, SUMMARIES, judge=judge_for(server, cache_dir=tmp_path / "loop"), coverage=False, ids=ids)
    assert row_columns(kept_none) == row_columns(in_loop) and claim_columns(kept_none) == claim_columns(in_loop)


def test_rows_go_to_the_worker_a_few_at_a_time(tmp_path, monkeypatch):
    """Issue 47: a row is sent when ``ROWS_PER_SEND`` wait, or ``SEND_WITHIN_S`` after the first of them (the worker
    scores what arrives together as one batch: a read of 4 rows cost it 0.35 ms a row less than 4 reads of 1)."""
    import asyncio
    from types import SimpleNamespace

    from mlflow_genai_metrics.summarization.records import RowInput

    writes = []
    stdin = SimpleNamespace(write=lambda data: writes.append([json.loads(line)["row"] for line in data.decode().splitlines()]),
                            is_closing=lambda: False)
    rows = [RowInput(id=n, source=SOURCES[n], summary=SUMMARIES[n], source_key=str(n)) for n in range(6)]
    cache = GroundingCache(tmp_path)
    try:
        sending = grounded.GroundingInAnotherProcess(rows, cache, [])
        sending._process = SimpleNamespace(returncode=None, stdin=stdin)

        async def claims_arrive():
            for n in range(5):
                sending.claims_ready(n, [f"Claim {n}."])
            seen = [list(w) for w in writes]
            await asyncio.sleep(grounded.SEND_WITHIN_S * 3)
            return seen

        assert asyncio.run(claims_arrive()) == [[0, 1, 2, 3]]  # the fifth waits for company ...
        assert writes == [[0, 1, 2, 3], [4]]  # ... until SEND_WITHIN_S has passed
    finally:
        cache.close()
