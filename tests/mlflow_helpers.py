"""Data and a scripted endpoint for the MLflow tests: two candidate summarizers and a deterministic judge."""

from __future__ import annotations

import pandas as pd

from mlflow_genai_metrics.testing import Fault, Reply, SummarizationJudgeScript

ARTICLES = [
    ("biz/1", "business", "The council approved the budget on Monday. The mayor welcomed the decision. Critics objected."),
    ("biz/2", "business", "Shares in Acme rose by ten percent. Profits doubled this year. The chief executive resigned."),
    ("spo/1", "sport", "Everton beat Liverpool on Saturday. Everton are third in the table. Weir played down talk of Europe."),
    ("spo/2", "sport", "The club signed a new striker. He scored twice on his debut. Fans cheered the signing."),
    ("tec/1", "tech", "A new phone was released in Paris. It has a larger screen. Reviewers praised the battery."),
    ("tec/2", "tech", "The software update fixed a security flaw. Users were urged to install it. The flaw was serious."),
]
# The "bad" summarizer states something the article contradicts.
CONTRADICTIONS = {"no": ["The council rejected the budget.", "Shares in Acme fell sharply.", "Everton lost to Liverpool."]}


def first_sentence(article: str) -> str:
    return article.split(". ")[0].rstrip(".") + "."


def summary_for(model: str, article: str) -> str:
    index = [a for _, _, a in ARTICLES].index(article)
    if model == "bad-summarizer" and index < 3:
        return CONTRADICTIONS["no"][index]
    return first_sentence(article)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [i for i, _, _ in ARTICLES],
            "category": [c for _, c, _ in ARTICLES],
            "text": [a for _, _, a in ARTICLES],
            "summary": [first_sentence(a) for _, _, a in ARTICLES],
            "reference": [first_sentence(a) + " " + a.split(". ")[1] for _, _, a in ARTICLES],
        }
    )


class Endpoint:
    """One scripted server playing both roles: candidate summarizers (by model name) and the judge."""

    models = ("scripted-judge", "good-summarizer", "bad-summarizer")

    def __init__(self) -> None:
        self.judge = SummarizationJudgeScript(verdicts={c: "no" for c in CONTRADICTIONS["no"]})

    def __call__(self, request):
        model = request.body.get("model")
        if model in ("good-summarizer", "bad-summarizer"):
            article = request.last_user_message.split("\n\n", 1)[1]
            return Reply(summary_for(model, article))
        return self.judge(request)


class Flaky(Endpoint):
    """``Endpoint`` with a flaky summarizer (``flaky-summarizer``, served beside the others: ``Flaky.models``): it
    writes the good summary, or has its request refused on the articles naming a word of ``FAILING`` (the first
    article, and one of each category: 4 of the 6)."""

    FAILING = ("council", "Everton", "striker", "phone")
    models = (*Endpoint.models, "flaky-summarizer")

    def __call__(self, request):
        if request.body.get("model") == "flaky-summarizer":
            if any(word in request.last_user_message for word in self.FAILING):
                return Fault.http(400, "this prompt was refused")
            request.body["model"] = "good-summarizer"
        return super().__call__(request)
