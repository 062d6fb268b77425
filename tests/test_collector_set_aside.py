"""Issue 47: while a large run waits on the judge's loop, Python's cyclic garbage collector leaves the caller's older
objects alone (``judge.runner.older_objects_set_aside``), and takes them back after: nothing the run makes escapes
the collector, nothing older is lost, a caller's own frozen objects stay frozen, and a small run (plain
``mlflow.genai.evaluate`` judges a row a call) leaves the collector as it is."""

from __future__ import annotations

import gc
import weakref

import pytest
from helpers import judge_for

from mlflow_genai_metrics import judge_summaries
from mlflow_genai_metrics.judge import runner
from mlflow_genai_metrics.judge.runner import SET_ASIDE_FROM_ROWS, older_objects_set_aside, run_sync
from mlflow_genai_metrics.summarization import judging
from mlflow_genai_metrics.testing import SummarizationJudgeScript


class Cycle:
    def __init__(self):
        self.me = self


@pytest.fixture(autouse=True)
def nothing_frozen():
    gc.unfreeze()  # the suite's own state: nothing set aside before or after each test
    yield
    gc.unfreeze()


LARGE = SET_ASIDE_FROM_ROWS


def test_a_synchronous_call_of_a_large_run_sets_older_objects_aside_while_it_waits_and_a_small_one_does_not():
    seen = []

    async def inside():
        seen.append(gc.get_freeze_count())
        return "done"

    assert run_sync(inside(), rows=LARGE) == "done"
    assert seen[-1] > 0  # set aside during the call
    assert gc.get_freeze_count() == 0  # and taken back after
    assert run_sync(inside(), rows=LARGE - 1) == "done" and run_sync(inside()) == "done"
    assert seen[1:] == [0, 0]  # fewer rows: the collector left as it is


def test_a_small_block_never_walks_the_frozen_objects(monkeypatch):
    """Finding out whether something is set aside walks every frozen object: a small run (one row of plain
    mlflow.genai.evaluate, in several threads while another holds objects aside) must not ask."""
    asked = []
    monkeypatch.setattr(gc, "get_freeze_count", lambda: asked.append(1) or 0)
    with older_objects_set_aside(LARGE - 1):
        pass
    assert asked == []
    with older_objects_set_aside(LARGE):
        pass
    assert asked == [1]


def test_cycles_made_during_the_block_are_collected_and_older_garbage_after_it():
    before = Cycle()
    gone_before = weakref.ref(before)
    with older_objects_set_aside(LARGE):
        del before  # garbage now, but set aside: the collector frees it once it is taken back
        made = Cycle()
        gone_made = weakref.ref(made)
        del made
        gc.collect()
        assert gone_made() is None  # a cycle of the block's own: collected as usual
        assert gone_before() is not None
    gc.collect()
    assert gone_before() is None


def test_a_failing_block_takes_the_older_objects_back():
    async def failing():
        assert gc.get_freeze_count() > 0
        raise ValueError("the judge's loop failed")

    with pytest.raises(ValueError, match="loop failed"):
        run_sync(failing(), rows=LARGE)
    assert gc.get_freeze_count() == 0


def test_a_callers_own_frozen_objects_stay_frozen():
    """A server that froze its start-up objects (``gc.freeze`` before forking workers) keeps them frozen: a block
    inside an enclosing one, or a caller's freeze, does nothing."""
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0

    async def inside():
        return gc.get_freeze_count()

    # (the count only falls as frozen objects that other threads let go are freed; taking them back would empty it)
    assert run_sync(inside(), rows=LARGE) > 0
    assert 0 < gc.get_freeze_count() <= frozen
    with older_objects_set_aside(LARGE):
        with older_objects_set_aside(LARGE):
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() > 0


@pytest.mark.parametrize("large", [True, False])
def test_judging_rows_sets_them_aside_for_the_judge_and_the_check_after_it(scripted_server, tmp_path, monkeypatch, large):
    """``judge_rows``: one block over the judge's loop and the grounding check's scores attached after it (where a
    full collection once fell in the run's serial tail), for a large run only (here one row counts as large)."""
    if large:
        monkeypatch.setattr(runner, "SET_ASIDE_FROM_ROWS", 1)
    counts = {}
    original = judging.ground_judgements

    def attached(*args, **kwargs):
        counts["attaching"] = gc.get_freeze_count()
        return original(*args, **kwargs)

    monkeypatch.setattr(judging, "ground_judgements", attached)
    server = scripted_server(SummarizationJudgeScript())
    result = judge_summaries(["The council approved the budget on Monday."], ["The council approved the budget."],
                             judge=judge_for(server, cache_dir=tmp_path), coverage=False)
    assert result.rows["grounding"].notna().all()
    assert (counts["attaching"] > 0) == large
    assert gc.get_freeze_count() == 0


def test_an_inner_block_leaves_the_outer_ones_objects_aside():
    with older_objects_set_aside(LARGE):
        with older_objects_set_aside(LARGE):
            pass
        assert gc.get_freeze_count() > 0  # the inner block did not take back what the outer set aside
    assert gc.get_freeze_count() == 0
