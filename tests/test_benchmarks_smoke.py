"""Every benchmark script runs at a tiny size in CI, so none can rot (the real runs are by hand: docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_DATA
from markdown_tables import markdown_table

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
PEERS_PYTHON = BENCHMARKS.parent / ".venv-peers" / "bin" / "python"
needs_peers = pytest.mark.skipif(not PEERS_PYTHON.exists(), reason=f"the peers' virtual env is not at {PEERS_PYTHON} (benchmarks/setup_peers.sh makes it)")


@pytest.fixture
def run(warm_python):
    """``run(script, *args)``: the benchmark script as ``python SCRIPT ARGS`` (in the suite's warm interpreter);
    its standard output, once it exits 0."""

    def run_script(script: str, *args: str) -> str:
        done = subprocess.run([warm_python.python, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=600,
                              env={**os.environ, **warm_python.env})
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    return run_script


def test_bench_traditional_smoke(run):
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_traditional.py", "--rows", "30", "--ter-rows", "2")
    methods = {row["method"]: row for row in markdown_table(out, "method")}
    assert "traditional_metrics, n_jobs=1" in methods
    assert methods["rouge-score + sacreBLEU, row by row, 1 process"]["time vs row by row"] == "1.00x"  # the baseline


def test_bench_faults_smoke(run):
    out = run("bench_faults.py", "--rows", "60")
    assert "rows lost: 0" in out and "match: True" in out


def test_bench_throughput_smoke(run):
    out = run("bench_throughput.py", "--rows", "12", "--case", "0.01:4", "--peers", "--grounding", "both", "--claims", "reworded")
    assert "claims: each summary sentence reworded" in out.splitlines()[0]
    table = markdown_table(out, "endpoint")
    ours = {row["judged"]: row for row in table if row["client"] == "ours"}
    without = {row["judged"]: row for row in table if row["client"] == "ours, grounding=False"}
    assert set(without) == set(ours) and all(row["calls per row"] == ours[k]["calls per row"] for k, row in without.items())
    assert ours["alignment + richness"]["calls per row"] == "2.00" and ours["alignment + richness + coverage"]["calls per row"] == "4.00"
    assert [row["rerun calls"] for row in ours.values()] == ["0", "0"]
    # The bare openai client replays the very requests ours sent: as many per row.
    bare = {row["judged"]: row for row in table if row["client"].startswith("bare openai client")}
    assert {k: row["calls per row"] for k, row in bare.items()} == {k: row["calls per row"] for k, row in ours.items()}
    assert all(row["vs bare client"].endswith("x") for row in ours.values())
    assert "Peers on the same" not in out


def test_bench_one_call_smoke(run):
    """Ours and MLflow's make_judge claim judge on the same rows: the call counts, the rerun from the cache, the
    rows a broken reply costs the one-call judge and the long sources only ours can split (issue 29)."""
    out = run("bench_one_call.py", "--rows", "8", "--latency", "0.01")
    rows = {(row["case"], row["judge"]): row for row in markdown_table(out, "case")}
    first, long = "first run, rerun", "sources past a window of 500 words"
    assert rows[(first, "ours")]["calls per row"] == "2.00" and rows[(first, "ours")]["rerun calls per row"] == "0.0"
    assert rows[(first, "one call")]["calls per row"] == "1.00" and rows[(first, "one call")]["rerun calls per row"] == "1.0"
    broken = "not JSON on 1 row in 4"
    assert rows[(broken, "ours")]["rows with an error"] == "0" and rows[(broken, "one call")]["rows with an error"] == "2"
    assert rows[(long, "ours")]["rows judged"] == "8" and rows[(long, "one call")]["rows with an error"] == "8"


def test_bench_align_smoke(run):
    """FRANK valid and SummEdits evaluation logged as people's feedback, examples built and held-back agreement
    measured, then the test splits judged without and with them (the scripted judge: issue 29)."""
    if not (SHARED_DATA / "faithfulness" / "frank.jsonl").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    out = run("bench_align.py", "--scripted", "--feedback", "12", "--test", "6")
    rows = {row["set"]: row for row in markdown_table(out, "set")}
    assert set(rows) == {"frank", "summedits"}, out
    assert rows["frank"]["feedback (examples, held back)"].startswith("valid: 12 (")
    assert rows["summedits"]["test pairs"] == "test: 6" and " -> " in rows["summedits"]["test balanced accuracy, without -> with"]


def test_bench_rerun_smoke(run):
    out = run("bench_rerun.py", "--rows", "12", "--case", "0.01:4", "--repeat", "1", "--reruns", "2")
    [row] = markdown_table(out, "endpoint")
    assert row["endpoint"] == "10 ms, 4 slots" and row["rerun calls"] == "0"
    assert all(share.endswith("%") for share in row["rerun / first (best, median, worst)"].split(", "))


@needs_peers
def test_bench_throughput_peers_smoke(run):
    """Each peer runs concurrently (more than one request in flight at the endpoint), its calls counted from the
    endpoint's log and its rows/s given as a ratio to ours."""
    out = run("bench_throughput.py", "--rows", "6", "--case", "0.05:4", "--peers", "deepeval", "mlflow-summarization", "ragas-faithfulness")
    peers = {row["system"]: row for row in markdown_table(out, "system")}
    assert set(peers) == {"deepeval", "mlflow-summarization", "ragas-faithfulness"}, out
    assert peers["deepeval"]["calls per row"] == "7.00" and peers["mlflow-summarization"]["calls per row"] == "1.00", out
    for row in peers.values():
        assert row["rows/s vs ours (alignment + richness)"].endswith("x") and row["rows/s vs ours (+ coverage)"].endswith("x")
        assert int(row["most requests in flight"]) >= 2 and row["rows failed"] == "0", out  # concurrent, no row failed


def test_bench_agreement_smoke(run):
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    server = subprocess.Popen([sys.executable, str(BENCHMARKS.parent / "scripts" / "serve_judge.py")], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        out = run("bench_agreement.py", "--sample", "4", "--sets", "qags_xsum", "--judge-model", "scripted-judge", "--judge-base-url", base_url)
    finally:
        server.terminate()
        server.wait(timeout=10)
    rows = markdown_table(out, "set")  # ours alone: the peers run only when asked (--peers)
    assert [(row["set"], row["system (judge)"], row["pairs"]) for row in rows] == [("qags_xsum", "ours: `aligned`, `support_rate` (scripted-judge)", "4")]
    assert "G-Eval (GPT-4) 0.537" in rows[0]["published (judge)"]


@needs_peers
def test_bench_agreement_peers_smoke(run):
    """DeepEval's and MLflow's judges on the same sample as ours, against the same (here scripted) endpoint."""
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    server = subprocess.Popen([sys.executable, str(BENCHMARKS / "peer_answers.py")], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        out = run("bench_agreement.py", "--sample", "4", "--sets", "qags_xsum", "--judge-model", "scripted-judge", "--judge-base-url", base_url, "--peers")
    finally:
        server.terminate()
        server.wait(timeout=10)
    systems = {row["system (judge)"]: row for row in markdown_table(out, "set") if row["set"] == "qags_xsum"}
    for system in ("ours: `aligned`, `support_rate`", "DeepEval SummarizationMetric", "MLflow Summarization"):
        row = systems[f"{system} (scripted-judge)"]
        assert row["pairs"] == "4" and row["judge errors"] == "0.000", row  # the scripted answers fit every system
    # The scripted judge passes every summary: DeepEval's score is 1 everywhere, so nothing to correlate.
    deepeval = systems["DeepEval SummarizationMetric (scripted-judge)"]
    assert deepeval["judge pass rate"] == "1.000" and deepeval["Spearman"] == "n/a"


def test_bench_agreement_rag_smoke(run):
    """The answer judge on two sets recast as retrieval, their evaluation splits, against the peer-aware scripted endpoint."""
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    server = subprocess.Popen([sys.executable, str(BENCHMARKS / "peer_answers.py")], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        out = run("bench_agreement.py", "--sample", "4", "--sets", "qags_xsum", "frank", "--judge-model", "scripted-judge",
                  "--judge-base-url", base_url, "--rag", "--check-sample", "40")
    finally:
        server.terminate()
        server.wait(timeout=10)
    rows = {row["set"]: row for row in markdown_table(out, "set")}
    assert rows["frank"]["pairs"] == "4 (test)" and rows["qags_xsum"]["pairs"] == "4 (all)"
    assert rows["frank"]["judge errors"] == "0.000" and rows["frank"]["cited-passage accuracy (supported claims)"].startswith("1.000 (")
    assert rows["frank"]["model-free check: rows"] == "40" and 0 <= float(rows["frank"]["AUC (answer against its passages)"]) <= 1


def test_peer_failures_are_counted_and_left_out_of_agreement():
    sys.path.insert(0, str(BENCHMARKS))
    import pandas as pd
    from bench_agreement import scores_agreement

    rows = pd.DataFrame({"human_binary": [1, 0, 1, 0, 1], "human_graded": [1.0, 0.2, 0.9, 0.0, 0.8]})
    scores = [{"score": 0.9, "passed": True, "error": None}, {"score": 0.1, "passed": False, "error": None},
              {"score": 0.8, "passed": True, "error": None}, {"score": 0.6, "passed": True, "error": None},
              {"score": None, "passed": None, "error": "ValueError: Evaluation LLM outputted an invalid JSON"}]
    m = scores_agreement(rows, scores)
    assert m["judge_error_rate"] == pytest.approx(0.2)
    assert m["rows_compared"] == 4 and m["rows_correlated"] == 4  # the failed row is not a 0
    assert m["judge_pass_rate"] == pytest.approx(0.75)
    assert m["balanced_accuracy"] == pytest.approx(0.75)  # both positives right, one of two negatives


@needs_peers
def test_run_peer_writes_each_rows_score_and_error(tmp_path, scripted_server):
    """``run_peer.py --scores-out``: one record per row in input order; a row whose judge answer is unusable is an
    error with no score, the others keep theirs."""
    sys.path.insert(0, str(BENCHMARKS))
    from peer_answers import PeerAwareScript
    from peer_runs import run_peer, write_rows

    from mlflow_genai_metrics.testing import Reply

    peer_aware = PeerAwareScript()
    server = scripted_server(lambda request: Reply("no JSON here") if "UNPARSEABLE" in request.prompt_text else peer_aware(request))
    sources = ["The council met on Monday. It approved the budget.", "The UNPARSEABLE council met.", "The team won the cup final."]
    rows = write_rows(tmp_path / "rows.jsonl", sources, ["The council approved the budget.", "The council met.", "The team won."], ["a", "b", "c"])
    for system in ("deepeval", "mlflow-summarization"):
        out = tmp_path / f"{system}.jsonl"
        status = run_peer(system, rows, server.base_url, "scripted-judge", "--concurrency", "2", "--scores-out", str(out), timeout_s=300)
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in records] == ["a", "b", "c"] and status["errors"] == 1, status
        assert records[1]["error"] and records[1]["passed"] is None and records[1]["score"] is None
        assert all(r["error"] is None and r["passed"] is True for r in (records[0], records[2])), records
    assert records[0]["score"] is None  # MLflow's judge gives a verdict, no score


def test_bench_cost_smoke(run):
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_cost.py", "--articles", "3", "--peers")  # the peers' own run is by hand (their venv)
    systems = {row["system"]: row for row in markdown_table(out, "system")}
    assert systems["ours: alignment + richness"]["judge calls per row"] == "2.00" and systems["ours: + coverage"]["judge calls per row"] == "4.00"
    by_models = {row["models per article"]: float(row["judge calls per row"]) for row in markdown_table(out, "models per article")}
    assert list(by_models) == ["1", "2", "5"] and by_models["1"] > by_models["2"] > by_models["5"]  # key points once per article
    modes = {row["mode"]: row for row in markdown_table(out, "mode")}
    assert modes["batch"]["vs online"] == "0.50x" and float(modes["online"]["USD per 1000 rows"]) > 0  # the batch price


@needs_peers
def test_bench_rag_cost_smoke(run):
    if not (SHARED_DATA / "faithfulness" / "qags_xsum.jsonl").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    out = run("bench_rag_cost.py", "--rows", "2")
    systems = {row["system"]: row for row in markdown_table(out, "system")}
    ours = systems["ours: judge_answers (claims, passage + checked quote, relevance)"]
    assert ours["calls / row"] == "3.00" and ours["rows failed"] == "0"
    assert systems["ours, faithfulness alone (claims, then verification with passage + quote)"]["calls / row"] == "2.00"
    for peer in ("Ragas 0.4 Faithfulness (score in [0, 1])", "MLflow 3.17 RetrievalGroundedness (yes/no)"):
        assert systems[peer]["rows failed"] == "0" and float(systems[peer]["calls / row"]) >= 1, out  # each peer judged every row


def test_peer_answers_fit_each_peers_format():
    sys.path.insert(0, str(BENCHMARKS))
    from peer_answers import PeerAwareScript

    script = PeerAwareScript()
    questions = "... with the 'answers' key ...\nQuestions:\n" + json.dumps(["a?", "b?"]) + "\n\nJSON:"
    assert script.answer(questions) == {"answers": ["yes", "yes"]}
    claims = "The length of 'verdicts' ...\nSummary Claims:\n" + json.dumps(["x", "y", "z"]) + "\n\nJSON:"
    assert len(script.answer(claims)["verdicts"]) == 3


def test_bench_grounding_smoke(run):
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_grounding.py", "--rows", "20")
    methods = {row["method"]: row for row in markdown_table(out, "method")}
    assert {"grounding_metrics, no cache", "grounding_metrics, rerun (reads the cache)", "rouge-score rouge1/2/L (stemmed), row by row"} <= set(methods)
    assert float(methods["grounding_metrics, no cache"]["rows/s (CPU, one core)"]) > 0
    assert "rerun recomputed 0 rows" in out
    # the worker's line is a real process's CPU: its start-up alone (numpy, the model, the vectors) is over 0.1 s
    assert float(methods["the same in a fresh grounding.worker process, a line per row (start-up included)"]["CPU s"]) > 0.1


def test_bench_agreement_grounding_smoke(run):
    """The grounding check's agreement table needs no judge: every set, on a few rows it was not trained on."""
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    out = run("bench_agreement.py", "--grounding", "--sample", "12")
    rows = {row["set"]: row for row in markdown_table(out, "set")}
    assert set(rows) == {"frank", "qags_cnndm", "qags_xsum", "summedits"}
    assert rows["frank"]["rows"] == "12 (test)" and rows["qags_xsum"]["rows"] == "12 (all)"
    assert rows["summedits"]["grounding Spearman"] == "n/a"  # a binary label has no grade
    assert "grounding model `grounding:v2-" in out


def test_probe_contextual_smoke(run):
    """The contextual-embedding probe's plumbing (sentences, features, the fits on the training splits only, the
    table), with hashed bags of words standing in for the model (its torch environment is made by hand)."""
    if not (SHARED_DATA / "faithfulness").exists():
        pytest.skip(f"the labelled sets are not at {SHARED_DATA / 'faithfulness'} (../shared/data beside the project)")
    out = run("probe_contextual.py", "--embedder", "hashing", "--per-set", "8")
    rows = {row["fitted on FRANK valid + SummEdits evaluation"]: row for row in markdown_table(out, "fitted on FRANK valid + SummEdits evaluation")}
    assert set(rows) == {"shipped grounding alone", "embedding features alone", "both", "mean best cosine, untrained"}
    assert all(0 <= float(rows["both"][f"{name} AUC"]) <= 1 for name in ("FRANK test", "QAGS-CNNDM", "QAGS-XSum", "SummEdits test"))
    assert "hashed bags of words (no model)" in out and out.startswith("48 pairs")


def test_bench_robustness_smoke(tmp_path, run):
    """The paraphrase-or-error benchmark on a few articles: every error and rewrite kind made, each ranked."""
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_robustness.py", "--articles", "12", "--json", str(tmp_path / "figures.json"))
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["articles"] == 12 and figures["side"] == "eval" and figures["model"].startswith("grounding:v2-")
    assert set(figures["ranking"]) == {"number", "name", "negation", "inserted"}
    assert all(cell["articles"] > 0 for kind in figures["ranking"].values() for cell in kind.values())
    assert {row["error"] for row in markdown_table(out, "error")} == set(figures["ranking"])
    assert set(figures["raised"]) == set(figures["ranking"]) and all(0 <= k["raised"] <= k["errors"] for k in figures["raised"].values())


def test_the_robustness_sides_share_no_article_and_no_synonym():
    """What training may read (train side) and what the benchmark reports on (eval side) never overlap."""
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    sys.path.insert(0, str(BENCHMARKS))
    from perturbations import _articles, perturbed_articles, synonyms

    sides = {side: [a for a in _articles() if a["side"] == side] for side in ("train", "eval")}
    train, held = ({a["id"] for a in sides[s]} for s in ("train", "eval"))
    assert train.isdisjoint(held) and {a["text"] for a in sides["train"]}.isdisjoint(a["text"] for a in sides["eval"])
    assert len(held) >= 300 and set(synonyms("train")).isdisjoint(synonyms("eval"))
    for side, ids in (("train", train), ("eval", held)):  # what each side's cases come from is that side's
        assert {case.id for case in perturbed_articles(side, articles=25)} <= ids


def test_bench_people_smoke(warm_python):
    """People's rate by PPI++ on the labelled sets and a known judge, at a tiny size (issue 48). Exit code 1 names the
    targets missed (the re-calibrated `grounded` rate's 5-point target is, on these sets); never a coverage cell."""
    done = subprocess.run([warm_python.python, str(BENCHMARKS / "bench_people.py"), "--quick"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **warm_python.env})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    out = done.stdout
    assert (done.returncode == 0) == ("targets missed: 0" in out)
    assert not [line for line in out.splitlines() if line.startswith("- coverage")]
    known = markdown_table(out, "people's rate")
    assert {row["labels"] for row in known} == {"25", "100"} and all(float(row["coverage"].split()[0]) >= 0.9 for row in known)
    assert markdown_table(out, "rows") and "people.MIN_LABELS" in out
    if (SHARED_DATA / "faithfulness").exists():
        sets = markdown_table(out, "set")
        assert {row["set"] for row in sets} == {"frank", "qags_cnndm", "qags_xsum", "summedits"}
        assert all(float(row["width / CP"]) < 1.05 for row in sets)
        # one run through MLflow: people's labels on a drawn sample, the estimate, and a gate rule on it
        [run] = markdown_table(out, "end-to-end run")
        assert run["rows"] == "40" and run["labels (on rows not drawn)"] == "20 (2)"
        assert "gate with 1 label:\ngate failed: nothing registered\n  FAIL people/strict_alignment_ci_low >= 0.1: actual missing (too few labels: 1" in out
        assert "gate passed: registered version 1\n  PASS people/strict_alignment_ci_low" in out
        assert "grounding re-calibrated on people's labels: mean " in out and "tag mgm.grounding.recalibrated_on: re-calibrated on 20" in out
    assert [row["lowest coverage"] for row in markdown_table(out, "difference: rows per run")]


@pytest.mark.local_model
@pytest.mark.timeout(900)  # a real model on two shared cores, two runs of one row
def test_bench_local_endpoint_smoke(run):
    """The grounding check's process beside a real llama.cpp server: both paths ask the same requests of it (the
    check asks none), and the check ran in a process of its own (its CPU measured) on the default path alone."""
    if not (SHARED_DATA / "bbc_news_summary.jsonl").exists():
        pytest.skip(f"the BBC data is not at {SHARED_DATA} (../shared/data beside the project)")
    out = run("bench_local_endpoint.py", "--rows", "1", "--worker", "--words", "40")
    assert "the check in its own process" in out, out
    rows = {row["path"]: row for row in markdown_table(out, "path")}
    assert set(rows) == {"default (grounding on)", "grounding=False"}, out
    assert rows["default (grounding on)"]["calls"] == rows["grounding=False"]["calls"] != "0", out
    assert rows["grounding=False"]["vs grounding=False"] == "1.000x" and float(rows["default (grounding on)"]["server CPU ms per row"]) > 0
    # the check's own process ran (its CPU measured) on the default path, and no process on grounding=False's
    assert float(rows["default (grounding on)"]["of it, the check's process"]) > 0 and rows["grounding=False"]["of it, the check's process"] == "0.0"


def test_bench_mlflow_workers_smoke(run):
    """MLflow alone at 4 workers (its default takes half a minute a run here): every trace stored with its spans."""
    out = run("bench_mlflow_workers.py", "--runs", "1", "--rows", "4", "--workers", "4")
    rows = markdown_table(out, "MLflow workers")
    assert [(r["MLflow workers"], r["run"], r["traces stored with their spans"]) for r in rows] == [("4", "1", "4 of 4")]
    assert float(rows[0]["seconds"]) > 0


def test_serve_judge_rewords_its_claims_when_asked(tmp_path):
    """``bench_throughput.py --claims reworded``'s endpoint: every claim differs from the summary's sentences (so the
    grounding check's memo serves none), with the same verdicts and calls as the plain endpoint."""
    from mlflow_genai_metrics import Judge, judge_summaries

    source = "The council approved the budget on Monday. The mayor welcomed it. Critics objected."
    summary = "The council approved the budget. The mayor welcomed it!"
    found = {}
    for flags in ([], ["--claims-reworded"]):
        server = subprocess.Popen([sys.executable, str(BENCHMARKS.parent / "scripts" / "serve_judge.py"), *flags],
                                  stdout=subprocess.PIPE, text=True)
        try:
            judge = Judge("scripted-judge", server.stdout.readline().strip(), "bench", cache_dir=tmp_path / str(len(flags)))
            result = judge_summaries([source], [summary], judge=judge, grounding=False)
        finally:
            server.terminate()
            server.wait(timeout=10)
        found[bool(flags)] = (list(result.claims["claim"]), list(result.claims["verdict"]), result.metrics["judge/calls"])
    assert found[False][0] == ["The council approved the budget.", "The mayor welcomed it!"]
    assert found[True][0] == ["The council approved the budget", "The mayor welcomed it"]
    assert found[True][1:] == found[False][1:]
