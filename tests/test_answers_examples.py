"""People's corrected verdicts shown to answers' verifications (issue 46, 2): ``examples=...`` judging answers
from passages shows the examples most like each answer's claims (``verify_passages_examples``), never one whose text
is a passage or an answer being judged, signs the set, and a judge that follows them changes its verdicts; every
example from the rows being judged is refused before any call."""

from __future__ import annotations

import json
import re

import pytest
from helpers import judge_for

from mlflow_genai_metrics.judge import CorrectedVerdict, ExampleSet
from mlflow_genai_metrics.rag import judge_answers
from mlflow_genai_metrics.signature import parse_signature
from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply, marked_sections

_STATEMENT = re.compile(r"^Statement: (?P<statement>.*)\nPeople's verdict: (?P<verdict>yes|no)", re.MULTILINE)


def row(i: int) -> tuple[str, list[str], str]:
    """Question i, its passage and an answer that paraphrases it (people accept it; the word rule finds no support)."""
    return f"Whom did club {i} sign?", [f"Report {i}. The club signed striker Number{i} on Monday."], f"The club bought striker Number{i}."


def examples_for(rows: range) -> ExampleSet:
    return ExampleSet(examples=tuple(CorrectedVerdict(source=row(i)[1][0], statement=row(i)[2], verdict="yes", origin=f"row-{i}")
                                     for i in rows), per_request=2)


def following(request, kind):
    """A judge that gives each claim the verdict of the example statement nearest it, citing the passage, when shown
    examples; the word rule otherwise."""
    if kind != "verify_passages":
        return None
    sections = marked_sections(request.messages[0]["content"])
    shown = [(m["statement"], m["verdict"]) for m in _STATEMENT.finditer(sections.get("EXAMPLES", ""))]
    answer = AnswersJudgeScript().answer(kind, sections)
    if shown:
        passage = next(body for label, body in sections.items() if label.startswith("PASSAGE ")).strip()
        for item in answer["verdicts"]:
            if any(verdict == "yes" for _, verdict in shown):
                item.update(verdict="yes", passage=1, quote=passage)
    return Reply(json.dumps(answer))


def _verifications(server) -> list[str]:
    return [r.body["messages"][0]["content"] for r in server.requests if "=====CLAIMS " in r.body["messages"][0]["content"]]


def test_answers_show_the_nearest_examples_never_their_own_and_sign_the_set(scripted_server):
    server = scripted_server(AnswersJudgeScript(fault=following))
    judged = [row(i) for i in range(6)]
    questions, passages, answers = zip(*judged)
    examples = examples_for(range(12))  # half of them the judged rows' own
    result = judge_answers(questions, passages, answers, judge=judge_for(server), examples=examples, grounding=False, progress=False)
    prompts = _verifications(server)
    assert len(prompts) == 6 and all("=====EXAMPLES " in prompt for prompt in prompts)
    shown = {m["statement"] for p in prompts for m in _STATEMENT.finditer(marked_sections(p)["EXAMPLES"])}
    assert shown and shown <= {row(i)[2] for i in range(6, 12)}  # never a judged row's answer
    assert all(f"Number{i} on Monday" not in marked_sections(p)["EXAMPLES"] for p in prompts for i in range(6))  # nor its passage
    assert result.metrics["strict_alignment"] == 1.0  # the judge followed the people's verdicts
    assert parse_signature(result.signature)["examples"] == examples.tag
    plain = judge_answers(questions, passages, answers, judge=judge_for(server), grounding=False, progress=False)
    assert plain.metrics["strict_alignment"] == 0.0 and "examples" not in parse_signature(plain.signature)
    calls = server.request_count
    with pytest.raises(ValueError, match="every one of the 6 examples comes from the rows being judged"):
        judge_answers(questions, passages, answers, judge=judge_for(server), examples=examples_for(range(6)), grounding=False, progress=False)
    assert server.request_count == calls
