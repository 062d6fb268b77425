"""People's rate from a few labels (prediction-powered inference) and grounding re-calibrated on them, measured.

    nice .venv/bin/python benchmarks/bench_people.py            # the full run: 4 sets x 25/50/100/200 labels x 1,000 draws, simulations
    .venv/bin/python benchmarks/bench_people.py --quick         # a smoke run in seconds: 100 draws, 25 and 100 labels, 3 scenarios

The judge is the model-free grounding check (no LLM: it runs offline), ``grounded`` (grounding >= 0.5) its 0/1
verdict, and people's binary label (``tables.load_labelled``: ``human_binary``) the truth, on the rows of each
labelled set in ``../shared/data/faithfulness`` the grounding model was not trained on (FRANK test, QAGS-CNNDM,
QAGS-XSum, SummEdits test; rows the check cannot read are left out and counted). Each set's scores are computed
once (the grounding cache keeps them). For 25, 50, 100 and 200 labels drawn at random 1,000 times per cell
(seeded): ``people.ppi_proportion``'s bias, its interval's coverage of the whole set's human rate and its mean
width against the labels-only Clopper-Pearson interval. Coverage is measured twice: labels drawn from the set
itself (people's rate over the run's own rows, which the interval covers a fortiori), and runs of the set's size
drawn from it with replacement, labels drawn from each run (the design the interval claims: rows like these). Then
``people.recalibrated_grounding`` on the same draws: the mean absolute error of the re-calibrated ``grounded``
rate (and of the mean re-calibrated grounding) to people's rate, and the calibration error before and after.

A simulation with a judge of known bias and agreement (Cohen's kappa 0.3, 0.6, 0.9, people's rate 0.1, 0.6, 0.9,
the judge's overstated) gives bias and coverage (of the rate, and of each run's own rate) beside the papers' normal
interval (``ppi-python``'s closed form, ``people.ppi_mean_interval``, given the run's rows as its "unlabelled"
sample); and a sweep over people's and the judge's rates 0.02 to 0.98, kappa -0.3 to 0.9, runs of 20, 100 and
1,000 rows and 2 to 25 labels gives the lowest coverage at each count of labels, from which ``people.MIN_LABELS`` is
read, and the largest share of draws whose ``ci_low`` lies above the truth (what a gate on ``_ci_low`` risks). A
second sweep compares two independent runs (close rates, any judges): the coverage of the difference of their
estimates (``people.estimate_difference``, MOVER) at each count of labels on each, for ``people.MIN_DIFFERENCE_LABELS``.

One run end to end through MLflow (``--no-mlflow`` leaves it out): a FRANK test sample (200 rows; --quick 40) judged
by the scripted judge (``mlflow_genai_metrics.testing``) with the grounding check, in a SQLite store in a temp
folder; ``label_sample`` draws 50 rows (--quick 20), the set's own human labels are logged on them as people's
feedback (``HUMAN`` source), with two labels on rows not drawn (never used), ``people_estimate`` logs
``people/strict_alignment`` and the re-calibrated grounding, and the gate registers the run's model or refuses it on
``people/strict_alignment_ci_low`` (first with one label: "too few labels").

Targets (issue 48): coverage >= 0.93 in every cell reported (a miss: an exact binomial test below 0.93 at 0.05
Bonferroni-adjusted over the cells, as in ``bench_calibration.py``); at 100 labels, narrower than the labels-only
interval wherever the check's AUC >= 0.75, and the re-calibrated ``grounded`` rate within 5 points of people's
(mean absolute error); ``MIN_LABELS`` at or above the count the sweep measured. The exit code is 1 when one is missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from mlflow_genai_metrics.people import (
    MIN_DIFFERENCE_LABELS,
    MIN_LABELS,
    difference_bounds,
    ppi_counts,
    ppi_mean_interval,
    recalibrated_grounding,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "faithfulness"
SETS = {"frank": "test", "qags_cnndm": None, "qags_xsum": None, "summedits": "test"}
LABELS, QUICK_LABELS = (25, 50, 100, 200), (25, 100)
SWEEP_LABELS, SWEEP_ROWS = (2, 3, 5, 10, 15, 20, 25), (20, 100, 1000)
COVERAGE, LEVEL, AUC_FOR_NARROWER, RECALIBRATION_ERROR = 0.93, 0.05, 0.75, 0.05
SCENARIOS = [(0.6, 0.8, 0.3), (0.6, 0.7, 0.6), (0.6, 0.63, 0.9), (0.1, 0.2, 0.3), (0.1, 0.15, 0.6), (0.1, 0.11, 0.9),
             (0.9, 0.95, 0.3), (0.9, 0.93, 0.6), (0.9, 0.91, 0.9)]  # (people's rate, the judge's, Cohen's kappa)


def set_rows(name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """People's 0/1 label and the grounding score of each scored row of a set's evaluation rows; unscored rows."""
    from mlflow_genai_metrics.meta_evaluation import evaluation_rows, load_labelled
    from mlflow_genai_metrics.summarization.grounding_only import grounding_metrics

    rows = evaluation_rows(load_labelled(DATA / f"{name}.jsonl"), name, SETS[name])
    scores = grounding_metrics(rows["source"], rows["summary"], ids=list(range(len(rows)))).rows["grounding"].to_numpy(dtype=float)
    scored = ~np.isnan(scores)
    return rows["human_binary"].to_numpy(dtype=int)[scored], scores[scored], int((~scored).sum())


def cells_of(people: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """The 2 x 2 counts [person, judge] of each draw (rows of ``people`` and ``judge``)."""
    codes = 2 * people + judge
    return np.stack([(codes == k).sum(-1) for k in range(4)], -1).reshape(*codes.shape[:-1], 2, 2)


def labels_only(cells: np.ndarray, rows) -> tuple[np.ndarray, np.ndarray]:
    """The labels' own exact interval (lambda = 0: Clopper-Pearson), through the judge-less call."""
    alone = np.zeros_like(cells)
    alone[..., 0] = cells.sum(-1)
    _, low, high, _ = ppi_counts(0, rows, alone)
    return low, high


class Misses:
    def __init__(self) -> None:
        self.coverage: list[tuple[str, int, int]] = []
        self.other: list[str] = []

    def check(self, where: str, covered: np.ndarray) -> str:
        """The coverage cell's text; remembered for the Bonferroni test at the end."""
        self.coverage.append((where, int(covered.sum()), covered.size))
        share = covered.mean()
        return f"{share:.3f}" + (" (!)" if share < COVERAGE else "")

    def missed(self) -> list[str]:
        level = LEVEL / max(len(self.coverage), 1)
        return [f"coverage {where}: {hit}/{total} = {hit / total:.3f}" for where, hit, total in self.coverage
                if scipy_stats.binomtest(hit, total, COVERAGE, alternative="less").pvalue < level] + self.other


def sets_lines(args, misses: Misses, rng: np.random.Generator) -> list[str]:
    from sklearn.metrics import roc_auc_score

    ppi = ["| set | rows (unscored) | people's rate | judge's rate (`grounded`) | grounding AUC | labels | bias | coverage | "
           "coverage, runs drawn from the set | ci_low above people's rate | mean width | labels-only CP width | width / CP |",
           "|" + "---|" * 13]
    recal = ["| set | labels | shipped `grounded` rate error | re-calibrated `grounded` rate MAE (shift+scale) | within 5 points "
             "| MAE (shift) | mean re-calibrated grounding MAE | PPI estimate MAE | ECE before | ECE after (shift+scale, out-of-fold) | ECE after (shift) "
             "| Brier before | Brier after (shift+scale) |", "|" + "---|" * 13]
    for name in args.sets:
        people, scores, unscored = set_rows(name)
        judge = (scores >= 0.5).astype(int)
        rows, truth, yes = len(people), people.mean(), int(judge.sum())
        auc = roc_auc_score(people, scores)
        population = cells_of(people, judge)
        for labelled in args.labels:
            picks = np.stack([rng.choice(rows, labelled, replace=False) for _ in range(args.draws)])
            cells = cells_of(people[picks], judge[picks])
            estimate, low, high, _ = ppi_counts(yes, rows, cells)
            cp_low, cp_high = labels_only(cells, rows)
            runs = rng.multinomial(rows, population.reshape(-1) / rows, size=args.draws)  # runs of rows like these
            drawn = np.stack([rng.multivariate_hypergeometric(run, labelled) for run in runs]).reshape(-1, 2, 2)
            _, run_low, run_high, _ = ppi_counts(runs.reshape(-1, 2, 2)[..., 1].sum(-1), rows, drawn)
            width, cp_width = np.mean(high - low), np.mean(cp_high - cp_low)
            where = f"{name}, {labelled} labels"
            text = [misses.check(f"{where}", (low <= truth) & (truth <= high)),
                    misses.check(f"{where} (runs drawn from the set)", (run_low <= truth) & (truth <= run_high))]
            if labelled == 100 and auc >= AUC_FOR_NARROWER and width >= cp_width:
                misses.other.append(f"{where}: width {width:.3f} not narrower than labels-only {cp_width:.3f} (AUC {auc:.3f})")
            ppi.append(f"| {name} | {rows} ({unscored}) | {truth:.3f} | {judge.mean():.3f} | {auc:.3f} | {labelled} | "
                       f"{np.mean(estimate) - truth:+.4f} | {text[0]} | {text[1]} | {np.mean(low > truth):.3f} | {width:.3f} | "
                       f"{cp_width:.3f} | {width / cp_width:.2f} |")
            recal.append(recalibration_row(name, labelled, picks, people, scores, truth, misses, np.mean(np.abs(estimate - truth))))
    return ppi, recal


def recalibration_row(name, labelled, picks, people, scores, truth, misses: Misses, ppi_error: float) -> str:
    found = {form: [recalibrated_grounding(scores, scores[p], people[p], form=form) for p in picks] for form in ("shift+scale", "shift")}
    main = found["shift+scale"]
    error = np.array([abs(r.grounded_rate - truth) for r in main])
    shift_error = np.mean([abs(r.grounded_rate - truth) for r in found["shift"]])
    if labelled == 100 and error.mean() > RECALIBRATION_ERROR:
        misses.other.append(f"{name}, 100 labels: re-calibrated grounded rate off by {error.mean():.3f} on average (target {RECALIBRATION_ERROR})")
    mean = lambda values: float(np.nanmean(values))  # noqa: E731
    return (f"| {name} | {labelled} | {np.mean(scores >= 0.5) - truth:+.3f} | {error.mean():.3f} | {np.mean(error <= 0.05):.0%} | "
            f"{shift_error:.3f} | {mean([abs(r.mean - truth) for r in main]):.3f} | {ppi_error:.3f} | {mean([r.ece_before for r in main]):.3f} | "
            f"{mean([r.ece_after for r in main]):.3f} | {mean([r.ece_after for r in found['shift']]):.3f} | "
            f"{mean([r.brier_before for r in main]):.3f} | {mean([r.brier_after for r in main]):.3f} |")


def joint(rate: float, judge_rate: float, kappa: float) -> np.ndarray | None:
    """The 2 x 2 probabilities [person, judge] with these margins and Cohen's kappa (None when impossible)."""
    chance = rate * judge_rate + (1 - rate) * (1 - judge_rate)
    both = (chance + kappa * (1 - chance) - 1 + rate + judge_rate) / 2
    cells = np.array([[1 - rate - judge_rate + both, judge_rate - both], [rate - both, both]])
    return None if (cells < -1e-12).any() else np.clip(cells, 0, 1)


def simulate(cells: np.ndarray, rows: int, labelled: int, draws: int, rng: np.random.Generator, wald: bool = False) -> dict[str, np.ndarray]:
    """``draws`` runs of ``rows`` rows with these probabilities, ``labelled`` of each labelled: coverage of the rate
    (``population``) and of each run's own people's rate (``rows``), and how often ``ci_low`` lies above each."""
    runs = rng.multinomial(rows, cells.reshape(-1), size=draws)
    drawn = np.stack([rng.multivariate_hypergeometric(run, labelled) for run in runs]).reshape(-1, 2, 2)
    yes, truth_rows, truth = runs.reshape(-1, 2, 2)[..., 1].sum(-1), runs.reshape(-1, 2, 2)[:, 1].sum(-1) / rows, cells[1].sum()
    estimate, low, high, _ = ppi_counts(yes, rows, drawn)
    cp_low, cp_high = labels_only(drawn, rows)
    found = {"bias": estimate - truth, "population": (low <= truth) & (truth <= high), "rows": (low <= truth_rows) & (truth_rows <= high),
             "population low above": low > truth, "rows low above": low > truth_rows, "width": high - low, "cp width": cp_high - cp_low}
    if wald:  # the papers' normal interval, the run's rows as the unlabelled sample (what ppi-python is given)
        covered = []
        for run, labels in zip(runs, drawn.reshape(-1, 4)):
            y, f = np.repeat([0, 0, 1, 1], labels), np.repeat([0, 1, 0, 1], labels)
            _, w_low, w_high, _ = ppi_mean_interval(y, f, np.repeat([0, 1, 0, 1], run))
            covered.append(w_low <= truth <= w_high)
        found["wald"] = np.array(covered)
    return found


def simulation_lines(args, misses: Misses, rng: np.random.Generator) -> list[str]:
    lines = ["| people's rate | judge's rate | kappa | rows | labels | bias | coverage | coverage of the run's own rate | "
             "papers' normal interval: coverage | mean width | labels-only CP width |", "|" + "---|" * 11]
    for rate, judge_rate, kappa in SCENARIOS[: 3 if args.quick else None]:
        for labelled in args.labels:
            found = simulate(joint(rate, judge_rate, kappa), args.rows, labelled, args.draws, rng, wald=True)
            where = f"simulation {rate}/{judge_rate}/kappa {kappa}, {labelled} labels"
            lines.append(f"| {rate} | {judge_rate} | {kappa} | {args.rows} | {labelled} | {found['bias'].mean():+.4f} | "
                         f"{misses.check(where, found['population'])} | {misses.check(where + ' (the run)', found['rows'])} | "
                         f"{found['wald'].mean():.3f} | {found['width'].mean():.3f} | {found['cp width'].mean():.3f} |")
    return lines


def sweep_lines(args, misses: Misses, rng: np.random.Generator) -> list[str]:
    """The lowest coverage over a grid of rates and agreements at each small count of labels, and the highest share of
    draws whose ``ci_low`` lies above the truth (what a gate on ``_ci_low`` risks; Clopper-Pearson's is <= 0.025)."""
    grid = [(p, q, k) for p in (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98) for q in (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)
            for k in (-0.3, 0.0, 0.3, 0.6, 0.9) if joint(p, q, k) is not None]
    grid = grid[:: 12 if args.quick else 1]
    lines = ["| rows | labels | scenarios | lowest coverage | at (rate, judge, kappa) | lowest coverage of the run's own rate | at | "
             "most ci_low above the rate / the run's rate | at |", "|" + "---|" * 9]
    holds: dict[int, bool] = {}
    for rows in SWEEP_ROWS:
        for labelled in [n for n in SWEEP_LABELS[2 if args.quick else 0:: 2 if args.quick else 1] if n < rows]:
            worst = {"population": (2.0, None), "rows": (2.0, None)}
            above = {"population": (-1.0, None), "rows": (-1.0, None)}
            for scenario in grid:
                found = simulate(joint(*scenario), rows, labelled, args.sweep_draws, rng)
                for target in worst:
                    worst[target] = min(worst[target], (found[target].mean(), scenario), key=lambda pair: pair[0])
                    above[target] = max(above[target], (found[f"{target} low above"].mean(), scenario), key=lambda pair: pair[0])
            holds[labelled] = holds.get(labelled, True) and min(w[0] for w in worst.values()) >= COVERAGE
            lines.append(f"| {rows} | {labelled} | {len(grid)} | {worst['population'][0]:.3f} | {worst['population'][1]} | "
                         f"{worst['rows'][0]:.3f} | {worst['rows'][1]} | {above['population'][0]:.3f} / {above['rows'][0]:.3f} | "
                         f"{above['population'][1]} |")
    failing = [n for n, ok in holds.items() if not ok]
    measured = min(n for n in holds if all(n2 < n for n2 in failing)) if len(failing) < len(holds) else None
    lines += ["", f"coverage >= {COVERAGE} in every swept cell from {measured} labels; people.MIN_LABELS = {MIN_LABELS}"]
    if not args.quick and (measured is None or MIN_LABELS < measured):  # a thin sweep of 100 draws is too noisy to decide
        misses.other.append(f"MIN_LABELS = {MIN_LABELS} is below the {measured} labels from which the sweep holds its coverage")
    return lines


def difference_lines(args, rng: np.random.Generator) -> tuple[list[str], int | None]:
    """The lowest coverage of two independent runs' difference over pairs of scenarios with rates at most 0.1 apart,
    per count of labels on each run; and the count from which every swept cell held its coverage."""
    grid = [(p, q, k) for p in (0.1, 0.5, 0.9, 0.98) for q in (0.1, 0.5, 0.9) for k in (0.0, 0.3, 0.6, 0.9) if joint(p, q, k) is not None]
    pairs = [(a, b) for a in grid for b in grid if abs(a[0] - b[0]) <= 0.1][:: 12 if args.quick else 3]
    lines = ["| difference: rows per run | labels per run | pairs of scenarios | lowest coverage | at (first, second) | "
             "most draws missed on one side |", "|" + "---|" * 6]
    holds: dict[int, bool] = {}
    for rows in (100, 1000):
        for labelled in (2, 5, 25, 100)[:: 2 if args.quick else 1]:
            worst, side = (2.0, None), 0.0
            for a, b in pairs:
                found = [simulate_estimates(joint(*x), rows, labelled, args.sweep_draws, rng) for x in (a, b)]
                low, high = difference_bounds(*found[0], *found[1])
                truth = b[0] - a[0]
                worst = min(worst, (np.mean((low <= truth) & (truth <= high)), (a, b)), key=lambda pair: pair[0])
                side = max(side, np.mean(low > truth), np.mean(high < truth))
            holds[labelled] = holds.get(labelled, True) and worst[0] >= COVERAGE
            lines.append(f"| {rows} | {labelled} | {len(pairs)} | {worst[0]:.3f} | {worst[1]} | {side:.3f} |")
    failing = [n for n, ok in holds.items() if not ok]
    return lines, min((n for n in holds if all(f < n for f in failing)), default=None)


def simulate_estimates(cells: np.ndarray, rows: int, labelled: int, draws: int, rng: np.random.Generator):
    runs = rng.multinomial(rows, cells.reshape(-1), size=draws)
    drawn = np.stack([rng.multivariate_hypergeometric(run, labelled) for run in runs]).reshape(-1, 2, 2)
    return ppi_counts(runs.reshape(-1, 2, 2)[..., 1].sum(-1), rows, drawn)[:3]


def end_to_end(args) -> list[str]:
    """One evaluation run through MLflow, from ``label_sample`` to a gate rule on ``people/strict_alignment_ci_low``."""
    import os
    import tempfile

    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.meta_evaluation import evaluation_rows, load_labelled
    from mlflow_genai_metrics.testing import ScriptedJudgeServer, SummarizationJudgeScript
    from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, SummarizerModel, evaluate_summaries, register_if_passing
    from mlflow_genai_metrics.tracking.genai import root_span
    from mlflow_genai_metrics.tracking.labels import label_sample, people_estimate

    rows = evaluation_rows(load_labelled(DATA / "frank.jsonl"), "frank", SETS["frank"])
    rows = rows.iloc[np.random.default_rng(args.seed).choice(len(rows), 40 if args.quick else 200, replace=False)]
    truth = {str(k): int(v) for k, v in zip(rows["id"], rows["human_binary"])}
    data = [{"inputs": {"text": t, "id": str(k)}, "outputs": s} for k, t, s in zip(rows["id"], rows["source"], rows["summary"])]
    person = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="frank-annotators")
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace written as its span ends, before its feedback
    with tempfile.TemporaryDirectory(prefix="mgm-bench-people-") as tmp, ScriptedJudgeServer(SummarizationJudgeScript()) as server:
        mlflow.set_tracking_uri(f"sqlite:///{Path(tmp) / 'mlflow.db'}")
        mlflow.set_experiment(experiment_id=mlflow.create_experiment("bench-people", artifact_location=(Path(tmp) / "artifacts").as_uri()))
        with mlflow.start_run() as run:
            uri = SummarizerModel("scripted-summarizer", server.base_url, input_col="text").log(name="summarizer").model_uri
            evaluation = evaluate_summaries(data, [ClaimAlignment(Judge("scripted-judge", server.base_url, "local", cache_dir=Path(tmp) / "cache")),
                                                   Grounding()])
        sample = label_sample(run.info.run_id, 20 if args.quick else 50, seed=args.seed)
        mlflow.flush_trace_async_logging()
        row_of = {t.info.trace_id: str(root_span(t).inputs["id"]) for t in mlflow.search_traces(run_id=run.info.run_id, return_type="list")}
        feedback = lambda trace_id: mlflow.log_feedback(trace_id=trace_id, name="claim_alignment",  # noqa: E731
                                                        value="yes" if truth[row_of[trace_id]] else "no", source=person)
        gate = lambda rule: register_if_passing(uri, "bench-people", run_id=run.info.run_id, rules=[rule], alias=None)  # noqa: E731
        feedback(sample.trace_ids[0])
        people_estimate(run.info.run_id)
        one_label = gate("people/strict_alignment_ci_low>=0.1")
        for trace_id in [*sample.trace_ids[1:], *[t for t in row_of if t not in sample.trace_ids][:2]]:
            feedback(trace_id)
        report = people_estimate(run.info.run_id)
        e = report.estimate
        gates = [gate(f"people/strict_alignment_ci_low>={threshold}") for threshold in (0.8, round(e.ci_low - 0.05, 2))]
        logged = mlflow.get_run(run.info.run_id).data
    lines = ["| end-to-end run | rows | labels (on rows not drawn) | judge's strict_alignment | people's rate, every row | "
             "people/strict_alignment [95%] | grounded_rate -> re-calibrated | ECE before -> after |", "|" + "---|" * 8]
    g = report.grounding
    lines.append(f"| FRANK test sample, scripted judge | {e.n} | {e.labelled} ({report.outside_sample}) | {evaluation.metrics['strict_alignment']:.3f} | "
                 f"{np.mean(list(truth.values())):.3f} | {e.estimate:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}] | "
                 f"{evaluation.metrics['grounded_rate']:.3f} -> {g.grounded_rate:.3f} | {g.ece_before:.3f} -> {g.ece_after:.3f} |")
    lines += ["", *report.lines, f"tag mgm.grounding.recalibrated_on: {logged.tags.get('mgm.grounding.recalibrated_on')}", "",
              "gate with 1 label:", str(one_label), "", "gate after labelling:", *map(str, gates)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS))
    parser.add_argument("--labels", type=int, nargs="*", default=None, help=f"labelled rows per draw (default {' '.join(map(str, LABELS))})")
    parser.add_argument("--draws", type=int, default=None, help="random draws per cell (default 1000; --quick 100)")
    parser.add_argument("--sweep-draws", type=int, default=None, help="draws per cell of the sweep (default 1000; --quick 100)")
    parser.add_argument("--rows", type=int, default=1000, help="rows of a simulated run (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 draws, 25 and 100 labels, 3 scenarios, a thin sweep (a smoke run)")
    parser.add_argument("--no-mlflow", action="store_true", help="leave out the run through MLflow")
    args = parser.parse_args(argv)
    args.labels = args.labels or list(QUICK_LABELS if args.quick else LABELS)
    args.draws = args.draws or (100 if args.quick else 1000)
    args.sweep_draws = args.sweep_draws or (100 if args.quick else 1000)
    started, misses, rng = time.perf_counter(), Misses(), np.random.default_rng(args.seed)
    from mlflow_genai_metrics.grounding import model_tag

    out = [f"seed {args.seed}; {args.draws} draws per cell; target: coverage >= {COVERAGE}; people.MIN_LABELS = {MIN_LABELS}; "
           f"grounding model {model_tag()}", ""]
    if DATA.exists():
        ppi, recal = sets_lines(args, misses, rng)
        out += ["People's rate by PPI++ (`people.ppi_proportion`), the grounding check as the judge:", "", *ppi, "",
                "`grounding` re-calibrated on the same labels (`people.recalibrated_grounding`):", "", *recal, ""]
    else:
        out += [f"labelled sets skipped: not at {DATA} (../shared/data beside the project)", ""]
    out += ["A judge of known bias and agreement:", "", *simulation_lines(args, misses, rng), "",
            "The lowest coverage over the sweep (for people.MIN_LABELS); the simulation's and the sweep's coverage cells are "
            "checked on the rate itself, the run's own rate shown beside it:", "", *sweep_lines(args, misses, rng), ""]
    difference, measured = difference_lines(args, rng)
    out += ["Two independent runs' difference (`people.estimate_difference`), the lowest coverage over pairs of scenarios:", "",
            *difference, "", f"coverage >= {COVERAGE} in every cell from {measured} labels per run; people.MIN_DIFFERENCE_LABELS = {MIN_DIFFERENCE_LABELS}", ""]
    if not args.quick and (measured is None or MIN_DIFFERENCE_LABELS < measured):
        misses.other.append(f"MIN_DIFFERENCE_LABELS = {MIN_DIFFERENCE_LABELS} is below the {measured} labels from which the difference holds its coverage")
    if not args.no_mlflow and DATA.exists():
        out += ["One run through MLflow:", "", *end_to_end(args), ""]
    missed = misses.missed()
    out += [f"coverage cells checked: {len(misses.coverage)} (a miss: exact binomial below {COVERAGE} at {LEVEL}/{len(misses.coverage)})",
            f"targets missed: {len(missed)}" + "".join(f"\n- {miss}" for miss in missed),
            f"wall time {time.perf_counter() - started:.0f} s"]
    print("\n".join(out), flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
