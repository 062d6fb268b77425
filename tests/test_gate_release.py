"""A gate that failures, skew and retries cannot fool (issue 44): each reproduction of the audit, on real MLflow runs in
a SQLite store judged by the scripted server.

- rows the judge could not read because of what the candidate wrote count against it, and a not-worse rule on the
  failures its outputs caused runs beside every beat rule;
- a mean or ratio needs 100 pairs, beside a strict-alignment not-worse rule;
- every attempt against one champion is counted on its version and spends its own level;
- the half-of-the-champion rule counts the beat metric's own pairs; a candidate judged on more articles is compared on
  the champion's;
- passed or failed, the decision is on the candidate's run.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from helpers import judge_for
from mlflow.tracking import MlflowClient

from mlflow_genai_metrics import SummarizerModel, judge_summaries, register_if_passing
from mlflow_genai_metrics.summarization.decision import MIN_MEAN_PAIRS, attempt_level
from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript
from mlflow_genai_metrics.tracking import log_result

GOOD = "The council approved budget {i}."
BAD = "The council rejected budget {i}."
VAGUE = "Aliens visited town {i}."
REFUSAL = "I am sorry, but I cannot summarize this article."


def _article(i: int) -> str:
    return f"Article {i}. The council approved budget {i}. The mayor welcomed decision {i}."


def _script(**fields) -> SummarizationJudgeScript:
    verdicts = {**{BAD.format(i=i): "no" for i in range(200)}, **{VAGUE.format(i=i): "idk" for i in range(200)}}
    return SummarizationJudgeScript(verdicts=verdicts, claims={REFUSAL: []}, **fields)


def _logged(server, summaries: list[str], *, run_name: str, first: int = 0, coverage: bool = False, grounding: bool = False,
            judge=None, judge_script=None, grounding_only: bool = False, **script) -> tuple[str, str]:
    server.script = judge_script or _script(**script)
    indices = range(first, first + len(summaries))
    with mlflow.start_run(run_name=run_name) as run:
        info = SummarizerModel(run_name, "http://127.0.0.1:9/v1", input_col="text").log(name="summarizer")
        result = judge_summaries([_article(i) for i in indices], summaries, judge=None if grounding_only else judge or judge_for(server),
                                 ids=[f"a{i}" for i in indices], coverage=coverage, grounding=grounding or grounding_only)
        log_result(result, log_metrics=True)
    return run.info.run_id, info.model_uri


def _champion(server, summaries: list[str], rules: dict | None = None, **options) -> str:
    run_id, uri = _logged(server, summaries, run_name="champion", **options)
    assert register_if_passing(uri, "summarizer", run_id=run_id, rules=rules or {"richness": ">= 0"}).passed
    return run_id


def _gate(run_id: str, uri: str, rules: dict | None = None, **options):
    return register_if_passing(uri, "summarizer", run_id=run_id, rules=rules or {"richness": ">= 0"}, beat_champion=True, **options)


def _champion_version() -> str:
    return str(MlflowClient().get_model_version_by_alias("summarizer", "champion").version)


def _outcome(gate, metric: str):
    return next(o for o in gate.outcomes if o.rule.metric == metric)


def test_a_candidate_refusing_half_the_articles_is_refused_by_its_failures(scripted_server, mlflow_store):
    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) if i < 4 else GOOD.format(i=i) for i in range(40)])  # strict alignment 0.9
    # the audit's candidate: 20 refusals (words, no claim) and 20 faithful rows; once 1.000 "over 20 rows", registered
    run_id, uri = _logged(server, [REFUSAL if i % 2 else GOOD.format(i=i) for i in range(40)], run_name="refuses")

    gate = _gate(run_id, uri)

    assert not gate.passed and gate.registered_version is None and _champion_version() == "1"
    beat = _outcome(gate, "strict_alignment vs champion")
    assert beat.detail.startswith("worse than the champion: strict_alignment is lower than the champion's (0.5 against 0.9)")
    assert beat.n == 40 and "40 pairs used (20 with an output the judge could not read" in beat.detail
    failures = _outcome(gate, "judge_error_rate vs champion, not worse")
    assert not failures.passed and failures.detail.startswith("significantly worse than the champion; champion version 1: failures the outputs caused")
    assert failures.test == "exact McNemar" and failures.p_value == pytest.approx(0.5**20)


def _too_long(fault: str):
    """What an endpoint does with a prompt over its context window (HTTP 400), or a reply that runs past the judge's
    ``max_tokens`` (cut off), for prompts over 12,000 characters."""
    def answer(request, kind):
        if len(" ".join(m["content"] for m in request.messages)) <= 12000:
            return None
        if fault == "context window":
            return Fault.http(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9600 tokens.")
        return Reply('{"claims": ["The council rejected budget', finish_reason="length")
    return answer


@pytest.mark.parametrize("fault", ["context window", "max_tokens"])
def test_summaries_too_long_for_the_judge_count_against_their_run(scripted_server, mlflow_store, fault):
    """A candidate fixes 8 of the champion's 60 rows and, on 3 rows the champion got right, rambles past the judge's
    context window (HTTP 400) or makes its reply run past ``max_tokens``: once those 3 pairs were left out as the
    infrastructure's (within the allowance) and the candidate registered, 8 fixed against 0 (p = 2^-8). Counted
    against it, 8 fixed against 3 broken: one-sided p = 0.113, not better."""
    server = scripted_server()
    _champion(server, [BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(60)])
    ramble = " ".join(f"The council rejected budget {{i}} in meeting {k}." for k in range(400))
    summaries = [GOOD.format(i=i) if i < 8 else ramble.format(i=i) if i < 11 else GOOD.format(i=i) for i in range(60)]
    run_id, uri = _logged(server, summaries, run_name="rambles", fault=_too_long(fault))
    rows = pd.read_parquet(MlflowClient().download_artifacts(run_id, "mgm/rows.parquet"))
    assert sorted(rows.loc[rows["error"] != "", "id"]) == ["a10", "a8", "a9"]

    gate = _gate(run_id, uri)

    assert not gate.passed and _champion_version() == "1"
    beat = _outcome(gate, "strict_alignment vs champion")
    assert beat.n == 60 and beat.p_value == pytest.approx(0.11328125) and beat.detail.startswith("not significantly better")
    assert "60 pairs used (3 with an output the judge could not read" in beat.detail


def test_summaries_the_grounding_check_cannot_read_count_against_their_run(scripted_server, mlflow_store):
    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) if i < 10 else GOOD.format(i=i) for i in range(40)], grounding=True)
    # 30 of 40 summaries in Cyrillic get no grounding: once registered on the other 10 pairs (p = 2^-10)
    run_id, uri = _logged(server, [GOOD.format(i=i) if i < 10 else f"Совет одобрил бюджет {i}." for i in range(40)],
                          run_name="cyrillic", grounding=True)

    gate = _gate(run_id, uri, beat_metric="grounded_rate")

    assert not gate.passed and _champion_version() == "1"
    beat = _outcome(gate, "grounded_rate vs champion")
    assert beat.n == 40 and beat.detail.startswith("worse than the champion: grounded_rate is lower than the champion's (0.25 against 0.75)")


def test_infrastructure_failures_leave_the_pair_and_a_few_of_them_do_not_stop_the_decision(scripted_server, mlflow_store):
    from mlflow_genai_metrics.testing import Fault

    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) if i < 12 else GOOD.format(i=i) for i in range(40)])
    # two rows' verification answers HTTP 500 every time: the pairs leave, counted, and the rest decides
    broken = {GOOD.format(i=38), GOOD.format(i=39)}
    def fault(request, kind):
        prompt = request.messages[0]["content"]
        return Fault("status", 500) if kind == "verify" and any(text in prompt for text in broken) else None
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="two 500s", fault=fault)

    gate = _gate(run_id, uri)

    assert gate.passed, str(gate)
    tags = MlflowClient().get_model_version("summarizer", "2").tags
    assert tags["mgm.gate.pairs_dropped_for_errors"] == "2" and tags["mgm.gate.pairs_used"] == "38"


def test_a_ratio_decided_on_twenty_pairs_is_refused_for_too_few_pairs(scripted_server, mlflow_store):
    server = scripted_server()
    # the skewed candidate: better on 19 rows, one long summary mostly unsupported; equal claim support or worse
    _champion(server, [f"{GOOD.format(i=i)} {VAGUE.format(i=i)}" for i in range(20)])
    long_bad = " ".join(VAGUE.format(i=100 + k) for k in range(12))
    run_id, uri = _logged(server, [long_bad if i == 0 else GOOD.format(i=i) for i in range(20)], run_name="skewed")

    gate = _gate(run_id, uri, beat_metric="claim_support_rate")

    assert not gate.passed
    beat = _outcome(gate, "claim_support_rate vs champion")
    assert beat.detail.startswith(f"refused: too few pairs for a decision on a ratio (20; it needs {MIN_MEAN_PAIRS}")
    beside = _outcome(gate, "strict_alignment vs champion, not worse")  # the exact rule beside a ratio's
    assert beside.test == "exact McNemar" and beside.n == 20


def test_each_attempt_against_a_champion_spends_its_own_level(scripted_server, mlflow_store):
    server = scripted_server()
    _champion(server, [BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(60)])
    # attempt 1: 5 of 30 articles fixed, p = 1/32: registered at 0.05 before attempts counted, not at 0.025
    first, uri = _logged(server, [GOOD.format(i=i) if i < 5 else BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(30)],
                         run_name="try 1")
    gate = _gate(first, uri, beat_metric="defect_rate/contradiction")
    assert not gate.passed and "p = 0.0312, Holm-adjusted p = 0.0312 at level 0.025" in gate.failed[0].detail
    # attempt 2, the candidate again with 10 more rows and 6 fixed: p = 1/64 = 0.016 would pass at the first attempt's
    # 0.025; the second attempt is decided at 0.0125
    second, uri = _logged(server, [GOOD.format(i=i) if i < 6 else BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(40)],
                          run_name="try 2")
    gate = _gate(second, uri, beat_metric="defect_rate/contradiction")

    assert not gate.passed and _champion_version() == "1"
    beat = _outcome(gate, "defect_rate/contradiction vs champion")
    assert beat.p_value == pytest.approx(1 / 64) and "at level 0.0125" in beat.detail and beat.detail.startswith("too few pairs to test at this attempt's level 0.0125")
    tags = MlflowClient().get_model_version("summarizer", "1").tags
    assert tags["mgm.gate.attempts"] == "2"
    assert tags["mgm.gate.attempts.1"] == f"run {first}: level 0.025, failed"
    assert tags["mgm.gate.attempts.2"] == f"run {second}: level 0.0125, failed"
    assert MlflowClient().get_run(second).data.tags["mgm.gate.attempt"] == "2 against version 1 of summarizer, decided at level 0.0125"
    # at the default confidence nothing is "looser" (1 - 0.95 is 0.050000000000000044 in floating point: it was)
    assert not any("looser level" in message for message in gate.messages), gate.messages


def test_two_grounding_only_runs_are_decided_without_a_judge_error_rule_that_cannot_run(scripted_server, mlflow_store):
    """``judge=None`` on both sides (``mgm evaluate --grounding-only``): the not-worse rule on the judge error rate once
    failed every such gate ("cannot be compared row by row") and spent an attempt; with no judge there is no judge
    failure to compare, and the record says so."""
    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) for i in range(40)], rules={"grounding_n": ">= 0"}, grounding_only=True)
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="faithful", grounding_only=True)

    gate = _gate(run_id, uri, rules={"grounding_n": ">= 0"}, beat_metric="grounded_rate")

    assert gate.passed and _champion_version() == "2"
    assert _outcome(gate, "grounded_rate vs champion").n == 40
    rule = _outcome(gate, "judge_error_rate vs champion, not worse")
    assert rule.passed and rule.detail.startswith("not tested: neither run asked a judge (the grounding check alone)")
    assert server.request_count == 0


def test_a_summarizer_answering_function_words_is_not_registered_on_grounded_rate(scripted_server, mlflow_store):
    """"It is." for every article: once grounded on all 40 (0.57-0.58) and registered over a champion whose summaries
    are grounded on none; now nothing to check on any row, each counted as not grounded against the champion's."""
    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) for i in range(40)], rules={"grounding_n": ">= 0"}, grounding_only=True)
    run_id, uri = _logged(server, ["It is."] * 40, run_name="it is", grounding_only=True)

    gate = _gate(run_id, uri, rules={"grounding_n": ">= 0"}, beat_metric="grounded_rate")

    assert not gate.passed and _champion_version() == "1"
    beat = _outcome(gate, "grounded_rate vs champion")  # 0 of 40 against 0 of 40: once "stands on 0 pairs"
    assert beat.n == 40 and beat.actual == 0 and beat.detail.startswith("too few pairs to test (0 of 40 pairs differ)")


def test_a_retry_at_a_looser_confidence_is_held_to_the_alpha_of_the_first_look(scripted_server, mlflow_store):
    """A gate that said "too few pairs to test" showed the outcome (4 of 40 pairs fixed, p = 1/16): asked again with
    confidence 0.5 it once decided at 0.25 and registered. The first gate that compares rows with a champion fixes
    the alpha all attempts against it share; a later, looser one is held to it, and says so."""
    server = scripted_server()
    _champion(server, [BAD.format(i=i) if i < 4 else GOOD.format(i=i) for i in range(40)])
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="4 fixed")

    first = _gate(run_id, uri)
    assert not first.passed and _outcome(first, "strict_alignment vs champion").detail.startswith("too few pairs to test")
    assert MlflowClient().get_model_version("summarizer", "1").tags["mgm.gate.alpha"] == "0.05"
    looser = _gate(run_id, uri, confidence=0.5)

    assert not looser.passed and _champion_version() == "1"
    beat = _outcome(looser, "strict_alignment vs champion")
    assert beat.p_value == pytest.approx(1 / 16) and "at level 0.025" in beat.detail
    assert any("confidence 0.5 asked, but the attempts against champion version 1 share alpha = 0.05" in m for m in looser.messages)
    # a stricter retry is taken as asked (the second attempt at 0.01 / 2^2, where 4 pairs can test nothing)
    stricter = _outcome(_gate(run_id, uri, confidence=0.99), "strict_alignment vs champion").detail
    assert stricter.startswith("too few pairs to test") and "at level 0.0025" in stricter
    tags = MlflowClient().get_model_version("summarizer", "1").tags
    assert (tags["mgm.gate.alpha"], tags["mgm.gate.attempts"]) == ("0.05", "1")


def test_two_gates_at_once_against_one_champion_each_count_the_other(scripted_server, mlflow_store, monkeypatch):
    """Two candidates gated at the same moment (two CI jobs): both once read "no attempt yet", both decided at 0.025
    as the first attempt, and one's record overwrote the other's. Each now says it is deciding before it counts, so
    the later reader counts the earlier; here each has said so before either reads (a barrier): both decide as the
    second attempt, at 0.0125, and both records stay."""
    import threading

    from mlflow_genai_metrics.tracking import attempts

    server = scripted_server()
    _champion(server, [BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(30)])
    runs = [_logged(server, [GOOD.format(i=i) if i < 6 else BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(30)],
                    run_name=f"candidate {n}") for n in (1, 2)]  # 6 fixed, p = 1/64 (passes at 0.025, not at 0.0125)
    together, claim = threading.Barrier(2, timeout=60), attempts.claim

    def claim_then_wait(*args):
        claim(*args)
        together.wait()

    monkeypatch.setattr(attempts, "claim", claim_then_wait)
    gates: dict[str, object] = {}
    threads = [threading.Thread(target=lambda r=r, u=u: gates.__setitem__(r, _gate(r, u))) for r, u in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert len(gates) == 2 and not any(g.passed for g in gates.values()) and _champion_version() == "1"
    for gate in gates.values():
        beat = _outcome(gate, "strict_alignment vs champion")
        assert beat.p_value == pytest.approx(1 / 64) and "at level 0.0125" in beat.detail
    tags = MlflowClient().get_model_version("summarizer", "1").tags
    records = {key: value for key, value in tags.items() if key.startswith("mgm.gate.attempts.")}
    assert records == {f"mgm.gate.attempts.2.{r}": f"run {r}: level 0.0125, failed" for r, _ in runs}
    assert tags["mgm.gate.attempts"] == "2" and not [key for key in tags if key.startswith("mgm.gate.deciding")]


def _six_fixed(server) -> tuple[str, str]:
    """A champion and a candidate that fixes 6 of its 8 bad summaries (p = 1/64 on strict alignment): (run id, uri)."""
    _champion(server, [BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(30)])
    return _logged(server, [GOOD.format(i=i) if i < 6 else BAD.format(i=i) if i < 8 else GOOD.format(i=i) for i in range(30)],
                   run_name="candidate")


def test_a_gate_whose_count_lands_after_another_s_counts_again(scripted_server, mlflow_store, monkeypatch):
    """The test above once ended with both records and the count "1" (a fresh clone's CI): one gate read one record,
    the other wrote its record and "2", then the first wrote its stale "1". Here that other gate acts between this
    gate's read and its write: this gate reads again after writing and sets the count it then reads."""
    run_id, uri = _six_fixed(scripted_server())
    real, raced = MlflowClient.set_model_version_tag, []

    def overtaken(self, name, version, key, value):
        if key == "mgm.gate.attempts" and not raced:
            raced.append(value)
            real(self, name, version, "mgm.gate.attempts.1.other", "run other: level 0.025, failed")  # the other gate,
            real(self, name, version, key, "2")  # ... its record and its count, between this one's read and write
        return real(self, name, version, key, value)

    monkeypatch.setattr(MlflowClient, "set_model_version_tag", overtaken)
    _gate(run_id, uri)

    tags = MlflowClient().get_model_version("summarizer", "1").tags
    assert raced == ["1"] and tags["mgm.gate.attempts"] == "2"


@pytest.mark.parametrize("claim, counted", [(lambda now: f"deciding since {now - 7200:.0f}", False),  # killed 2 h ago
                                            (lambda now: f"deciding since {now - 60:.0f}", True),  # deciding now
                                            (lambda now: "deciding", True)])  # written by an older version: unknown age
def test_a_gate_killed_while_deciding_leaves_a_claim_that_counts_only_while_it_can_be_live(scripted_server, mlflow_store, claim, counted):
    """A gate killed (SIGKILL, a CI job's time limit) between its claim and its record left the claim, and every later
    gate against that champion counted it as an attempt: a level more to pay, for ever, for a decision nobody saw. A
    claim an hour old is removed and said; a recent one (another gate deciding now) still counts."""
    import time

    run_id, uri = _six_fixed(scripted_server())  # p = 1/64: passes at 0.025 (the first attempt), not at 0.0125
    MlflowClient().set_model_version_tag("summarizer", "1", "mgm.gate.deciding.killed", claim(time.time()))
    gate = _gate(run_id, uri)

    tags = MlflowClient().get_model_version("summarizer", "1").tags
    said = [m for m in gate.messages if "the gate of run killed" in m]
    if counted:
        assert not gate.passed and "at level 0.0125" in _outcome(gate, "strict_alignment vs champion").detail
        assert "mgm.gate.deciding.killed" in tags and not said
    else:
        assert gate.passed and "at level 0.025" in _outcome(gate, "strict_alignment vs champion").detail
        assert "mgm.gate.deciding.killed" not in tags and "2.0 h ago and never recorded an outcome" in said[0]
    assert not [key for key in tags if key.startswith("mgm.gate.deciding.") and key != "mgm.gate.deciding.killed"]


def test_a_gate_that_another_beats_to_the_champion_s_alpha_takes_the_other_s(scripted_server, mlflow_store, monkeypatch):
    """Two gates at once both set the champion's alpha first: MLflow's SQL store reads, then inserts, and the second
    once failed the whole gate with a UNIQUE constraint (seen in a fresh clone's run of the test above). It now reads
    the alpha the other set."""
    from mlflow.exceptions import MlflowException

    run_id, uri = _six_fixed(scripted_server())
    real, raced = MlflowClient.set_model_version_tag, []

    def beaten(self, name, version, key, value):
        if key == "mgm.gate.alpha" and not raced:
            raced.append(key)
            real(self, name, version, key, "0.05")  # the other gate, a moment before
            raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: model_version_tags.key")
        return real(self, name, version, key, value)

    monkeypatch.setattr(MlflowClient, "set_model_version_tag", beaten)
    gate = _gate(run_id, uri, confidence=0.5)  # asks 0.5; the other fixed 0.05

    assert raced and "at level 0.025" in _outcome(gate, "strict_alignment vs champion").detail  # p = 1/64: passes at it
    assert MlflowClient().get_model_version("summarizer", "1").tags["mgm.gate.alpha"] == "0.05"


def test_attempt_levels_sum_to_alpha_whatever_the_number_of_attempts():
    assert [attempt_level(0.05, k) for k in (1, 2, 3)] == [0.025, 0.0125, 0.00625]
    assert sum(attempt_level(0.05, k) for k in range(1, 60)) <= 0.05
    with pytest.raises(ValueError, match="from 1"):
        attempt_level(0.05, 0)


def test_a_candidate_judged_on_more_articles_is_compared_on_the_champion_s(scripted_server, mlflow_store):
    server = scripted_server()
    _champion(server, [BAD.format(i=i) if i < 10 else GOOD.format(i=i) for i in range(40)])
    # the champion's 40 articles and 60 more: once refused ("fewer than half of run B's 100 rows")
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(100)], run_name="superset")

    gate = _gate(run_id, uri)

    assert gate.passed and _champion_version() == "2"
    assert _outcome(gate, "strict_alignment vs champion").n == 40
    tags = MlflowClient().get_model_version("summarizer", "2").tags
    assert (tags["mgm.gate.pairs_used"], tags["mgm.gate.only_in_candidate"]) == ("40", "60")


def test_coverage_decided_on_the_pairs_whose_key_points_match_needs_half_the_champion(scripted_server, mlflow_store):
    server = scripted_server()
    # the champion's judge listed other key points for 28 of its 40 articles: coverage pairs only on the other 12
    other = {_article(i): [f"Point {i} elsewhere."] for i in range(12, 40)}
    _champion(server, [GOOD.format(i=i) for i in range(40)], coverage=True, key_points=other)
    run_id, uri = _logged(server, [f"{GOOD.format(i=i)} The mayor welcomed decision {i}." for i in range(40)], run_name="covers",
                          coverage=True)

    gate = _gate(run_id, uri, beat_metric="coverage")

    assert not gate.passed and _champion_version() == "1"
    beat = _outcome(gate, "coverage vs champion")
    assert beat.n == 12  # once decided on these 12 (p = 0.013), registered and tagged "40 pairs used"
    assert beat.detail.startswith("refused: coverage stands on 12 pairs, fewer than half of the champion's 40 judged rows")


def test_a_failed_gate_is_recorded_on_the_candidate_s_run(scripted_server, mlflow_store, tmp_path):
    server = scripted_server()
    _champion(server, [GOOD.format(i=i) for i in range(6)])
    run_id, uri = _logged(server, [BAD.format(i=i) if i < 5 else GOOD.format(i=i) for i in range(6)], run_name="worse")
    MlflowClient().set_tag(run_id, "mlflow.note.content", "Our notes on this run.")

    gate = _gate(run_id, uri, beat_metric="defect_rate/contradiction")

    assert not gate.passed
    tags = MlflowClient().get_run(run_id).data.tags
    assert tags["mgm.gate.decision"].startswith("failed (1 of 3 rules) for summarizer: FAIL defect_rate/contradiction vs champion < 0")
    assert tags["mgm.gate.test.defect_rate/contradiction"].startswith("exact McNemar, one-sided (better; lower is better), n 6")
    path = MlflowClient().download_artifacts(run_id, "mgm_gate_decisions.json", str(tmp_path))
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    assert [r["rule"] for r in rows] == ["richness >= 0", "defect_rate/contradiction vs champion < 0",
                                        "judge_error_rate vs champion, not worse <= 0"]
    assert [r["passed"] for r in rows] == [True, False, True]
    assert list(table["columns"][:6]) == ["rule", "passed", "actual", "required", "test", "n"]
    note = MlflowClient().get_run(run_id).data.tags["mlflow.note.content"]  # the run's description: theirs, then the decision
    assert note.startswith("Our notes on this run.\n\n<!-- mlflow_genai_metrics gate decision -->\n"
                           "**Registry gate (summarizer): failed 1 of 3 rules, nothing registered**")
    _gate(run_id, uri, beat_metric="defect_rate/contradiction")  # gated again: the latest decision replaces the last
    note = MlflowClient().get_run(run_id).data.tags["mlflow.note.content"]
    assert note.startswith("Our notes on this run.\n\n") and note.count("gate decision -->") == 1
    beat = rows[1]
    assert (beat["required"], beat["test"], beat["n"], beat["direction"]) == ("< 0", "exact McNemar", 6, "lower")
    assert beat["actual"] == pytest.approx(5 / 6) and beat["decision"] == "failed: nothing registered"


def _table_run(run_id: str, strict: list[int], bleu_better: bool = False):
    from dataclasses import dataclass as _dataclass

    import pandas as pd

    @_dataclass(frozen=True)
    class Run:
        run_id: str
        name: str
        metrics: dict
        signature: str
        rows: pd.DataFrame

    n = len(strict)
    rows = pd.DataFrame({"id": [f"a{i}" for i in range(n)], "source_key": [f"s{i}" for i in range(n)], "error": [""] * n,
                         "strictly_aligned": [float(v) for v in strict], "claim_count": [1.0] * n, "supported_claims": [float(v) for v in strict]})
    return Run(run_id, run_id, {"strict_alignment": sum(strict) / n}, "judge:x|mgm:0", rows)


def test_compare_runs_adjusts_every_candidate_s_p_values_together():
    from mlflow_genai_metrics.summarization.run_table import comparison_table

    base = _table_run("base", [0] * 6 + [1] * 34)
    # three candidates, each fixing the baseline's 6 failures: raw p = 2^-5 = 0.031 two-sided each
    candidates = [_table_run(f"cand{k}", [1] * 40) for k in range(3)]
    table, _ = comparison_table([base, *candidates], metrics=["strict_alignment"])
    tested = table[table["run_id"] != "base"]
    assert tested["p_value"].tolist() == pytest.approx([2 * 0.5**6] * 3)
    assert tested["p_holm"].tolist() == pytest.approx([3 * 2 * 0.5**6] * 3)  # one family of three, not three of one


def test_a_line_says_when_lexical_and_faithfulness_metrics_disagree():
    import pandas as pd

    from mlflow_genai_metrics.summarization.run_table import disagreements

    table = pd.DataFrame([
        {"run_id": "b" * 32, "run_name": "copycat", "metric": "bleu", "test": "paired approximate randomization", "p_holm": 0.001, "better": "this"},
        {"run_id": "b" * 32, "run_name": "copycat", "metric": "strict_alignment", "test": "exact McNemar", "p_holm": 0.0001, "better": "first"},
        {"run_id": "c" * 32, "run_name": "fine", "metric": "bleu", "test": "paired approximate randomization", "p_holm": 0.001, "better": "this"},
    ])
    lines = disagreements(table)
    assert lines == ["copycat (bbbbbbbb): lexical and faithfulness metrics disagree: better on bleu, worse on strict_alignment "
                     "(Holm p < 0.05); the decision metric is strict_alignment: overlap with a reference is not faithfulness to the article"]


def test_a_judge_that_changed_under_its_name_refuses_the_decision_and_both_names_are_recorded(scripted_server, mlflow_store, tmp_path):
    server = scripted_server()
    champion_run = _champion(server, [BAD.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)])
    # the champion's replies named another snapshot than the candidate's, under one signature (a hosted judge moved)
    client = MlflowClient()
    report = json.loads(Path(client.download_artifacts(champion_run, "mgm/report.json", str(tmp_path))).read_text())
    assert list(report["judge_reported_models"]) == ["scripted-judge"]
    report["judge_reported_models"] = {"scripted-judge-2026-01-01": 80}
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "report.json").write_text(json.dumps(report))
    client.log_artifact(champion_run, str(tmp_path / "new" / "report.json"), "mgm")
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="better")

    gate = _gate(run_id, uri)

    assert not gate.passed and _champion_version() == "1"  # 20 fixed rows would pass: p = 2^-20
    assert gate.failed[0].detail.startswith("refused: the judge's endpoint served scripted-judge for the candidate and "
                                            "scripted-judge-2026-01-01 for the champion under one signature")
    tags = client.get_run(run_id).data.tags
    assert tags["mgm.gate.served_models"] == "champion: scripted-judge-2026-01-01; candidate: scripted-judge"


def _outputs(summaries: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"a{i}" for i in range(len(summaries))], "text": [_article(i) for i in range(len(summaries))],
                         "summary": summaries})


def test_the_champion_judged_again_by_today_s_judge_is_not_beaten_by_the_judge_s_drift(scripted_server, mlflow_store, tmp_path):
    """Audit item 9: a hosted judge that became lenient under its name and signature made identical outputs "better"."""
    server = scripted_server()
    summaries = [VAGUE.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)]
    _champion(server, summaries)  # judged when the vague claims got idk: strict alignment 0.5
    lenient = SummarizationJudgeScript(verdicts={VAGUE.format(i=i): "yes" for i in range(40)}, claims={REFUSAL: []})  # today, same name
    judge = judge_for(server, cache_dir=tmp_path / "cache")
    run_id, uri = _logged(server, summaries, run_name="same outputs", judge=judge, judge_script=lenient)
    first = _gate(run_id, uri)
    assert first.passed and _champion_version() == "2", first.failed  # without judging the champion again: "better"
    MlflowClient().set_registered_model_alias("summarizer", "champion", "1")

    run_id, uri = _logged(server, summaries, run_name="same outputs again", judge=judge, judge_script=lenient)
    calls = server.request_count
    gate = _gate(run_id, uri, champion_data=_outputs(summaries), judge=judge)

    assert not gate.passed and _champion_version() == "1"
    assert server.request_count == calls  # the champion's outputs are the candidate's: every answer from the cache
    assert _outcome(gate, "strict_alignment vs champion").detail.startswith("too few pairs to test (0 of 40 pairs differ)")
    tags = MlflowClient().get_run(run_id).data.tags
    assert tags["mgm.gate.champion_drift"] == "20 of 40 rows judged otherwise than in the champion's run"
    assert "40 rows of the champion judged again with the candidate's judge" in tags["mgm.gate.champion_rejudged"]
    again = MlflowClient().search_runs([MlflowClient().get_run(run_id).info.experiment_id], "tags.`mgm.gate.rejudge_of` != ''")
    assert [r.info.run_name for r in again] == ["summarizer v1 judged again"] and again[0].data.metrics["strict_alignment"] == 1.0


def test_outputs_that_are_not_the_champion_s_are_refused_naming_the_rows(scripted_server, mlflow_store, tmp_path):
    server = scripted_server()
    _champion(server, [VAGUE.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)])
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="better")
    judge = judge_for(server)

    flattering = _outputs([GOOD.format(i=i) if i < 30 else VAGUE.format(i=i) for i in range(40)])  # not what the champion wrote
    gate = _gate(run_id, uri, champion_data=flattering, judge=judge)
    assert not gate.passed and "summaries differ on 30 rows" in gate.failed[0].detail
    fewer = _outputs([VAGUE.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)]).iloc[:30]
    assert "10 of its ids missing" in _gate(run_id, uri, champion_data=fewer, judge=judge).failed[0].detail
    with pytest.raises(ValueError, match="champion_data is judged again to beat the champion"):
        register_if_passing(uri, "summarizer", run_id=run_id, rules={"richness": ">= 0"}, champion_data=fewer, judge=judge)
    assert _champion_version() == "1"


def test_mgm_gate_judges_the_champion_s_outputs_again_with_the_judge_flags(scripted_server, mlflow_store, tmp_path, capsys):
    from mlflow_genai_metrics.cli import main as mgm

    server = scripted_server()
    summaries = [VAGUE.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)]
    _champion(server, summaries)
    lenient = SummarizationJudgeScript(verdicts={VAGUE.format(i=i): "yes" for i in range(40)}, claims={REFUSAL: []})
    run_id, uri = _logged(server, summaries, run_name="same outputs", judge_script=lenient)
    _outputs(summaries).to_csv(tmp_path / "champion.csv", index=False)

    code = mgm(["gate", run_id, "--model-uri", uri, "--name", "summarizer", "--rule", "richness>=0", "--beat-champion",
                "--champion-data", str(tmp_path / "champion.csv"), "--judge-model", server.models[0],
                "--judge-base-url", server.base_url, "--tracking-uri", mlflow_store])

    printed = capsys.readouterr().out
    assert code == 1 and _champion_version() == "1", printed
    assert "40 rows of the champion judged again with the candidate's judge" in printed and "too few pairs to test" in printed
    assert MlflowClient().get_run(run_id).data.tags["mgm.gate.champion_drift"].startswith("20 of 40 rows")


def test_a_champion_logged_before_summary_fingerprints_cannot_be_judged_again_from_unchecked_outputs(scripted_server, mlflow_store, tmp_path):
    server = scripted_server()
    summaries = [VAGUE.format(i=i) if i < 20 else GOOD.format(i=i) for i in range(40)]
    champion_run = _champion(server, summaries)
    client = MlflowClient()  # the champion's rows as a run logged before output_key existed
    rows = pd.read_parquet(client.download_artifacts(champion_run, "mgm/rows.parquet", str(tmp_path))).drop(columns="output_key")
    (tmp_path / "old").mkdir()
    rows.to_parquet(tmp_path / "old" / "rows.parquet", index=False)
    client.log_artifact(champion_run, str(tmp_path / "old" / "rows.parquet"), "mgm")
    run_id, uri = _logged(server, [GOOD.format(i=i) for i in range(40)], run_name="better")

    flattering = _outputs([GOOD.format(i=i) if i < 10 else VAGUE.format(i=i) for i in range(40)])  # its 4-word rows, moved
    gate = _gate(run_id, uri, champion_data=flattering, judge=judge_for(server))

    # outputs put in the champion's place would decide the gate, and nothing is left to tell them apart: refused
    assert not gate.passed and _champion_version() == "1"
    assert "keeps no fingerprint of its summaries" in gate.failed[0].detail
