"""Verdict stability with the real SmolLM2 on llama.cpp (issue 29): ``stability=3`` at a sampling temperature runs
end to end, every verification asked three times with its own seed, and reports the flip rate it measured (high for
a 135M model: its verdicts are close to chance); an identical rerun makes no call."""

from __future__ import annotations

import pytest

from mlflow_genai_metrics import Judge, judge_summaries
from mlflow_genai_metrics.local import LocalModelServer

pytestmark = pytest.mark.local_model

# One row keeps the test short: three verifications of a 135M model on a CPU take seconds each.
SOURCES = ["Everton beat Liverpool 1-0 on Saturday. The win lifts Everton to third in the Premiership. David Weir scored the goal."]
SUMMARIES = ["Everton beat Liverpool and are second in the Premiership. David Weir scored."]


@pytest.mark.timeout(600)
def test_smollm2_with_stability_3_reports_its_flip_rate_and_a_rerun_makes_no_call(tmp_path):
    with LocalModelServer("smollm2-135m", n_ctx=4096) as llama:
        def judge(seed: int) -> Judge:
            return Judge(llama.model_id, llama.base_url, "local", cache_dir=tmp_path, context_window=4096, temperature=0.8,
                         seed=seed, max_concurrency=2)

        # At temperature 0 this model lists no claim at all (every row a no_claims error); sampled, it lists some for
        # some seeds (9 on the machine of 2026-12-05, 6 on the one it was written on): the first seed that gives a judged row is used.
        for seed in (9, 6, *range(20, 40)):
            first = judge_summaries(SOURCES, SUMMARIES, judge=judge(seed), stability=3, coverage=False, grounding=False, progress=False)
            judged = first.rows[first.rows["error"] == ""]
            assert (first.rows.loc[first.rows["error"] != "", "claim_count"].isna()).all()  # failed: an error, never a score
            if len(judged):
                break
        else:
            pytest.fail(f"SmolLM2 listed no claim for this summary with 22 seeds: {list(first.rows['error'])}")
        claims = int(judged["claim_count"].sum())
        assert claims > 0 and (judged["unstable_claims"] >= 0).all()
        flip_rate = first.metrics["judge/flip_rate"]
        assert flip_rate == judged["unstable_claims"].sum() / claims and 0.0 <= flip_rate <= 1.0
        # each row's claims asked once (or twice), each judged row's verification three times (seed, seed + 1, seed + 2)
        assert first.usage.calls >= len(SOURCES) + 3 * len(judged)
        print(f"SmolLM2 at temperature 0.8, stability 3, seed {seed}: flip rate {flip_rate:.2f} over {claims} claims")

        again = judge_summaries(SOURCES, SUMMARIES, judge=judge(seed), stability=3, coverage=False, grounding=False, progress=False)
        assert again.usage.calls == 0 and again.metrics["judge/flip_rate"] == flip_rate
