"""Batch mode: a Judge's requests answered through OpenAI's Files and Batches API (the scripted server's), or through
batch files and a command as vLLM's ``run_batch`` takes them; the same answers and cache as online."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import pytest
from conftest import verdict_json
from helpers import ask_about, judge_for, same_metrics

from mlflow_genai_metrics import Judge, judge_summaries
from mlflow_genai_metrics.judge import BatchFilesWritten, BatchOptions, Prices
from mlflow_genai_metrics.testing import Fault, Reply, ScriptedBatches, SummarizationJudgeScript

FAKE_VLLM = Path(__file__).resolve().parent / "fake_vllm_run_batch.py"


@contextlib.contextmanager
def stacks_if_stalled(after_s: float = 20.0):
    """Every thread's stack, as a warning (shown in the run's summary, the test passing), when the block is still
    running after ``after_s``: one test here took 60 s instead of 0.6 in three full runs of the suite (a request
    that waited out the judge's 60-s HTTP deadline, then passed on a retry), never alone or in 150 runs of it."""
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback_later(after_s, file=dump)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            dump.seek(0)
            if stacks := dump.read():
                warnings.warn(f"stalled past {after_s:g} s; every thread then:\n{stacks[-6000:]}", stacklevel=3)


def batch_judge(server, cache_dir=None, **options):
    """A Judge on the scripted server in batch mode, polling every 10 ms unless told otherwise."""
    options.setdefault("poll_s", 0.01)
    return judge_for(server, cache_dir=cache_dir).batched(**options)


def echo(request):
    return Reply(verdict_json(reason=request.last_user_message))


def questions(n: int):
    return [ask_about(f"row {i}") for i in range(n)]


def bbc_like(n: int = 12) -> tuple[list[str], list[str]]:
    """BBC-like rows: four-sentence news articles; one summary with a wrong number, one empty, one with no claim the
    judge can list (a ``no_claims`` re-ask)."""
    sources = [f"Club {k} won its league match on Saturday. The striker {k} scored twice in the second half. "
               f"The coach praised the defence. Tickets for the next game sold out." for k in range(n)]
    summaries = [f"Club {k} won on Saturday. The striker {k} scored twice." for k in range(n)]
    summaries[1] = "Club 1 won on Saturday. The striker 1 scored three times."
    summaries[3] = ""
    summaries[5] = "Nothing of note."
    return sources, summaries


def summarization_script(**options):
    return SummarizationJudgeScript(claims={"Nothing of note.": []}, **options)


# -- submit, poll, partial failure, expiry, failure -------------------------------------------------------------------


def test_requests_go_in_one_batch_that_is_polled_until_it_is_done(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(polls_before_done=3))
    replies = batch_judge(server).ask_many(questions(10))
    assert [r.answer.reason for r in replies] == [f"row {i}" for i in range(10)]
    assert (server.batch_api.uploads, server.batch_api.created, server.batch_api.retrieves) == (1, 1, 4)
    assert len({r.batch_id for r in server.requests}) == 1


def test_the_poll_interval_spaces_the_looks_at_a_batch(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(polls_before_done=2))
    judge = judge_for(server).batched(poll_s=0.2)
    loop = asyncio.new_event_loop()
    started = loop.time()
    loop.run_until_complete(judge.aask(ask_about("row 0")))
    assert loop.time() - started >= 0.4  # two looks saw it running, each followed by a wait of poll_s
    loop.close()


def test_a_batch_that_takes_seconds_is_polled_until_it_is_done(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(seconds_before_done=0.3))
    assert batch_judge(server, poll_s=0.05).ask(ask_about("row 0")).ok
    assert server.batch_api.retrieves >= 5 and server.batch_api.created == 1


def test_a_line_that_fails_is_a_typed_error_for_its_request_alone(scripted_server):
    server = scripted_server(lambda r: Fault.http(400, "too long") if "row 3" in r.last_user_message else echo(r))
    replies = batch_judge(server).ask_many(questions(6))
    assert [r.ok for r in replies] == [True, True, True, False, True, True]
    assert (replies[3].error.kind, replies[3].error.status_code) == ("bad_request", 400)
    assert server.batch_api.created == 1


def test_a_row_whose_line_failed_carries_the_error_and_no_score(scripted_server):
    sources, summaries = bbc_like()
    failing = summarization_script(fault=lambda r, kind: Fault.server_error(500) if kind == "verify" and "striker 2" in r.prompt_text else None)
    server = scripted_server(failing)
    result = judge_summaries(sources, summaries, judge=batch_judge(server), grounding=False, resamples=10)
    rows = result.rows.set_index("id")
    assert rows.loc[2, "error"].startswith("claim verification failed: server_error")
    assert pd.isna(rows.loc[2, "support_rate"]) and pd.isna(rows.loc[2, "aligned"])
    assert (rows.drop(index=[2, 5])["error"].fillna("") == "").all()  # row 5 is the no_claims row


def test_an_expired_batch_gives_what_it_completed_and_asks_the_rest_in_a_new_batch(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(expire_batches=1, lines_before_expiry=4))
    replies = batch_judge(server).ask_many(questions(10))
    assert all(r.ok for r in replies)
    assert server.batch_api.created == 2 and server.request_count == 10  # the 4 completed lines are not asked again
    assert [len([r for r in server.requests if r.batch_id == b]) for b in sorted({r.batch_id for r in server.requests})] == [4, 6]


def test_requests_every_batch_leaves_undone_become_batch_expired_errors(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(expire_batches=99, lines_before_expiry=0))
    replies = batch_judge(server, max_resubmits=1).ask_many(questions(3))
    assert [r.error.kind for r in replies] == ["batch_expired"] * 3
    assert server.batch_api.created == 2


def test_lines_an_expired_batch_never_ran_are_not_counted_as_calls(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(expire_batches=99, lines_before_expiry=4))
    judge = judge_for(server, max_calls=100, prices=Prices(input=1.0, output=2.0)).batched(poll_s=0.01, max_resubmits=0)
    replies = judge.ask_many(questions(10))
    assert sorted(r.error.kind if r.error else "ok" for r in replies) == ["batch_expired"] * 6 + ["ok"] * 4
    assert judge.usage.calls == judge.usage.batched_calls == server.request_count == judge.budget.calls == 4
    assert judge.budget.cost_usd == pytest.approx(judge.usage.cost_usd)


def test_a_run_whose_batch_expired_counts_only_the_lines_that_ran(scripted_server):
    server = scripted_server(summarization_script(), batch_api=ScriptedBatches(expire_batches=99, lines_before_expiry=5))
    sources, summaries = bbc_like()
    result = judge_summaries(sources, summaries, judge=judge_for(server), batch=BatchOptions(poll_s=0.01, max_resubmits=0),
                             grounding=False, resamples=10)
    assert "batch_expired" in " ".join(result.rows["error"])
    assert result.metrics["judge/calls"] == result.metrics["judge/batched_calls"] == server.request_count


def test_a_failed_batch_is_a_batch_failed_error_for_its_requests(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(fail_batches=1))
    judge = batch_judge(server)
    failed = judge.ask_many(questions(2))
    assert [r.error.kind for r in failed] == ["batch_failed"] * 2 and "scripted validation failure" in failed[0].error.message
    assert judge.usage.calls == judge.usage.batched_calls == 0  # refused at validation: no line ran, none is a call
    assert all(r.ok for r in judge.ask_many([ask_about("another")]))  # only that batch's requests
    assert judge.usage.calls == judge.usage.batched_calls == 1


def test_a_failed_batch_s_lines_are_not_calls_and_hold_no_budget(scripted_server):
    server = scripted_server(echo, batch_api=ScriptedBatches(fail_batches=1))
    judge = judge_for(server, max_calls=16, prices=Prices(input=1.0, output=2.0)).batched(poll_s=0.01)
    assert [r.error.kind for r in judge.ask_many(questions(16))] == ["batch_failed"] * 16
    assert judge.usage.calls == judge.budget.calls == 0 and judge.budget.cost_usd == 0
    assert all(r.ok for r in judge.ask_many(questions(16)))  # the whole budget is still there


def test_a_batch_cancelled_meanwhile_is_a_batch_failed_error_for_its_requests(scripted_server):
    import threading

    import openai

    server = scripted_server(echo, batch_api=ScriptedBatches(polls_before_done=10**6))

    def cancel_when_created() -> None:
        while not server.batch_api.batches:
            threading.Event().wait(0.01)
        openai.OpenAI(base_url=server.base_url, api_key="any").batches.cancel(next(iter(server.batch_api.batches)))

    canceller = threading.Thread(target=cancel_when_created)
    canceller.start()
    replies = batch_judge(server).ask_many(questions(2))
    canceller.join()
    assert [r.error.kind for r in replies] == ["batch_failed"] * 2 and "cancelled" in replies[0].error.message
    assert server.batch_api.cancels == 1 and server.request_count == 0


def test_a_model_the_endpoint_does_not_list_stops_a_batched_run_before_any_upload(scripted_server):
    from mlflow_genai_metrics import JudgeConfigError

    server = scripted_server(echo)
    judge = Judge("no-such-model", server.base_url, "key", cache_dir=None).batched(poll_s=0.01)
    with pytest.raises(JudgeConfigError, match="scripted-judge"):
        judge.ask_many(questions(2))
    assert server.batch_api.uploads == 0


# -- resume and rerun ---------------------------------------------------------------------------------------------------


def interrupt_while_polling(scripted_server, cache_dir, requests: int):
    """A run interrupted (its task cancelled) while its batch is in progress; the server that holds the batch."""
    server = scripted_server(echo, batch_api=ScriptedBatches(polls_before_done=10**6))

    async def interrupted() -> None:
        task = asyncio.ensure_future(batch_judge(server, cache_dir).aask_many(questions(requests)))
        while server.batch_api.retrieves < 2:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert server.batch_api.created == 1 and server.request_count == 0
    return server


def test_a_run_started_again_polls_the_batch_the_interrupted_run_submitted(scripted_server, tmp_path):
    server = interrupt_while_polling(scripted_server, tmp_path, 5)
    server.batch_api.polls_before_done = 0
    replies = batch_judge(server, tmp_path).ask_many(questions(5))  # a new Judge, as a new process would make
    assert all(r.ok for r in replies)
    assert server.batch_api.created == 1 and server.request_count == 5


def test_a_recorded_batch_the_endpoint_no_longer_knows_is_submitted_anew(scripted_server, tmp_path):
    interrupt_while_polling(scripted_server, tmp_path, 2)
    restarted = scripted_server(echo)  # another server on loopback: the same endpoint to the cache, none of its batches
    replies = batch_judge(restarted, tmp_path).ask_many(questions(2))
    assert all(r.ok for r in replies) and restarted.batch_api.created == 1 and restarted.request_count == 2


def test_a_rerun_after_the_batch_ended_makes_no_request(scripted_server, tmp_path):
    server = scripted_server(echo)
    batch_judge(server, tmp_path).ask_many(questions(5))
    before = server.batch_api.requests_made, server.request_count
    replies = batch_judge(server, tmp_path).ask_many(questions(5))
    assert all(r.ok and r.cached for r in replies)
    assert (server.batch_api.requests_made, server.request_count) == before and server.model_listings == 1


def test_batch_answers_go_into_the_cache_the_online_path_reads(scripted_server, tmp_path):
    server = scripted_server(echo)
    batch_judge(server, tmp_path).ask_many(questions(3))
    replies = judge_for(server, cache_dir=tmp_path).ask_many(questions(3))
    assert all(r.cached for r in replies) and server.request_count == 3


# -- successive batches and equality with the online path ---------------------------------------------------------------


def test_verification_after_claim_extraction_is_the_next_batch(scripted_server):
    sources, summaries = bbc_like()
    summaries[5] = summaries[4]  # no no_claims re-ask: two rounds, two batches
    server = scripted_server(summarization_script())
    judge_summaries(sources, summaries, judge=batch_judge(server), coverage=False, grounding=False, resamples=10)
    purposes = [{r.purpose for r in server.requests if r.batch_id == b} for b in sorted({r.batch_id for r in server.requests})]
    assert purposes == [{"ExtractedClaims"}, {"ClaimVerdicts"}]


def test_a_no_claims_re_ask_goes_in_a_later_batch_than_its_first_ask(scripted_server):
    sources, summaries = bbc_like()
    server = scripted_server(summarization_script())
    result = judge_summaries(sources, summaries, judge=batch_judge(server), grounding=False, resamples=10)
    asks = [r.batch_id for r in server.requests if r.purpose == "ExtractedClaims" and "Nothing of note." in r.body["messages"][0]["content"]]
    assert len(asks) == 2 and asks[0] != asks[1]  # the re-ask needed the first answer: another batch
    assert result.rows.set_index("id").loc[5, "error"].startswith("claim extraction failed: no_claims")


def test_a_repair_turn_is_the_next_batch(scripted_server):
    server = scripted_server(lambda r: Reply(verdict_json()) if r.is_repair else Reply("not json"))
    reply = batch_judge(server).ask(ask_about("row 0"))
    assert reply.ok and server.batch_api.created == 2


def test_calls_that_come_after_a_pause_make_a_batch_of_their_own_and_get_their_own_answers(scripted_server):
    server = scripted_server(echo)
    judge = batch_judge(server, quiet_s=0.01)

    async def two_waves():
        async def later(i):
            await asyncio.sleep(0.3)
            return await judge.aask(ask_about(f"row {i}"))
        return await asyncio.gather(*(judge.aask(ask_about(f"row {i}")) for i in range(3)), *(later(i) for i in range(3, 6)))

    replies = asyncio.run(two_waves())
    assert [r.answer.reason for r in replies] == [f"row {i}" for i in range(6)] and server.batch_api.created == 2


def test_max_lines_bounds_the_requests_of_one_batch(scripted_server):
    server = scripted_server(echo)
    judge = batch_judge(server, max_lines=3)

    async def together():
        return await asyncio.gather(*(judge.aask(question) for question in questions(7)))

    assert all(r.ok for r in asyncio.run(together()))
    assert sorted(len([r for r in server.requests if r.batch_id == b]) for b in {r.batch_id for r in server.requests}) == [1, 3, 3]


def test_judge_summaries_in_batch_mode_gives_the_online_results(scripted_server):
    sources, summaries = bbc_like()
    with stacks_if_stalled():
        online = judge_summaries(sources, summaries, judge=judge_for(scripted_server(summarization_script())), resamples=50)
        server = scripted_server(summarization_script())
        batched = judge_summaries(sources, summaries, judge=judge_for(server), batch=BatchOptions(poll_s=0.01), resamples=50)
    assert server.batch_api.created >= 2 and all(r.batch_id for r in server.requests)
    usage_columns = [c for c in online.rows.columns if c.startswith("judge_")]
    pd.testing.assert_frame_equal(batched.rows.drop(columns=usage_columns), online.rows.drop(columns=usage_columns))
    assert same_metrics({k: v for k, v in batched.metrics.items() if not k.startswith("judge/")},
                        {k: v for k, v in online.metrics.items() if not k.startswith("judge/")})
    pd.testing.assert_frame_equal(batched.claims, online.claims)
    pd.testing.assert_frame_equal(batched.key_points, online.key_points)


def test_a_run_judged_in_batch_mode_says_how_many_calls_went_through_a_batch(scripted_server):
    sources, summaries = bbc_like()
    online = judge_summaries(sources, summaries, judge=judge_for(scripted_server(summarization_script())), resamples=50)
    batched = judge_summaries(sources, summaries, judge=judge_for(scripted_server(summarization_script())),
                              batch=BatchOptions(poll_s=0.01), resamples=50)
    assert "judge/batched_calls" not in online.metrics
    assert batched.metrics["judge/batched_calls"] == batched.metrics["judge/calls"] > 0


def test_a_judge_that_has_already_asked_can_still_be_batched(scripted_server, tmp_path):
    """Settings cache some derived values once asked (the cache key's endpoint); a batched copy is made from the
    fields alone."""
    server = scripted_server(echo)
    judge = judge_for(server, cache_dir=tmp_path)
    assert judge.ask(questions(1)[0]).ok
    batched = judge.batched(poll_s=0.01)
    assert batched.batch is not None
    # The copy really asks through a batch: new questions (not in the cache) are answered from one batch job, not
    # online and not from the cache; the question the online judge asked is still answered from the shared cache.
    replies = batched.ask_many(questions(3))
    assert [(r.ok, r.cached) for r in replies] == [(True, True), (True, False), (True, False)]
    assert [r.answer.reason for r in replies] == ["row 0", "row 1", "row 2"]
    assert (server.batch_api.uploads, server.batch_api.created) == (1, 1)
    assert [r.batch_id is None for r in server.requests] == [True, False, False]
    assert len({r.batch_id for r in server.requests[1:]}) == 1
    assert batched.usage.calls == batched.usage.batched_calls == 2 and batched.usage.cache_hits == 1


def test_batch_mode_never_probes_and_asks_in_the_mode_its_options_name(scripted_server):
    server = scripted_server(echo, reject_response_formats=("json_schema",))
    replies = batch_judge(server, response_mode="json_object").ask_many(questions(3))
    assert all(r.ok and r.mode == "json_object" for r in replies)
    assert {r.response_format for r in server.requests} == {"json_object"} and server.batch_api.created == 1


def test_an_endpoint_that_refuses_json_schema_fails_in_batch_mode_without_a_probing_round(scripted_server):
    server = scripted_server(echo, reject_response_formats=("json_schema",))
    replies = batch_judge(server).ask_many(questions(2))
    assert [r.error.kind for r in replies] == ["server_error"] * 2 and server.batch_api.created == 1


# -- prices and budget ----------------------------------------------------------------------------------------------------


def test_calls_answered_through_a_batch_cost_the_batch_price(scripted_server):
    server = scripted_server(echo)
    online = judge_for(server, prices=Prices(input=1.0, output=2.0))
    online.ask_many(questions(4))
    batched = judge_for(server, prices=Prices(input=1.0, output=2.0)).batched(poll_s=0.01)
    batched.ask_many([ask_about(f"row {i}", version="test:v2") for i in range(4)])  # not in the cache: asked again
    assert batched.usage.prompt_tokens == online.usage.prompt_tokens
    assert batched.usage.cost_usd == pytest.approx(online.usage.cost_usd / 2)


def test_cached_prompt_tokens_a_batch_reports_are_counted_as_online(scripted_server):
    server = scripted_server(echo, prefix_cache_block=4)
    judge = batch_judge(server)
    judge.ask_many([ask_about("The same long article opens every question here, then row " + str(i)) for i in range(3)])
    assert judge.usage.cached_prompt_tokens == sum(r.cached_tokens for r in server.requests) > 0


def test_the_budget_holds_in_batch_mode(scripted_server):
    server = scripted_server(echo)
    judge = judge_for(server, max_calls=4).batched(poll_s=0.01)
    replies = judge.ask_many(questions(7))
    assert sum(r.ok for r in replies) == 4 and [r.error.kind for r in replies if not r.ok] == ["budget"] * 3
    assert server.request_count == 4 == judge.budget.calls


# -- batch files and a command, as vLLM's run_batch ------------------------------------------------------------------------


def test_a_batch_command_in_the_vllm_style_answers_through_the_files(scripted_server, tmp_path):
    server = scripted_server(echo)
    command = f"{sys.executable} {FAKE_VLLM} -i {{input}} -o {{output}} --url {server.base_url}"
    replies = judge_for(server).batched(files_dir=tmp_path, command=command).ask_many(questions(4))
    assert [r.answer.reason for r in replies] == [f"row {i}" for i in range(4)]
    assert server.batch_api.requests_made == 0 and len(list(tmp_path.glob("*.input.jsonl"))) == 1


def test_without_a_command_the_run_stops_saying_what_to_run_and_a_rerun_reads_the_output(scripted_server, tmp_path):
    import subprocess

    server = scripted_server(echo)
    with pytest.raises(BatchFilesWritten, match="run_batch") as stopped:
        judge_for(server).batched(files_dir=tmp_path).ask_many(questions(3))
    [source] = tmp_path.glob("*.input.jsonl")
    assert str(source) in str(stopped.value)
    output = source.with_name(source.name.replace(".input.", ".output."))
    subprocess.run([sys.executable, str(FAKE_VLLM), "-i", str(source), "-o", str(output), "--url", server.base_url], check=True)
    replies = judge_for(server).batched(files_dir=tmp_path).ask_many(questions(3))
    assert all(r.ok for r in replies) and server.request_count == 3


def test_judge_option_batch_true_makes_a_batched_judge(scripted_server):
    server = scripted_server(echo)
    judge = Judge(server.models[0], server.base_url, "key", cache_dir=None, batch=BatchOptions(poll_s=0.01))
    assert judge.ask(ask_about("row 0")).ok and server.batch_api.created == 1
