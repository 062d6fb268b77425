"""An identical rerun reads whole rows stored beside the judge's cache: no transcript is replayed, and every row,
metric and count is exactly what replaying its requests gives. Only rows judged without error are stored, and
anything that could change a record changes its key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from helpers import judge_for, same_metrics

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.judge import Prices
from mlflow_genai_metrics.judge.cache import CACHE_FILE, JudgeCache
from mlflow_genai_metrics.summarization import stored_rows
from mlflow_genai_metrics.summarization.method import Method
from mlflow_genai_metrics.summarization.records import RowInput
from mlflow_genai_metrics.summarization.stored_rows import RowStore
from mlflow_genai_metrics.testing import Reply, SummarizationJudgeScript
from mlflow_genai_metrics.testing.summarization_judge import marked_sections

ARTICLES = [f"Article {i} says the council approved budget number {i}. The mayor welcomed the decision. Critics objected." for i in range(4)]
# Two candidates' summaries of every article, and an empty one: key points shared, counted once per source.
SOURCES = ARTICLES + ARTICLES + [ARTICLES[0]]
SUMMARIES = ([f"The council approved budget number {i}. The mayor welcomed it." for i in range(4)]
             + [f"Budget number {i} was approved. Critics objected." for i in range(4)] + ["   "])
PRICES = Prices(input=1.0, output=2.0)


def _judge(server, cache_dir, **options):
    return judge_for(server, cache_dir=cache_dir, prices=PRICES, **options)


def _stored_count(cache_dir) -> int:
    with sqlite3.connect(cache_dir / CACHE_FILE) as conn:
        return conn.execute("SELECT COUNT(*) FROM row_records").fetchone()[0]


def _forget_rows(cache_dir) -> None:
    with sqlite3.connect(cache_dir / CACHE_FILE) as conn:
        conn.execute("DELETE FROM row_records")


def _same(a, b) -> None:
    """Equal in every row, record and metric but the time new calls took."""
    timed = [c for c in a.rows if "latency" in c]
    pd.testing.assert_frame_equal(a.rows.drop(columns=timed), b.rows.drop(columns=timed))
    assert same_metrics({k: v for k, v in a.metrics.items() if "latency" not in k}, {k: v for k, v in b.metrics.items() if "latency" not in k})
    timing = {"latency_s", "call_latencies_s"}
    untimed = {"usage": timing, "usage_by_pass": {"__all__": timing}}
    assert [r.model_dump(exclude=untimed) for r in a.judgements] == [r.model_dump(exclude=untimed) for r in b.judgements]


def test_a_rerun_reads_whole_rows_and_replays_no_transcript(scripted_server, tmp_path, monkeypatch):
    server = scripted_server(SummarizationJudgeScript())
    first = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path))
    assert _stored_count(tmp_path) == len(SUMMARIES)
    asked = len(server.requests)

    def no_transcript(self, key):
        raise AssertionError("a stored row replayed a transcript")

    monkeypatch.setattr(JudgeCache, "get", no_transcript)
    rerun = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path))
    assert len(server.requests) == asked
    assert rerun.metrics["judge/cache_hit_rate"] == 1.0
    pd.testing.assert_frame_equal(rerun.rows.drop(columns=[c for c in rerun.rows if c.startswith("judge_")]),
                                  first.rows.drop(columns=[c for c in first.rows if c.startswith("judge_")]))


def test_a_stored_row_counts_exactly_as_replaying_its_requests_would(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path))
    from_rows = _judge(server, tmp_path)
    stored = judge_summaries(SOURCES, SUMMARIES, judge=from_rows)
    _forget_rows(tmp_path)
    from_transcripts = _judge(server, tmp_path)
    replayed = judge_summaries(SOURCES, SUMMARIES, judge=from_transcripts)
    _same(stored, replayed)  # every row's usage: requests, cache hits, models and modes named, cost 0
    assert from_rows.usage == from_transcripts.usage
    assert from_rows.reported_models == from_transcripts.reported_models
    assert stored.judgements[0].usage.requests > 0 and stored.judgements[0].usage.cost_usd == 0.0


def test_rows_read_whole_mix_with_rows_judged_now_and_key_points_count_once_per_source(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript())
    judge_summaries(SOURCES[:6], SUMMARIES[:6], judge=_judge(server, tmp_path / "mixed"))
    judge_summaries(SOURCES[:6], SUMMARIES[:6], judge=_judge(server, tmp_path / "replayed"))
    _forget_rows(tmp_path / "replayed")
    # Another order, rows stored and rows not, sources whose first row is new and sources all of whose rows are stored.
    order = [8, 5, 2, 7, 0, 3, 6, 1, 4]
    sources, summaries = [SOURCES[i] for i in order], [SUMMARIES[i] for i in order]
    mixed = judge_summaries(sources, summaries, judge=_judge(server, tmp_path / "mixed"))
    replayed = judge_summaries(sources, summaries, judge=_judge(server, tmp_path / "replayed"))
    _same(mixed, replayed)
    assert mixed.metrics["judge/calls"] == replayed.metrics["judge/calls"] > 0


def test_a_row_with_an_error_is_not_stored_and_is_asked_again_when_asked_to(scripted_server, tmp_path):
    bad = SUMMARIES[1]

    def fault(request, kind):
        if kind == "verify" and marked_sections(request.messages[0]["content"]).get("CLAIMS", "").count("budget number 1."):
            return Reply("not json at all")  # twice (the repair too): invalid_answer, stored in the transcript
        return None

    failing = scripted_server(SummarizationJudgeScript(fault=fault))
    first = judge_summaries(SOURCES, SUMMARIES, judge=_judge(failing, tmp_path))
    assert [j.error is not None for j in first.judgements] == [s == bad for s in SUMMARIES]
    assert _stored_count(tmp_path) == len(SUMMARIES) - 1
    steady = scripted_server(SummarizationJudgeScript())
    again = judge_summaries(SOURCES, SUMMARIES, judge=_judge(steady, tmp_path, reask_invalid=True))
    assert again.metrics["judge_error_rate"] == 0
    assert [e.purpose for e in steady.requests] == ["ClaimVerdicts"]  # the failed row alone, its one failed request
    assert _stored_count(tmp_path) == len(SUMMARIES)


def _key(judge, *, coverage=True, max_source_tokens=None, source="a source", summary="a summary", method=Method()) -> str:
    store = RowStore(judge, method, coverage=coverage, max_source_tokens=max_source_tokens)
    return store.key(RowInput(id=0, source=source, summary=summary, source_key="k"))


def test_everything_that_could_change_a_record_changes_its_key(scripted_server, tmp_path, monkeypatch):
    server = scripted_server(SummarizationJudgeScript())
    base = _key(_judge(server, tmp_path))
    assert _key(_judge(server, tmp_path)) == base
    other_port = scripted_server(SummarizationJudgeScript())  # a loopback server's port is not part of any key
    assert _key(_judge(other_port, tmp_path)) == base
    changed = {
        "temperature": _key(_judge(server, tmp_path, temperature=0.5)),
        "seed": _key(_judge(server, tmp_path, seed=3)),
        "max_tokens": _key(_judge(server, tmp_path, max_tokens=99)),
        "coverage": _key(_judge(server, tmp_path), coverage=False),
        "chunking": _key(_judge(server, tmp_path), max_source_tokens=500),
        "stability": _key(_judge(server, tmp_path), method=Method(stability=3)),
        "order check": _key(_judge(server, tmp_path), method=Method(order_check=0.5)),
        "source": _key(_judge(server, tmp_path), source="another source"),
        "summary": _key(_judge(server, tmp_path), summary="another summary"),
        "texts split elsewhere": _key(_judge(server, tmp_path), source="a sourcea", summary=" summary"),
    }
    monkeypatch.setattr(stored_rows, "_code_hash", lambda: "edited")
    changed["code"] = _key(_judge(server, tmp_path))
    monkeypatch.setattr(stored_rows, "__version__", "99.0")
    changed["version"] = _key(_judge(server, tmp_path))
    assert base not in changed.values() and len(set(changed.values())) == len(changed)


def test_a_prompt_edit_changes_every_key(scripted_server, tmp_path, monkeypatch):
    server = scripted_server(SummarizationJudgeScript())
    base = _key(_judge(server, tmp_path))
    real = stored_rows.load_prompt

    def edited(name):
        prompt = real(name)
        return type(prompt)(prompt.name, prompt.version, prompt.template, prompt.source_text + ("x" if name == "coverage" else ""))

    monkeypatch.setattr(stored_rows, "load_prompt", edited)
    assert _key(_judge(server, tmp_path)) != base


def test_the_code_hash_changes_with_any_module_of_the_package(tmp_path):
    """Not a hand-kept list: an edit to the module that de-duplicates claims (once left out) changes every key."""
    import shutil

    package = Path(stored_rows.__file__).resolve().parents[1]
    copy = shutil.copytree(package, tmp_path / "package", ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.jsonl"))
    before = stored_rows._code_hash(copy)
    assert before == stored_rows._code_hash(package) and len(before) == 64
    (copy / "summarization" / "statements.py").write_text((copy / "summarization" / "statements.py").read_text() + "\n# edited\n")
    assert stored_rows._code_hash(copy) != before


@pytest.mark.parametrize("coverage", [False, True])
def test_a_stored_row_that_cannot_be_read_is_judged_again_from_its_transcripts(scripted_server, tmp_path, coverage):
    server = scripted_server(SummarizationJudgeScript())
    first = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path), coverage=coverage)
    with sqlite3.connect(tmp_path / CACHE_FILE) as conn:
        conn.execute("UPDATE row_records SET record_json = '{\"claims\": 3}'")
    rerun = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path), coverage=coverage)
    pd.testing.assert_frame_equal(rerun.rows.drop(columns=[c for c in rerun.rows if c.startswith("judge_")]),
                                  first.rows.drop(columns=[c for c in first.rows if c.startswith("judge_")]))
    assert rerun.metrics["judge/calls"] == 0


def test_rows_that_cannot_be_stored_are_a_warning_and_the_run_keeps_its_results(scripted_server, tmp_path, monkeypatch):
    server = scripted_server(SummarizationJudgeScript())
    expected = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path / "other"))

    def full_disk(self, statement, rows):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(RowStore, "_insert_many", full_disk)
    with pytest.warns(RuntimeWarning, match=r"could not store 9 judged row\(s\).*disk is full.*results are unaffected"):
        result = judge_summaries(SOURCES, SUMMARIES, judge=_judge(server, tmp_path))
    _same(result, expected)
    assert _stored_count(tmp_path) == 0
