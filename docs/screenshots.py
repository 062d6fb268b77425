"""Screenshots of the real MLflow UI showing the demo's runs (what a person sees), saved under docs/images/.

    ./run demo                                   # makes ./mgm-demo (the SQLite store) first
    .venv/bin/python docs/screenshots.py [--store mgm-demo]

Starts `mlflow ui` on 127.0.0.1 against the store, opens pages in headless Chromium (Debian's `chromium`) and
saves: the run comparison; its Artifacts section with both runs' per-row tables, then their metric plots, side
by side; one run's overview with its metrics; its per-row table (`mgm_rows.json`, shown as a table); the
comparison run's alignment-against-richness plot when the demo kept one; the experiment's Evaluation runs page
(both candidates' runs, each evaluating its logged model); and one article's trace with its cards opened.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mlflow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the browser helper the UI test uses
from browser import Browser, MlflowUi, interact, render  # noqa: E402

OUT = Path(__file__).resolve().parent / "images"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="mgm-demo", help="the demo's folder (default ./mgm-demo)")
    parser.add_argument("--experiment", default="mgm-demo")
    args = parser.parse_args()
    uri = f"sqlite:///{(Path(args.store) / 'mlflow.db').resolve()}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise SystemExit(f"no experiment {args.experiment!r} in {uri}: run ./run demo first")
    runs = mlflow.search_runs([experiment.experiment_id], order_by=["start_time ASC"])
    candidates = runs[runs["tags.mlflow.runName"] != "comparison"]
    comparison = runs[runs["tags.mlflow.runName"] == "comparison"]
    run_ids = list(candidates["run_id"])
    first = run_ids[0]
    with MlflowUi(uri) as ui:
        pages = {
            "ui-compare.png": (ui.compare_url(experiment.experiment_id, run_ids), 2800),
            "ui-run-metrics.png": (ui.run_url(experiment.experiment_id, first), 2200),
            "ui-run-rows.png": (ui.run_url(experiment.experiment_id, first, "artifacts/mgm_rows.json"), 1100),
        }
        if len(comparison):
            plot = "artifacts/mgm/plots/alignment_vs_richness.png"
            pages["ui-comparison-plot.png"] = (ui.run_url(experiment.experiment_id, comparison["run_id"].iloc[-1], plot), 1100)
        for name, (url, height) in pages.items():
            render(url, screenshot=OUT / name, height=height)
            print(f"saved {OUT / name}  <- {url}")
        # The compare view lists the top-level files every run has; picking one shows each run's copy side by side
        # (the assistant panel is closed first, for room).
        url = ui.compare_url(experiment.experiment_id, run_ids)
        close = '[data-component-id="mlflow.assistant.chat_panel.close"]'
        picks = {
            "ui-compare-tables.png": ("mgm_rows.json", "document.body.innerText.split('\"data\"').length > 2", 1400),
            "ui-compare-plots.png": ("mgm_plot_metrics.png", "document.querySelectorAll('img[alt=\"mgm_plot_metrics.png\"][src^=\"blob:\"]').length > 1", 900),
        }
        for name, (artifact, shown, height) in picks.items():
            interact(url, click=[close, f'[artifact-name="{artifact}"]'], wait_for=[shown], scroll_to='[aria-label="collapse Artifacts"]',
                     screenshot=OUT / name, height=height)
            print(f"saved {OUT / name}  <- {url} ({artifact} picked)")
        close_assistant = '[data-component-id="mlflow.assistant.chat_panel.close"]'
        assessments = '[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]'
        trace_id = mlflow.search_traces(locations=[experiment.experiment_id], run_id=first, return_type="list")[0].info.trace_id
        with Browser() as browser:
            url = ui.evaluation_runs_url(experiment.experiment_id)
            names = "document.querySelectorAll('[data-component-id=\"mlflow.eval-runs.run-name-cell\"], #run-name-cell').length >= 2"
            browser.visit(url, click=[close_assistant], wait_for=[names], screenshot=OUT / "ui-evaluation-runs.png")
            print(f"saved {OUT / 'ui-evaluation-runs.png'}  <- {url}")
            url = ui.trace_url(experiment.experiment_id, trace_id)
            cards = "document.body.innerText.includes('claim_alignment') && document.body.innerText.includes('key_point_coverage')"
            browser.visit(url, click=[assessments], wait_for=[cards], screenshot=OUT / "ui-trace-cards.png")
            print(f"saved {OUT / 'ui-trace-cards.png'}  <- {url}")

if __name__ == "__main__":
    main()
