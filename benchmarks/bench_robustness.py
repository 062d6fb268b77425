"""Does the grounding check tell a paraphrase from an error? Planted errors against faithful rewrites on BBC.

    .venv/bin/python benchmarks/bench_robustness.py                     # 300 articles of the evaluation side
    .venv/bin/python benchmarks/bench_robustness.py --articles 600 --seed 1 --json out.json

The cases are ``perturbations.py``'s (its docstring has the recipe): per article, the original summary (its first
three reference sentences), two faithful rewrites (``synonyms``, ``reorder``) and up to four planted errors
(``number``, ``name``, ``negation``, ``inserted``), all scored by the shipped grounding model (``grounding_metrics``'s
``grounding``). Reported: per error kind and rewrite kind, the share of articles (that have both) where the error
scores strictly below the rewrite; per rewrite kind, the mean loss against the original (original minus rewrite);
per kind, the mean score; per error kind, how many errors score above the original summary, and by how much at
most (the detectors of errors only lower the score, but the free features move too: see docs/metrics.md). Only the ``eval`` side is reported on by default: the training script may read the
``train`` side, which shares no article and no synonym with it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perturbations import DATA, ERRORS, REWRITES, perturbed_articles  # noqa: E402


def robustness(cases: list, scores: dict[str, float | None]) -> dict:
    """The figures from each case's scores (``scores[f"{case.id}/{kind}"]``; None: the check gave no number)."""

    def score(case, kind):
        return scores.get(f"{case.id}/{kind}")

    ranking: dict[str, dict[str, dict[str, float]]] = {}
    for error in ERRORS:
        ranking[error] = {}
        for rewrite in REWRITES:
            pairs = [(score(c, error), score(c, rewrite)) for c in cases if error in c.errors and rewrite in c.rewrites]
            pairs = [(e, r) for e, r in pairs if e is not None and r is not None]
            ranking[error][rewrite] = {"articles": len(pairs), "error_below": sum(e < r for e, r in pairs) / len(pairs) if pairs else float("nan")}
    losses = {}
    for rewrite in REWRITES:
        pairs = [(score(c, "original"), score(c, rewrite)) for c in cases if rewrite in c.rewrites]
        pairs = [(o, r) for o, r in pairs if o is not None and r is not None]
        losses[rewrite] = {"articles": len(pairs), "mean_loss": sum(o - r for o, r in pairs) / len(pairs) if pairs else float("nan")}
    raised = {}  # planted errors that score *above* the original summary: the monotone detectors cannot rule it out
    for error in ERRORS:
        pairs = [(score(c, error), score(c, "original")) for c in cases if error in c.errors]
        ups = [e - o for e, o in pairs if e is not None and o is not None and e > o]
        raised[error] = {"errors": len(pairs), "raised": len(ups), "most": max(ups, default=0.0),
                         "ids": [c.id for c in cases if error in c.errors and (score(c, error) or 0) > (score(c, "original") or 1)]}
    means = {}
    for kind in ("original", *REWRITES, *ERRORS):
        values = [s for c in cases if (s := score(c, kind)) is not None]
        means[kind] = sum(values) / len(values) if values else float("nan")
    return {"ranking": ranking, "rewrite_loss": losses, "mean_score": means, "raised": raised}


def table(figures: dict) -> list[str]:
    lines = ["| error | articles | below `synonyms` | below `reorder` | mean grounding | above the original (most) |",
             "|---|---|---|---|---|---|"]
    for error, by_rewrite in figures["ranking"].items():
        cells = [f"{by_rewrite[r]['error_below']:.1%}" for r in REWRITES]
        articles = min(by_rewrite[r]["articles"] for r in REWRITES)
        up = figures["raised"][error]
        lines.append(f"| {error} | {articles} | {' | '.join(cells)} | {figures['mean_score'][error]:.3f} | "
                     f"{up['raised']} of {up['errors']} ({up['most']:+.4f}) |")
    lines += ["", "| faithful rewrite | articles | mean loss against the original | mean grounding |", "|---|---|---|---|"]
    lines.append(f"| (original) | | | {figures['mean_score']['original']:.3f} |")
    for rewrite, loss in figures["rewrite_loss"].items():
        lines.append(f"| {rewrite} | {loss['articles']} | {loss['mean_loss']:+.3f} | {figures['mean_score'][rewrite]:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--side", choices=("eval", "train"), default="eval")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: the BBC data is not at {DATA} (../shared/data beside the project)")
        return None
    from mlflow_genai_metrics import grounding_metrics
    from mlflow_genai_metrics.grounding import MODEL_TAG

    cases = perturbed_articles(args.side, args.articles, args.seed)
    keys, sources, summaries = [], [], []
    for case in cases:
        for kind, text in (("original", case.summary), *case.rewrites.items(), *case.errors.items()):
            keys.append(f"{case.id}/{kind}")
            sources.append(case.source)
            summaries.append(text)
    rows = grounding_metrics(sources, summaries, cache=False).rows  # scored now, with this code
    scores = {key: (None if value != value else float(value)) for key, value in zip(keys, rows["grounding"])}
    figures = robustness(cases, scores)
    figures.update(model=MODEL_TAG, side=args.side, articles=len(cases), seed=args.seed)
    print(f"{len(cases)} BBC articles ({args.side} side, seed {args.seed}), model {MODEL_TAG}")
    print("\n".join(table(figures)))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
