"""The row's verdict card means *faithful* (every claim supported: ``strictly_aligned``), an unverifiable claim makes
it No, and a run whose judge verified almost nothing says so: in the result, as a run tag, in what ``mgm`` prints,
and in the decisions the defaults make (the demo's gate reads ``strict_alignment``, which such a judge gives 0)."""

from __future__ import annotations

import itertools
import json
import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from conftest import SECRET_KEY
from helpers import judge_for
from mlflow.entities import AssessmentSource, AssessmentSourceType
from mlflow.tracking import MlflowClient
from mlflow_helpers import ARTICLES, Endpoint, first_sentence, frame

from mlflow_genai_metrics import evaluate_summaries, judge_summaries
from mlflow_genai_metrics.cli import main as mgm
from mlflow_genai_metrics.cli.local import DEMO_GATE
from mlflow_genai_metrics.study import Candidate, run_study, warning_lines
from mlflow_genai_metrics.summarization.cards import claim_card, coverage_card, grounding_card
from mlflow_genai_metrics.summarization.records import CheckedClaim, RowJudgement
from mlflow_genai_metrics.summarization.scoring import row_values
from mlflow_genai_metrics.summarization.warnings import LOW_VERIFICATION, low_verification_warning, verification_warning
from mlflow_genai_metrics.testing import SummarizationJudgeScript
from mlflow_genai_metrics.tracking import ClaimAlignment, judge_agreement, log_result
from mlflow_genai_metrics.tracking.feedback import card_feedback

TAG = "mgm.warning.low_verification"
NOTHING_VERIFIED = "the judge verified almost nothing (idk for 100% of 6 claims): it cannot tell a good summary from a bad one"
SOURCE = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id="scripted-judge")


class _Unsure(dict):
    """Every claim: idk (what a judge too small for the task answers)."""

    def get(self, claim, default=None):
        return "idk"


def unsure_endpoint() -> Endpoint:
    """The MLflow tests' endpoint (candidates and judge) with a judge that answers idk to every claim."""
    endpoint = Endpoint()
    endpoint.judge = SummarizationJudgeScript(verdicts=_Unsure())
    return endpoint


def judgement(*verdicts: str) -> RowJudgement:
    claims = [CheckedClaim(claim=f"Claim {n}.", verdict=v, reason=f"reason {n}") for n, v in enumerate(verdicts, start=1)]
    return RowJudgement(id="r1", source_key="k", claims=claims)


def card(*verdicts: str):
    return card_feedback("claim_alignment", claim_card(judgement(*verdicts)), SOURCE, {})


def records() -> list[dict]:
    """The six articles as ``mlflow.genai.evaluate`` data, each summarised by its first sentence."""
    return [{"inputs": {"text": text, "id": row_id}, "outputs": first_sentence(text)} for row_id, _, text in ARTICLES]


def cards_of(run_id: str) -> dict[str, str]:
    """Row id -> the claim_alignment card's value, from the run's traces."""
    mlflow.flush_trace_async_logging()
    found = {}
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        root = next(span for span in trace.data.spans if span.parent_id is None)
        found[root.inputs["id"]] = next(a.value for a in trace.info.assessments if a.name == "claim_alignment")
    return found


@pytest.fixture
def judge_env(scripted_server, monkeypatch, tmp_path):
    """``mgm``'s judge from the environment, on a scripted endpoint; returns the server."""

    def configure(endpoint):
        server = scripted_server(endpoint, models=Endpoint.models)
        for name, value in {"MGM_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": SECRET_KEY,
                            "MGM_JUDGE_MODEL": "scripted-judge", "MGM_JUDGE_BASE_URL": server.base_url}.items():
            monkeypatch.setenv(name, value)
        return server

    return configure


# -- the card ------------------------------------------------------------------------------------------------------


def test_a_summary_whose_one_claim_is_unverifiable_is_no_and_the_head_line_says_why():
    found = card("idk")
    assert found.value == "no"
    assert found.rationale.splitlines()[0] == "**No**: 1 unverifiable claim (the source does not support it); 0 of 1 claim supported."
    assert (found.metadata["strictly_aligned"], found.metadata["aligned"], found.metadata["unverifiable"]) == ("false", "true", "1")


def test_a_summary_whose_two_claims_are_both_supported_is_yes():
    found = card("yes", "yes")
    assert found.value == "yes"
    assert found.rationale.splitlines()[0] == "**Yes**: 2 claims, every one supported by the source."
    assert found.metadata["strictly_aligned"] == "true"


def test_a_contradicted_claim_is_no_and_named_first_in_the_head_line():
    head = card("yes", "idk", "no", "idk").rationale.splitlines()[0]
    assert head == ("**No**: 1 contradicted claim (the source says otherwise) and 2 unverifiable claims (the source does "
                    "not support them); 1 of 4 claims supported.")


def test_a_summary_with_no_claim_is_no():
    found = card()
    assert found.value == "no" and found.rationale == "**No**: the summary makes no claim (defect: empty)."


def test_the_rationale_lists_contradicted_claims_then_unverifiable_then_supported():
    lines = card("yes", "idk", "no", "idk", "yes").rationale.splitlines()[2:]
    assert [line.split("**")[1] for line in lines] == ["contradicted", "unverifiable", "unverifiable", "supported", "supported"]
    assert [line.split(": ", 1)[1].split(" — ")[0] for line in lines] == ["Claim 3.", "Claim 2.", "Claim 4.", "Claim 1.", "Claim 5."]


def test_the_card_is_yes_exactly_when_the_row_is_strictly_aligned():
    for size in range(4):
        for verdicts in itertools.product(("yes", "no", "idk"), repeat=size):
            assert (card(*verdicts).value == "yes") == (row_values(judgement(*verdicts))["strictly_aligned"] == 1), verdicts


# -- the warning, in the core ---------------------------------------------------------------------------------------


def test_the_warning_says_what_it_means():
    assert verification_warning(40, 2, 34).message == (
        "the judge verified almost nothing (idk for 85% of 40 claims): it cannot tell a good summary from a bad one"
    )
    assert str(verification_warning(5, 0, 2)) == (
        "the judge verified almost nothing (no claim supported: 3 contradicted and 2 idk of 5 claims): it cannot tell a "
        "good summary from a bad one"
    )


def test_the_warning_starts_at_80_percent_idk_or_no_claim_supported():
    assert verification_warning(10, 2, 8).kind == LOW_VERIFICATION  # 80% exactly
    assert verification_warning(10, 3, 7) is None
    assert verification_warning(10, 0, 0) is not None  # every claim contradicted: none supported
    assert verification_warning(0, 0, 0) is None  # no claim judged: nothing to warn about


def test_the_warning_reads_a_rows_table_leaving_failed_rows_out():
    rows = pd.DataFrame({
        "claim_count": pd.array([4, 1, None], dtype="Int64"),
        "supported_claims": pd.array([0, 1, None], dtype="Int64"),
        "unverifiable_claims": pd.array([4, 0, None], dtype="Int64"),
        "error": ["", "", "claim extraction failed: no_claims"],
    })
    assert "idk for 80% of 5 claims" in str(low_verification_warning(rows))
    assert low_verification_warning(rows.iloc[1:]) is None
    assert low_verification_warning(pd.DataFrame({"grounding": [0.5], "error": [""]})) is None  # the grounding check alone


def test_a_judge_that_answers_idk_to_everything_gives_strict_alignment_0_and_the_warning(scripted_server):
    server = scripted_server(SummarizationJudgeScript(verdicts=_Unsure()))
    texts = [text for _, _, text in ARTICLES]
    result = judge_summaries(texts, [first_sentence(t) for t in texts], judge=judge_for(server), coverage=False, progress=False)
    assert result.metrics["strict_alignment"] == 0 and result.metrics["alignment"] == 1  # nothing contradicted, nothing supported
    assert [(w.kind, w.message) for w in result.warnings] == [(LOW_VERIFICATION, NOTHING_VERIFIED)]
    assert result.report()["warnings"] == {LOW_VERIFICATION: NOTHING_VERIFIED}


def test_a_run_whose_every_claim_is_supported_has_no_warning(scripted_server):
    server = scripted_server(SummarizationJudgeScript())
    texts = [text for _, _, text in ARTICLES]
    result = judge_summaries(texts, [first_sentence(t) for t in texts], judge=judge_for(server), coverage=False, progress=False)
    assert result.metrics["strict_alignment"] == 1
    assert result.warnings == [] and result.report()["warnings"] == {}


# -- MLflow: cards, the run tag, monitoring, agreement --------------------------------------------------------------


def test_an_idk_judge_s_cards_are_no_and_its_run_carries_the_warning_tag(scripted_server, mlflow_store):
    server = scripted_server(unsure_endpoint(), models=Endpoint.models)
    evaluation = evaluate_summaries(records(), judges=[ClaimAlignment(judge_for(server))])
    assert set(cards_of(evaluation.run_id).values()) == {"no"}
    assert MlflowClient().get_run(evaluation.run_id).data.tags[TAG] == NOTHING_VERIFIED
    assert [w.message for w in evaluation.warnings] == [NOTHING_VERIFIED]
    report = json.loads(mlflow.artifacts.load_text(f"runs:/{evaluation.run_id}/mgm/report.json"))
    assert report["warnings"] == {LOW_VERIFICATION: NOTHING_VERIFIED}


def test_a_run_whose_every_claim_is_supported_has_yes_cards_and_no_warning_tag(scripted_server, mlflow_store):
    server = scripted_server(Endpoint(), models=Endpoint.models)
    evaluation = evaluate_summaries(records(), judges=[ClaimAlignment(judge_for(server))])
    assert set(cards_of(evaluation.run_id).values()) == {"yes"}
    assert not [key for key in MlflowClient().get_run(evaluation.run_id).data.tags if key.startswith("mgm.warning.")]


def test_logging_a_run_again_without_the_warning_removes_its_tag(scripted_server, mlflow_store):
    texts = [text for _, _, text in ARTICLES]
    summaries = [first_sentence(t) for t in texts]
    unsure = judge_summaries(texts, summaries, judge=judge_for(scripted_server(SummarizationJudgeScript(verdicts=_Unsure()))), progress=False)
    sure = judge_summaries(texts, summaries, judge=judge_for(scripted_server(SummarizationJudgeScript())), progress=False)
    with mlflow.start_run() as run:
        log_result(unsure)
        assert MlflowClient().get_run(run.info.run_id).data.tags[TAG] == NOTHING_VERIFIED
        log_result(sure)
    assert TAG not in MlflowClient().get_run(run.info.run_id).data.tags


def test_judge_agreement_compares_the_faithful_card_with_people(scripted_server, mlflow_store):
    # biz/1's summary adds a detail the source does not hold: the judge's idk, a person's "no" (not faithful)
    endpoint = Endpoint()
    endpoint.judge = SummarizationJudgeScript()
    server = scripted_server(endpoint, models=Endpoint.models)
    data = records()
    data[0]["outputs"] = "The council approved the budget on Monday after a parade."
    evaluation = evaluate_summaries(data, judges=[ClaimAlignment(judge_for(server))])
    mlflow.flush_trace_async_logging()
    for trace in mlflow.search_traces(run_id=evaluation.run_id, return_type="list"):
        root = next(span for span in trace.data.spans if span.parent_id is None)
        mlflow.log_feedback(trace_id=trace.info.trace_id, name="claim_alignment", value="no" if root.inputs["id"] == "biz/1" else "yes",
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="alice"))
    report = judge_agreement(run_id=evaluation.run_id, log=False)
    assert report.counts["pairs_used"] == 6
    assert report.metrics["balanced_accuracy"] == 1.0  # the card's "no" for the unsupported detail is alice's "no"
    assert report.confusion.to_numpy().tolist() == [[1, 0], [0, 5]]


def test_mgm_monitor_scores_an_idk_judge_s_traces_no_and_prints_the_warning(judge_env, mlflow_store, capsys):
    judge_env(unsure_endpoint())

    @mlflow.trace
    def summarize(text: str, id: str) -> str:
        return first_sentence(text)

    for row_id, _, text in ARTICLES:
        summarize(text, row_id)
    mlflow.flush_trace_async_logging()
    assert mgm(["monitor", "--experiment", "mgm-tests", "--no-coverage", "--tracking-uri", mlflow_store]) == 0
    assert f"WARNING: {NOTHING_VERIFIED}" in capsys.readouterr().out
    values = [a.value for t in mlflow.search_traces(return_type="list") for a in t.info.assessments if a.name == "claim_alignment"]
    assert values == ["no"] * len(ARTICLES)


# -- what the user reads, and what the defaults decide --------------------------------------------------------------


def test_mgm_evaluate_prints_strict_alignment_and_the_warning(judge_env, mlflow_store, tmp_path, capsys):
    judge_env(unsure_endpoint())
    path = tmp_path / "summaries.csv"
    frame().to_csv(path, index=False)
    assert mgm(["evaluate", str(path), "--id-col", "id", "--no-coverage", "--tracking-uri", mlflow_store]) == 0
    out = capsys.readouterr().out
    assert f"\nWARNING: {NOTHING_VERIFIED}\n" in out
    assert re.search(r"^  strict_alignment +0  \[", out, re.MULTILINE) and re.search(r"^  alignment +1  \[", out, re.MULTILINE)
    run_id = out.split("run ")[1].split()[0]
    assert MlflowClient().get_run(run_id).data.tags[TAG] == NOTHING_VERIFIED


def test_mgm_evaluate_prints_no_warning_when_the_judge_supports_the_claims(judge_env, mlflow_store, tmp_path, capsys):
    judge_env(Endpoint())
    path = tmp_path / "summaries.csv"
    frame().to_csv(path, index=False)
    assert mgm(["evaluate", str(path), "--id-col", "id", "--no-coverage", "--tracking-uri", mlflow_store]) == 0
    assert "WARNING" not in capsys.readouterr().out


def test_the_demo_gate_reads_strict_alignment_and_refuses_a_judge_that_verified_nothing(tmp_path, scripted_server, mlflow_store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    assert "strict_alignment" in DEMO_GATE and "alignment" not in DEMO_GATE
    server = scripted_server(unsure_endpoint(), models=Endpoint.models)
    candidates = [Candidate("good", "good-summarizer", server.base_url)]
    result = run_study(frame().drop(columns=["summary"]), candidates, judge_for(server), gate_rules=DEMO_GATE, progress=False,
                       artifact_location=tmp_path / "artifacts")
    gate = result.gates["good"]
    strict = next(o for o in gate.outcomes if o.rule.metric == "strict_alignment")
    assert not gate.passed and not strict.passed and strict.actual == 0
    assert MlflowClient().get_run(result.run_ids["good"]).data.metrics["alignment"] == 1  # the old rule would have passed it
    assert warning_lines(result.warnings) == [f"WARNING: good: {NOTHING_VERIFIED}"]
    assert result.table.set_index("candidate").loc["good", "strict alignment [95% CI]"].startswith("0.000 [")


def test_the_study_has_no_warning_for_a_judge_that_supports_the_claims(tmp_path, scripted_server, mlflow_store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    server = scripted_server(Endpoint(), models=Endpoint.models)
    result = run_study(frame().drop(columns=["summary"]), [Candidate("good", "good-summarizer", server.base_url)], judge_for(server),
                       progress=False, artifact_location=tmp_path / "artifacts")
    assert result.warnings == {} and np.isclose(float(result.table.loc[0, "strict alignment [95% CI]"].split()[0]), 1.0)


def test_cards_show_values_to_three_significant_digits_and_name_the_judge_as_mlflow_does():
    """A person reads 0.667 and 0.0142 on a card, not 0.6666666666666666 or 0.014194148827315435 (the run's tables
    keep the exact values); the judge is named ``openai:/<model>``, as MLflow's own judges name theirs."""
    from mlflow_genai_metrics.grounding.scoring import RowGrounding
    from mlflow_genai_metrics.summarization.records import CoveredKeyPoint
    from mlflow_genai_metrics.tracking.feedback import judge_source

    points = [CoveredKeyPoint(key_point=f"Point {n}.", covered=n == 0, reason="r") for n in range(3)]
    covered = card_feedback("key_point_coverage", coverage_card(RowJudgement(id="r1", source_key="k", claims=[], key_points=points)), SOURCE, {})
    assert covered.value == 0.333
    grounded = RowJudgement(id="r1", source_key="k", claims=[], grounding=RowGrounding(0.014194148827315435, False, "grounding 0.01 (not grounded); 1 sentence."))
    assert card_feedback("grounding", grounding_card(grounded), SOURCE, {}).value == 0.0142
    assert card("yes", "yes", "no").metadata["support_rate"] == "0.667"
    assert judge_source("gpt-4o-mini").source_id == "openai:/gpt-4o-mini"
    assert judge_source("anthropic:/claude-3").source_id == "anthropic:/claude-3"
