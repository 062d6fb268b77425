"""The fault scenario: many rows against a scripted judge that faults a share of all requests, every way it can.

Used by ``tests/test_reliability.py`` (which asserts that nothing is lost) and by
``benchmarks/bench_faults.py`` (which reports the figures in ``docs/reliability.md``).

Each request is faulted with probability ``fault_rate`` (0.28 by default, which leaves about 25% of all requests
faulted once retries and repairs, exempt from some faults, are counted), decided by a hash of (seed, request, attempt), so a run is
reproducible. Transport faults (429 with and without Retry-After, 500, 503, a reply slower than the timeout, a
connection reset) hit a request's first two attempts; answer faults (invalid JSON, JSON of the wrong shape, the
wrong number of verdicts) hit the first attempt and are repaired by the re-ask; a truncated reply is final for
its row. Rows whose number is a multiple of 97 always get invalid JSON for their claims: they fail for good.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from mlflow_genai_metrics import Judge, judge_summaries
from mlflow_genai_metrics.testing import Fault, Reply, ScriptedJudgeServer, ScriptedRequest, SummarizationJudgeScript

__all__ = ["FaultScenarioReport", "FaultyJudgeScript", "run_fault_scenario"]

TRANSPORT_FAULTS = ("429-retry-after", "429-no-retry-after", "500", "503", "timeout", "reset")
ANSWER_FAULTS = ("invalid-json", "wrong-shape", "wrong-count", "truncated")
_ROW = re.compile(r"Row (\d+) ")


@dataclass
class FaultyJudgeScript:
    """A ``SummarizationJudgeScript`` behind a deterministic fault injector that keeps the server-side record."""

    fault_rate: float = 0.28  # retries and repairs are exempt from some faults: about 25% of all requests end faulted
    seed: int = 7
    slow_reply_s: float = 1.5
    permanent_every: int = 97
    judge: SummarizationJudgeScript = field(default_factory=SummarizationJudgeScript)
    injected: Counter = field(default_factory=Counter)
    last_outcome: dict[tuple[int, str], str] = field(default_factory=dict)  # (row, pass) -> "ok" | fault kind
    _order: dict[tuple[int, str], tuple[bool, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _draw(self, request: ScriptedRequest, salt: str) -> float:
        material = f"{self.seed}|{salt}|{json.dumps(request.messages, sort_keys=True)}|{request.attempt}"
        return int(hashlib.sha256(material.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    def __call__(self, request: ScriptedRequest):
        prompt = request.messages[0]["content"] if request.messages else ""
        match = _ROW.search(prompt)
        row = int(match.group(1)) if match else -1
        answer = self.judge(request)
        kind_of_pass = "verify" if "=====CLAIMS " in prompt else "claims"
        kind, fault = self._fault(request, row, kind_of_pass)
        if kind == "timeout":
            # The right answer, too late: the client should give up and retry, but a starved client may still read
            # it. Either way the row can end well, so a slow reply never makes the server's record say "failed".
            fault = Reply(answer.content, delay_s=self.slow_reply_s)
        with self._lock:
            # The latest attempt decides, not the latest to be processed: under load a timed-out first attempt can
            # reach the script after its retry did.
            key, rank = (row, kind_of_pass), (request.is_repair, request.attempt)
            if rank >= self._order.get(key, (False, -1)):
                self._order[key] = rank
                self.last_outcome[key] = "ok" if kind == "timeout" else kind
            if kind != "ok":
                self.injected[kind] += 1
        return fault if fault is not None else answer

    def _fault(self, request: ScriptedRequest, row: int, kind_of_pass: str) -> tuple[str, object]:
        if row >= 0 and row % self.permanent_every == 0 and kind_of_pass == "claims":
            return "invalid-json", Reply("{this is not json")
        if self._draw(request, "fault?") >= self.fault_rate:
            return "ok", None
        kinds = TRANSPORT_FAULTS + ANSWER_FAULTS
        kind = kinds[int(self._draw(request, "kind") * len(kinds)) % len(kinds)]
        if kind in TRANSPORT_FAULTS and request.attempt >= 2:
            return "ok", None
        if kind in ANSWER_FAULTS and (request.attempt >= 1 or request.is_repair) and kind != "truncated":
            return "ok", None
        if kind == "wrong-count" and kind_of_pass != "verify":
            kind = "wrong-shape"
        fault: object = {
            "429-retry-after": Fault.rate_limit(retry_after_s=0),
            "429-no-retry-after": Fault.rate_limit(retry_after_s=None),
            "500": Fault.server_error(500),
            "503": Fault.server_error(503),
            "timeout": None,  # replaced by the right answer, sent late (see __call__)
            "reset": Fault.disconnect(),
            "invalid-json": Reply('{"claims": ["unterminated'),
            "wrong-shape": Reply(json.dumps({"answer": "yes"})),
            "wrong-count": Reply(json.dumps({"verdicts": []})),
            "truncated": Reply('{"verdicts": [{"claim": 1, "rea', finish_reason="length"),
        }[kind]
        return kind, fault


@dataclass
class FaultScenarioReport:
    rows: int
    fault_rate: float
    requests: int
    faults_injected: dict[str, int]
    rows_judged: int
    rows_failed: int
    rows_lost: int
    duplicate_ids: int
    judge_error_rate: float
    server_failed_rows: int
    failed_rows_match_server: bool
    seconds: float
    mismatches: list[str] = field(default_factory=list)  # rows where the client and the server's log disagree

    def lines(self) -> list[str]:
        return [
            f"rows: {self.rows}; requests: {self.requests}; faults injected: {sum(self.faults_injected.values())} "
            f"({sum(self.faults_injected.values()) / self.requests:.1%} of requests) {dict(sorted(self.faults_injected.items()))}",
            f"rows judged: {self.rows_judged}; rows with a recorded error: {self.rows_failed}; rows lost: {self.rows_lost}; "
            f"duplicate ids: {self.duplicate_ids}",
            f"judge_error_rate: {self.judge_error_rate:.4f}; rows the server saw fail for good: {self.server_failed_rows} "
            f"(match: {self.failed_rows_match_server}); {self.seconds:.1f} s",
        ]


def run_fault_scenario(
    rows: int = 2000, *, fault_rate: float = 0.28, seed: int = 7, max_concurrency: int = 64, cache_dir: str | None = None
) -> FaultScenarioReport:
    """Judge ``rows`` summaries through a faulty scripted endpoint and account for every row."""
    script = FaultyJudgeScript(fault_rate=fault_rate, seed=seed)
    sources = [f"Article {i}. The council approved budget number {i}. The mayor welcomed budget {i}." for i in range(rows)]
    summaries = [f"Row {i} says the council approved budget number {i}. The mayor welcomed budget {i}." for i in range(rows)]
    started = time.perf_counter()
    with ScriptedJudgeServer(script, models=("scripted-judge",)) as server:
        judge = Judge("scripted-judge", server.base_url, "sk-fault-scenario", cache_dir=cache_dir, max_concurrency=max_concurrency,
                      timeout_s=0.5, backoff_initial_s=0.01, backoff_max_s=0.1, max_retries=6)
        result = judge_summaries(sources, summaries, judge=judge, ids=[f"r{i}" for i in range(rows)], coverage=False, resamples=200)
        requests = server.request_count
    seconds = time.perf_counter() - started
    table = result.rows
    failed_ids = set(table.loc[table["error"] != "", "id"])
    server_failed = {f"r{row}" for (row, _), outcome in script.last_outcome.items() if outcome != "ok" and row >= 0}
    judged = int((table["error"] == "").sum())
    errors = dict(zip(table["id"], table["error"]))
    mismatches = [
        f"{row_id}: client error {errors.get(row_id, '')[:80]!r}; server outcomes "
        f"{ {p: (script.last_outcome.get((int(row_id[1:]), p)), script._order.get((int(row_id[1:]), p))) for p in ('claims', 'verify')} }"
        for row_id in sorted(failed_ids ^ server_failed)
    ]
    return FaultScenarioReport(
        rows=rows,
        fault_rate=fault_rate,
        requests=requests,
        faults_injected=dict(script.injected),
        rows_judged=judged,
        rows_failed=len(failed_ids),
        rows_lost=rows - len(table),
        duplicate_ids=int(table["id"].duplicated().sum()),
        judge_error_rate=result.metrics["judge_error_rate"],
        server_failed_rows=len(server_failed),
        failed_rows_match_server=failed_ids == server_failed,
        seconds=seconds,
        mismatches=mismatches,
    )
