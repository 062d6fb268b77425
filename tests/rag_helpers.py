"""A small RAG application instrumented with MLflow tracing, and the scripted endpoint it and its judge talk to:
shared by the RAG tests of the MLflow paths and of the UI."""

from __future__ import annotations

import re

import mlflow
import openai
from conftest import SECRET_KEY
from mlflow.entities import Document, SpanType

from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply

# Eight small topics of two passages each: the retriever ranks the pooled passages by the words they share with
# the question, so a question's own passages come first.
TOPICS = {
    "prize": ("What prize did Tomas Reyes win?", "Tomas Reyes won the Coastal Book Prize for his first novel.",
              "The novel took Reyes seven years to write in the evenings."),
    "plant": ("Where will Harbour Foods open its second plant?", "Harbour Foods will open its second plant in Bergen next spring.",
              "The Bergen plant will create about two hundred jobs."),
    "fares": ("What did Westbury councillors vote for?", "Westbury councillors voted for cheaper bus fares in a trial.",
              "The fares trial is paid from parking revenue."),
    "recall": ("Why is Brightwave recalling chargers?", "Brightwave is recalling chargers because of faulty cables from one supplier.",
               "Customers can return chargers to any store."),
    "bridge": ("When will the Kelso bridge reopen?", "The Kelso bridge will reopen in March after repairs.",
               "Engineers found cracks in the bridge supports last winter."),
    "museum": ("What did the Lund museum acquire?", "The Lund museum acquired a Viking sword found by a farmer.",
               "The sword will be shown from next summer."),
    "strike": ("Why did the Dover ferry workers strike?", "Dover ferry workers went on strike over changes to their shifts.",
               "The union said talks would resume on Friday."),
    "comet": ("What did the Oban observatory discover?", "The Oban observatory discovered a comet near Jupiter.",
              "Astronomers named the comet after the observatory."),
}
CORPUS = [passage for _, *passages in TOPICS.values() for passage in passages]
INVENTED = "The announcement was welcomed by astronauts."


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


class RagEndpoint:
    """The application's writers (models ``writer`` and ``inventing-writer``) and the judge, on one server."""

    models = ("scripted-judge", "writer", "inventing-writer")

    def __init__(self, judge: AnswersJudgeScript | None = None):
        self.judge = judge or AnswersJudgeScript()

    def __call__(self, request):
        model = request.body.get("model")
        if model in ("writer", "inventing-writer"):
            first = request.last_user_message.split("PASSAGE 1:\n", 1)[1].split("\n", 1)[0]
            answer = first.split(". ")[0].rstrip(".") + "."
            return Reply(answer + (f" {INVENTED}" if model == "inventing-writer" else ""))
        return self.judge(request)


def rag_app(server, model: str):
    """A RAG application instrumented as MLflow documents it: a RETRIEVER span returning Documents, an LLM span."""
    client = openai.OpenAI(base_url=server.base_url, api_key=SECRET_KEY)

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question: str) -> list[Document]:
        ranked = sorted(CORPUS, key=lambda p: -len(_words(p) & _words(question)))
        return [Document(page_content=p, metadata={"doc_uri": f"kb/{CORPUS.index(p)}"}) for p in ranked[:3]]

    @mlflow.trace(span_type=SpanType.LLM)
    def generate(question: str, passages: list[str]) -> str:
        prompt = f"QUESTION: {question}\n" + "".join(f"PASSAGE {n}:\n{p}\n" for n, p in enumerate(passages, start=1))
        reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}])
        return reply.choices[0].message.content

    @mlflow.trace
    def answer(question: str, id: str) -> str:
        return generate(question, [d.page_content for d in retrieve(question)])

    return answer
