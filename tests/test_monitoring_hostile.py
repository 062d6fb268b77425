"""Hostile cases of ``score_traces`` (production monitoring): traces whose application failed, other span layouts,
passes that overlap or stop."""

from __future__ import annotations

import mlflow
from helpers import judge_for
from mlflow_helpers import ARTICLES, Endpoint, first_sentence

from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, score_traces


@mlflow.trace
def summarize(text: str, id: str) -> str:
    if id == "biz/2":
        raise RuntimeError("the summarizer timed out")
    return first_sentence(text)


def _app_traces() -> None:
    for row_id, _, text in ARTICLES:
        try:
            summarize(text, row_id)
        except RuntimeError:
            pass
    mlflow.flush_trace_async_logging()


def _cards(name: str) -> dict[str, list[tuple]]:
    """Each trace's cards under ``name``, by row id, as (value, error code)."""
    return {t.data.spans[0].inputs["id"]: [(a.value, a.error.error_code if a.error else None) for a in t.info.assessments if a.name == name]
            for t in mlflow.search_traces(return_type="list")}


def test_a_trace_whose_application_failed_is_an_error_card_counted_once_and_never_scored_again(scripted_server, mlflow_store):
    """Its APPLICATION_ERROR card was taken for a judge's outage: every later pass re-scored the trace (``retried``),
    deleting and rewriting its cards for good, and no pass counted it as failed."""
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    _app_traces()
    judges = [ClaimAlignment(judge_for(endpoint, cache_dir=None)), Grounding()]
    first = score_traces("mgm-tests", judges=judges)
    assert (first.traces_seen, first.scored, first.judge_errors, first.application_errors, first.unusable) == (6, 6, 0, 1, 0)
    for name in ("claim_alignment", "grounding"):
        assert _cards(name)["biz/2"] == [(None, "APPLICATION_ERROR")]
    calls = endpoint.request_count
    second = score_traces("mgm-tests", judges=judges)
    assert (second.scored, second.retried, second.judge_errors, second.already_scored) == (0, 0, 0, 6)
    assert endpoint.request_count == calls
    assert _cards("claim_alignment")["biz/2"] == [(None, "APPLICATION_ERROR")]


def test_a_trace_whose_root_span_has_no_output_is_unusable_not_an_empty_summary(scripted_server, mlflow_store):
    """An application whose root span records its inputs only (the summary is logged elsewhere) got a "no" card on
    every trace: judged as an empty summary ("no claim"), and never looked at again."""
    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    for row_id, _, text in ARTICLES[:2]:
        with mlflow.start_span("app") as span:
            span.set_inputs({"text": text, "id": row_id})
    mlflow.flush_trace_async_logging()
    report = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(endpoint, cache_dir=None))])
    assert (report.traces_seen, report.scored, report.unusable) == (2, 0, 2)
    assert _cards("claim_alignment") == {"biz/1": [], "biz/2": []}


def test_a_trace_still_in_progress_is_left_for_the_next_pass(scripted_server, mlflow_store, monkeypatch):
    """A trace listed while its application still runs (no output yet) was judged as an empty summary, for good."""
    from mlflow.entities import TraceState

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    _app_traces()
    listed = mlflow.search_traces

    def one_in_progress(*args, **kwargs):
        traces = listed(*args, **kwargs)
        running = next(t for t in traces if t.data.spans[0].inputs["id"] == "spo/1")
        running.info.state = TraceState.IN_PROGRESS
        running.data.spans[0]._span._attributes.pop("mlflow.spanOutputs", None)
        return traces

    judges = [ClaimAlignment(judge_for(endpoint, cache_dir=None))]
    with monkeypatch.context() as patched:
        patched.setattr(mlflow, "search_traces", one_in_progress)
        first = score_traces("mgm-tests", judges=judges)
    assert (first.scored, first.deferred, first.unusable) == (5, 1, 0)
    assert _cards("claim_alignment")["spo/1"] == []
    second = score_traces("mgm-tests", judges=judges)  # it has finished: scored now
    assert (second.scored, second.already_scored) == (1, 5)
    assert _cards("claim_alignment")["spo/1"] == [("yes", None)]


def test_a_trace_deleted_between_listing_and_scoring_is_skipped_and_the_others_are_scored(scripted_server, mlflow_store, monkeypatch):
    """A trace deleted (a retention job) while the pass judged the rows stopped the pass with a bare AttributeError
    on None, before the cards of the traces after it were written."""
    from mlflow_genai_metrics.tracking import monitor

    endpoint = scripted_server(Endpoint(), models=Endpoint.models)
    _app_traces()
    read = monitor.trace_rows

    def then_deleted(*args, **kwargs):
        rows = read(*args, **kwargs)
        mlflow.MlflowClient().delete_traces(experiment_id=mlflow_experiment(), trace_ids=[rows[0][0].trace_id])
        return rows

    monkeypatch.setattr(monitor, "trace_rows", then_deleted)
    report = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(endpoint, cache_dir=None))])
    assert (report.traces_seen, report.scored, report.already_scored + report.unusable + report.deferred) == (6, 5, 1)
    assert sorted(len(cards) for cards in _cards("claim_alignment").values()) == [1] * 5


def mlflow_experiment() -> str:
    return mlflow.get_experiment_by_name("mgm-tests").experiment_id


def test_a_pass_with_another_judge_than_the_cards_already_there_says_the_experiment_now_mixes_two(scripted_server, mlflow_store):
    """A pass scores only the traces without a card: after the judge's model changed, the experiment held the
    verdicts of two judges side by side (3 traces by one, 3 by the other) and no pass said so."""
    first_judge = scripted_server(Endpoint(), models=Endpoint.models)
    second_judge = scripted_server(Endpoint(), models=("other-judge",))
    _app_traces()
    first = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(first_judge, cache_dir=None)), Grounding()], max_traces=3)
    assert first.scored == 3 and first.warnings == ()
    again = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(first_judge, cache_dir=None)), Grounding()], max_traces=0)
    assert again.warnings == ()  # the same judge: nothing to say
    second = score_traces("mgm-tests", judges=[ClaimAlignment(judge_for(second_judge, cache_dir=None)), Grounding()])
    assert second.scored == 3
    (warning,) = [w for w in second.warnings if w.kind == "other_judges"]
    assert "claim_alignment by openai:/scripted-judge" in str(warning) and "claim_alignment by openai:/other-judge" in str(warning)
    assert "grounding by" not in str(warning).split("than this pass's")[0]  # the grounding model did not change
