"""Verdict stability (issue 29): ``stability=k`` asks each verification k times as distinct requests (a seed
each), keeps each claim's majority verdict, flags the claims whose repetitions disagree, and reports
``judge/flip_rate``; against a scripted judge that flips a known share of verdicts, the flip rate is that share and
the majority verdicts are right. The repetitions are cached apart (a rerun asks nothing) and priced in the estimate."""

from __future__ import annotations

import json
import re

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.rag import judge_answers
from mlflow_genai_metrics.signature import parse_signature
from mlflow_genai_metrics.summarization import estimate_cost
from mlflow_genai_metrics.summarization.stability import majority_verdict
from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply, SummarizationJudgeScript, marked_sections

ROWS = 20


def corpus() -> tuple[list[str], list[str]]:
    sources = [f"Article {k}. The club {k} won its match on Saturday. The striker {k} scored twice." for k in range(ROWS)]
    summaries = [f"The club {k} won its match. The striker {k} scored twice." for k in range(ROWS)]
    return sources, summaries


def flipping(seeds: set[int], rows: set[int], script=None, kind: str = "verify", flipped: dict | None = None):
    """A fault that answers the verification of the striker's claim of ``rows`` with no (``flipped``: the fields to
    set instead) in the repetitions sent with one of ``seeds`` (the request itself goes without a seed; repetition r
    with seed r); ``script``'s answer otherwise (a summaries judge by default; ``kind`` its verification pass)."""
    script = script if script is not None else SummarizationJudgeScript()

    def fault(request, asked):
        if asked != kind or request.body.get("seed") not in seeds:
            return None
        sections = marked_sections(request.messages[0]["content"])
        answer = script.answer(asked, sections)
        claims = re.findall(r"^\s*(\d+)\.\s*(.+)$", sections["CLAIMS"], flags=re.M)
        for verdict, (_, claim) in zip(answer["verdicts"], claims):
            striker = re.search(r"striker (\d+)", claim)
            if striker and int(striker.group(1)) in rows:
                verdict.update(flipped or {"verdict": "no"})
        return Reply(json.dumps(answer))

    return fault


FLIPPED = {k for k in range(ROWS) if k % 4 == 0}  # 5 of the 40 claims


def test_the_flip_rate_is_the_share_of_claims_a_scripted_judge_flips_and_the_majority_is_right(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=flipping({1}, FLIPPED)))
    result = judge_summaries(*corpus(), judge=judge_for(server), stability=3, coverage=False, grounding=False, progress=False)
    assert result.metrics["judge/flip_rate"] == len(FLIPPED) / (2 * ROWS) == 0.125
    assert result.metrics["judge/flip_rate_n"] == ROWS
    assert (result.claims["verdict"] == "yes").all() and result.metrics["strict_alignment"] == 1.0  # 2 yes of 3: yes
    rows = result.rows.set_index("id")
    assert [int(rows.loc[k, "unstable_claims"]) for k in range(ROWS)] == [int(k in FLIPPED) for k in range(ROWS)]
    assert server.request_count == ROWS * (1 + 3)  # claims once, verification three times
    assert "1 unstable verdict (asked again" in rows.loc[0, "reasoning"] and "unstable: 67% of repetitions agree" in rows.loc[0, "reasoning"]
    assert "unstable" not in rows.loc[1, "reasoning"]
    seeds = sorted({str(r.body.get("seed")) for r in server.requests if "CLAIMS" in r.body["messages"][0]["content"]})
    assert seeds == ["1", "2", "None"]
    assert parse_signature(result.signature)["stability"] == "3"


def test_a_verdict_flipped_in_most_repetitions_is_the_majority_and_still_unstable(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=flipping({1, 2}, FLIPPED)))
    result = judge_summaries(*corpus(), judge=judge_for(server), stability=3, coverage=False, grounding=False, progress=False)
    contradicted = result.rows.set_index("id")["contradicted_claims"]
    assert [int(contradicted.loc[k]) for k in range(ROWS)] == [int(k in FLIPPED) for k in range(ROWS)]
    assert result.metrics["judge/flip_rate"] == 0.125 and result.metrics["defect_rate/contradiction"] == len(FLIPPED) / ROWS


def test_without_repetitions_there_is_no_flip_rate_and_the_signature_is_unchanged(scripted_server):
    server = scripted_server(SummarizationJudgeScript(fault=flipping({1}, FLIPPED)))
    result = judge_summaries(*corpus(), judge=judge_for(server), coverage=False, grounding=False, progress=False)
    assert "judge/flip_rate" not in result.metrics and "unstable_claims" not in result.rows
    assert "stability" not in parse_signature(result.signature) and result.claims["verdict"].eq("yes").all()


def test_an_identical_rerun_with_stability_makes_no_call(scripted_server, tmp_path):
    server = scripted_server(SummarizationJudgeScript(fault=flipping({1}, FLIPPED)))
    first = judge_summaries(*corpus(), judge=judge_for(server, cache_dir=tmp_path), stability=3, coverage=False, grounding=False)
    calls = server.request_count
    again = judge_summaries(*corpus(), judge=judge_for(server, cache_dir=tmp_path), stability=3, coverage=False, grounding=False)
    assert server.request_count == calls and again.metrics["judge/flip_rate"] == first.metrics["judge/flip_rate"] == 0.125
    # a run at stability 1 afterwards is the first repetition: read from the cache too, no call
    judge_summaries(*corpus(), judge=judge_for(server, cache_dir=tmp_path), coverage=False, grounding=False)
    assert server.request_count == calls


def test_the_estimate_prices_every_repetition(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    once = estimate_cost(*corpus(), judge=judge_for(server), coverage=False)
    thrice = estimate_cost(*corpus(), judge=judge_for(server), stability=3, coverage=False)
    verify = {p.name: p for p in once.passes}["verify"], {p.name: p for p in thrice.passes}["verify"]
    assert verify[1].calls == 3 * verify[0].calls and verify[1].prompt_tokens == 3 * verify[0].prompt_tokens
    assert thrice.calls == once.calls + 2 * verify[0].calls


@pytest.mark.parametrize("verdicts, expected", [
    (["no", "yes", "yes"], ("yes", "because yes", 2 / 3)),
    (["no", "no", "no"], ("no", "because no", 1.0)),
    (["yes", "no", "idk"], ("idk", "because yes", 1 / 3)),  # no majority: the judge could not settle it (first reason)
    (["no", "yes"], ("idk", "because no", 1 / 2)),
    (["yes", "no", "yes", "idk"], ("idk", "because yes", 1 / 2)),  # half is no majority (a plurality once said yes)
    (["no", "yes", "no", "idk", "no"], ("no", "because no", 3 / 5)),
    (["yes", "no", "idk", "yes", "no", "yes"], ("idk", "because yes", 1 / 2)),
])
def test_the_majority_verdict_its_reason_and_its_agreement(verdicts, expected):
    assert majority_verdict([(v, f"because {v}") for v in verdicts]) == expected


def flipping_answers(seeds: set[int], rows: set[int]) -> AnswersJudgeScript:
    """An answers judge that says idk (no passage, no quote) for the striker's claim of ``rows`` in the repetitions
    sent with one of ``seeds``; a cited yes otherwise (``AnswersJudgeScript``'s rule)."""
    return AnswersJudgeScript(fault=flipping(seeds, rows, AnswersJudgeScript(), "verify_passages", {"verdict": "idk", "passage": 0, "quote": ""}))


def test_answers_take_stability_the_majority_cited_verdict_and_the_flip_rate(scripted_server):
    sources, answers = corpus()
    questions = [f"What did club {k} do?" for k in range(ROWS)]
    server = scripted_server(flipping_answers({1}, FLIPPED))
    result = judge_answers(questions, [[source] for source in sources], answers, judge=judge_for(server), stability=3, progress=False)
    assert result.metrics["judge/flip_rate"] == len(FLIPPED) / (2 * ROWS) == 0.125 and result.metrics["judge/flip_rate_n"] == ROWS
    assert (result.claims["verdict"] == "yes").all() and result.metrics["strict_alignment"] == 1.0  # 2 cited yes of 3: yes
    assert (result.claims["passage"] == 1).all() and result.claims["quote_found"].all()  # the majority's citation is kept
    rows = result.rows.set_index("id")
    assert [int(rows.loc[k, "unstable_claims"]) for k in range(ROWS)] == [int(k in FLIPPED) for k in range(ROWS)]
    unstable = result.claims[result.claims["agreement"] < 1]
    assert len(unstable) == len(FLIPPED) and unstable["agreement"].tolist() == pytest.approx([2 / 3] * len(FLIPPED))
    verifications = [r for r in server.requests if "=====CLAIMS " in r.body["messages"][0]["content"]]
    assert len(verifications) == 3 * ROWS and sorted({r.body.get("seed") for r in verifications}, key=str) == [1, 2, None]
    assert parse_signature(result.signature)["stability"] == "3"
    # flipped in 2 of 3 repetitions: the majority is idk, and the claim is unstable
    server.script = flipping_answers({1, 2}, FLIPPED)
    result = judge_answers(questions, [[source] for source in sources], answers, judge=judge_for(server, cache_dir=None), stability=3,
                           progress=False)
    assert result.metrics["strict_alignment"] == 1 - len(FLIPPED) / ROWS
    assert set(result.claims.loc[result.claims["verdict"] == "idk", "claim"]) == {f"The striker {k} scored twice." for k in FLIPPED}


def test_answers_on_spark_take_no_method_yet(scripted_server):
    """Spark's answers carry no stability or order-check counts yet: ``judge_answers_spark`` takes no method, so no
    run signs a check it did not make (``judge_answers`` and MLflow honour both)."""
    from mlflow_genai_metrics.spark import judge_answers_spark

    server = scripted_server(SummarizationJudgeScript())
    for name, value in (("stability", 3), ("order_check", 0.5)):
        with pytest.raises(TypeError, match=name):
            judge_answers_spark(None, judge=judge_for(server), **{name: value})
    assert server.request_count == 0


def test_a_gate_whose_beat_rule_holds_only_through_unstable_claims_is_refused_when_stability_is_required(scripted_server, mlflow_store):
    import mlflow
    from mlflow.tracking import MlflowClient

    from mlflow_genai_metrics import SummarizerModel, register_if_passing
    from mlflow_genai_metrics.tracking import log_result

    sources, summaries = corpus()
    # The champion's striker claims on FLIPPED rows are contradicted every time; the candidate's are supported, but
    # one repetition in three says otherwise: it wins strict_alignment 20 to 15 only through unstable verdicts.
    champion_summaries = [s.replace("twice", "three times") if k in FLIPPED else s for k, s in enumerate(summaries)]
    wrong = {f"The striker {k} scored three times.": "no" for k in FLIPPED}
    server = scripted_server(SummarizationJudgeScript(verdicts=wrong, fault=flipping({1}, FLIPPED)))

    def logged(texts: list[str], name: str) -> tuple[str, str]:
        result = judge_summaries(sources, texts, judge=judge_for(server), stability=3, coverage=False, grounding=False)
        with mlflow.start_run(run_name=name) as run:
            info = SummarizerModel("scripted-judge", server.base_url).log(name="summarizer")
            log_result(result, log_metrics=True)
        return run.info.run_id, info.model_uri

    champion_run, champion_uri = logged(champion_summaries, "champion")
    assert register_if_passing(champion_uri, "news", run_id=champion_run, rules={"judge_error_rate": "<= 0.5"}).passed
    candidate_run, candidate_uri = logged(summaries, "candidate")

    # the same champion in a second registry, whose gate does not require stability
    assert register_if_passing(champion_uri, "news-unchecked", run_id=champion_run, rules={"judge_error_rate": "<= 0.5"}).passed
    # 5 pairs, all the candidate's: exact McNemar p = 1/32, under the first attempt's level at alpha 0.1 (0.05)
    plain = register_if_passing(candidate_uri, "news-unchecked", run_id=candidate_run, rules={"richness": ">= 1"}, beat_champion=True,
                                confidence=0.9)
    assert plain.passed, str(plain)

    required = register_if_passing(candidate_uri, "news", run_id=candidate_run, rules={"richness": ">= 1"}, beat_champion=True,
                                   require_stability=True, confidence=0.9)
    assert not required.passed and required.registered_version is None
    assert "strict_alignment" in str(required.failed[0].rule)
    assert str(MlflowClient().get_model_version_by_alias("news", "champion").version) == "1"


def test_a_gate_requiring_stability_refuses_a_candidate_judged_once(scripted_server, mlflow_store):
    import mlflow

    from mlflow_genai_metrics import SummarizerModel, register_if_passing
    from mlflow_genai_metrics.tracking import log_result

    server = scripted_server(SummarizationJudgeScript())
    for name in ("champion", "candidate"):
        result = judge_summaries(*corpus(), judge=judge_for(server), coverage=False, grounding=False)
        with mlflow.start_run(run_name=name) as run:
            info = SummarizerModel("scripted-judge", server.base_url).log(name="summarizer")
            log_result(result, log_metrics=True)
        gate = register_if_passing(info.model_uri, "once", run_id=run.info.run_id, rules={"richness": ">= 1"},
                                   beat_champion=name == "candidate", require_stability=True)
    assert not gate.passed and "judged with each verification asked once" in gate.failed[0].detail
