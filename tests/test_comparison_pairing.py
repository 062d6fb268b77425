"""Paired comparisons that cannot be fooled: rows pair by id and source, judge errors leave the pair, too few
usable pairs are refused (issue 12, reproductions 1 and 2)."""

from __future__ import annotations

import math

import pytest
from helpers import judge_for

from mlflow_genai_metrics import compare_results, judge_summaries
from mlflow_genai_metrics.summarization import InsufficientPairsError, SourceMismatchError
from mlflow_genai_metrics.testing import Fault, SummarizationJudgeScript

GOOD = "The council approved budget {i}."
BAD = "The council rejected budget {i}."


def _article(i: int) -> str:
    return f"Article {i}. The council approved budget {i}. The mayor welcomed decision {i}."


def _summaries(n: int) -> list[str]:
    # Even rows are faithful, odd rows contradict their article.
    return [(GOOD if i % 2 == 0 else BAD).format(i=i) for i in range(n)]


def _script(fail_on_bad: bool = False) -> SummarizationJudgeScript:
    verdicts = {BAD.format(i=i): "no" for i in range(40)}

    def fault(request, kind):
        if fail_on_bad and "rejected" in request.messages[0]["content"]:
            return Fault.server_error()
        return None

    return SummarizationJudgeScript(verdicts=verdicts, fault=fault)


def _result(server, articles, summaries, *, ids=None, fail_on_bad=False):
    server.script = _script(fail_on_bad)
    return judge_summaries(articles, summaries, judge=judge_for(server, max_retries=0), ids=ids, coverage=False)


def test_a_row_the_judge_failed_on_either_side_leaves_the_pair(scripted_server):
    server = scripted_server()
    articles, summaries = [_article(i) for i in range(40)], _summaries(40)
    a = _result(server, articles, summaries)
    b = _result(server, articles, summaries, fail_on_bad=True)  # same verdicts, but 500 on every row A contradicted
    assert a.metrics["alignment"] == 0.5 and b.metrics["alignment"] == 1.0 and b.metrics["judge_error_rate"] == 0.5

    comparison = compare_results(a, b)

    alignment = comparison.difference("alignment")
    assert (alignment["a"], alignment["b"], alignment["difference"]) == (1.0, 1.0, 0.0)
    assert not alignment["significant"] and alignment["informative"] == 0 and math.isnan(alignment["p_value"])
    assert (comparison.pairs_used, comparison.pairs_dropped_for_errors) == (20, 20)
    assert "20 dropped for judge errors" in comparison.label


def test_a_shared_id_with_another_source_is_an_error_naming_it(scripted_server):
    server = scripted_server()
    a = _result(server, [_article(i) for i in range(40)], _summaries(40))  # ids 0..39
    even = list(range(0, 40, 2))
    b = _result(server, [_article(i) for i in even], [_summaries(40)[i] for i in even])  # ids 0..19, other articles
    with pytest.raises(SourceMismatchError, match=r"19 row id\(s\) name different source texts.*'1', '2'"):
        compare_results(a, b)


def test_the_same_articles_under_their_own_ids_pair_up(scripted_server):
    server = scripted_server()
    a = _result(server, [_article(i) for i in range(40)], _summaries(40))
    even = list(range(0, 40, 2))
    b = _result(server, [_article(i) for i in even], [GOOD.format(i=i) for i in even], ids=even)
    comparison = compare_results(a, b)
    assert (comparison.pairs_used, comparison.only_in_a, comparison.only_in_b) == (20, 20, 0)
    assert comparison.difference("alignment")["difference"] == 0.0  # the even rows were faithful in A too


def test_fewer_usable_pairs_than_half_of_either_run_are_refused_unless_asked(scripted_server):
    server = scripted_server()
    a = _result(server, [_article(i) for i in range(40)], _summaries(40), ids=[f"a{i}" for i in range(40)])
    b_ids = [f"a{i}" if i < 3 else f"b{i}" for i in range(40)]  # 3 of 40 ids shared
    b = _result(server, [_article(i) for i in range(40)], _summaries(40), ids=b_ids)
    with pytest.raises(InsufficientPairsError, match="only 3 usable pairs, fewer than half of run A's 40 rows"):
        compare_results(a, b)
    partial = compare_results(a, b, allow_partial=True)
    assert partial.partial and partial.pairs_used == 3 and partial.label.startswith("PARTIAL")


def test_a_hand_picked_handful_of_the_larger_run_is_refused(scripted_server):
    # The candidate judged on 3 of the champion's 40 articles: the smaller run is all paired, the larger is not.
    server = scripted_server()
    champion = _result(server, [_article(i) for i in range(40)], _summaries(40), ids=[f"a{i}" for i in range(40)])
    picked = _result(server, [_article(i) for i in range(3)], _summaries(3), ids=[f"a{i}" for i in range(3)])
    for a, b, side in ((champion, picked, "A"), (picked, champion, "B")):
        with pytest.raises(InsufficientPairsError, match=f"only 3 usable pairs, fewer than half of run {side}'s 40 rows"):
            compare_results(a, b)


def test_errored_pairs_count_against_the_half(scripted_server):
    server = scripted_server()
    articles = [_article(i) for i in range(10)]
    a = _result(server, articles, _summaries(10))
    b = _result(server, articles, [BAD.format(i=i) if i < 6 else GOOD.format(i=i) for i in range(10)], fail_on_bad=True)
    with pytest.raises(InsufficientPairsError, match="only 4 usable pairs"):
        compare_results(a, b)


def test_ids_pair_in_their_stored_text_form(scripted_server):
    server = scripted_server()
    articles, summaries = [_article(i) for i in range(6)], _summaries(6)
    a = _result(server, articles, summaries)  # integer ids 0..5
    b = _result(server, articles, summaries, ids=[str(i) for i in range(6)])  # the same ids, as a logged run holds them
    assert compare_results(a, b).pairs_used == 6


def test_no_usable_pair_is_refused_even_when_partial_is_allowed(scripted_server):
    server = scripted_server()
    a = _result(server, [_article(i) for i in range(4)], _summaries(4), ids=["a", "b", "c", "d"])
    b = _result(server, [_article(i) for i in range(4)], _summaries(4), ids=["w", "x", "y", "z"])
    with pytest.raises(InsufficientPairsError, match="no usable pair"):
        compare_results(a, b, allow_partial=True)


def test_an_empty_set_of_rows_is_a_clear_error_before_any_call(scripted_server):
    server = scripted_server()
    with pytest.raises(ValueError, match="there are no rows to judge"):
        judge_summaries([], [], judge=judge_for(server))
    assert server.request_count == 0


def test_a_reply_from_another_model_than_the_signature_names_is_flagged_in_the_report(scripted_server):
    from dataclasses import replace

    script = SummarizationJudgeScript()
    server = scripted_server(lambda request: replace(script(request), model="impostor-7b"))
    result = judge_summaries([_article(1)], [GOOD.format(i=1)], judge=judge_for(server), coverage=False)
    report = result.report()
    assert report["judge_model_mismatch"] is True and report["judge_reported_models"] == {"impostor-7b": 2}
    honest = judge_summaries([_article(1)], [GOOD.format(i=1)], judge=judge_for(scripted_server(script)), coverage=False)
    assert honest.report()["judge_model_mismatch"] is False


def test_a_row_error_keeps_its_stage_its_kind_and_what_the_endpoint_sent(scripted_server):
    from mlflow_genai_metrics.testing import Reply

    server = scripted_server(lambda request: Reply("<html>proxy error page</html>"))
    result = judge_summaries([_article(1)], [GOOD.format(i=1)], judge=judge_for(server, max_retries=0), coverage=False)
    error = result.judgements[0].error
    assert (error.stage, error.kind) == ("claim extraction", "invalid_answer")
    assert "proxy error page" in error.error.raw
    assert result.rows["error"][0] == str(error) and str(error).startswith("claim extraction failed: invalid_answer")
