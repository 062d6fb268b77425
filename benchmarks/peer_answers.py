"""A deterministic judge that answers our prompts and the peers' (DeepEval, MLflow, Ragas) with well-formed JSON,
so every system can be run to completion against one scripted endpoint and its calls and tokens counted.

Our prompts go to ``SummarizationJudgeScript`` (an answer's own passes to ``AnswersJudgeScript``). A request that carries a JSON schema (``response_format``) gets an
instance of it. Otherwise the answer's key is read off the prompt ("... with the 'answers' key ..."), and lists get
as many items as the prompt asks for (one verdict per listed claim, one answer per question), so the peers' later
prompts have realistic sizes.
"""

from __future__ import annotations

import ast
import json
import re

from mlflow_genai_metrics.testing import AnswersJudgeScript, Reply, ScriptedRequest, SummarizationJudgeScript, marked_sections
from mlflow_genai_metrics.testing.answers_judge import answer_pass_of
from mlflow_genai_metrics.text import stated_sentences

_KEYS = ["verdicts", "answers", "questions", "truths", "claims", "statements", "reason"]


def _section(prompt: str, heading: str) -> str:
    match = re.search(rf"{heading}:\s*\n(.*?)(?:\n\s*\n[A-Z][A-Za-z ]*:|\nJSON:|\Z)", prompt, re.DOTALL)
    return match.group(1).strip() if match else ""


def _count_items(text: str) -> int:
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
            if isinstance(value, list):
                return len(value)
        except (ValueError, SyntaxError):
            continue
    lines = [line for line in text.splitlines() if line.strip()]
    return max(len(lines), 1)


def _instance(schema: dict, root: dict) -> object:
    if "$ref" in schema:
        return _instance(root["$defs"][schema["$ref"].split("/")[-1]], root)
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _instance(schema[key][0], root)
    kind = schema.get("type")
    if kind == "object":
        return {name: _instance(sub, root) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [_instance(schema.get("items", {}), root)]
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    return "yes"


def _embedded_schema(prompt: str) -> dict | None:
    match = re.search(r"json_schema:\s*(\{.*?\})\s*Make sure to return", prompt, re.DOTALL)
    if not match:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def _last_input(prompt: str) -> dict:
    starts = [m.end() for m in re.finditer(r"input:\s*", prompt)]
    for start in reversed(starts):
        end = prompt.rfind("}", start) + 1
        try:
            value = json.loads(prompt[start:end])
            return value if isinstance(value, dict) else {}
        except ValueError:
            continue
    return {}


def _sized_instance(schema: dict, given: dict) -> dict:
    """An instance whose lists are as long as the input's: one statement per sentence of the answer, one
    verdict per statement given."""
    answer = _instance(schema, schema)
    for name, value in answer.items():
        if not isinstance(value, list) or not value:
            continue
        if isinstance(given.get(name), list):
            count = len(given[name])
        elif isinstance(value[0], str) and isinstance(given.get("answer"), str):
            answer[name] = stated_sentences(given["answer"]) or value
            continue
        else:
            count = 1
        answer[name] = [value[0]] * max(count, 1)
    return answer


class PeerAwareScript:
    def __init__(self) -> None:
        self.ours = SummarizationJudgeScript()
        self.answers = AnswersJudgeScript()

    def __call__(self, request: ScriptedRequest):
        prompt = "\n".join(str(m.get("content", "")) for m in request.messages)
        sections = marked_sections(prompt)
        if sections:
            ours = self.answers if answer_pass_of(sections) in ("verify_passages", "relevance", "facts") else self.ours
            return ours(request)
        fmt = request.body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
        if schema:
            return Reply(json.dumps(_instance(schema, schema)))
        embedded = _embedded_schema(prompt)
        if embedded is not None:  # instructor's JSON mode (Ragas): the schema is written into the prompt
            return Reply(json.dumps(_sized_instance(embedded, _last_input(prompt))))
        return Reply(json.dumps(self.answer(prompt)))

    def answer(self, prompt: str) -> dict:
        lowered = prompt.lower()
        key = next((k for k in _KEYS if f"'{k}'" in lowered or f'"{k}" key' in lowered or f"'{k}' key" in lowered), None)
        if key in ("truths", "claims", "statements"):
            text = _section(prompt, "Text") or _section(prompt, "AI Output") or _section(prompt, "Excerpt") or prompt[-2000:]
            return {key: stated_sentences(text)[:12] or ["The text states a fact."]}
        if key == "questions":
            wanted = re.search(r"generate (\d+) ", prompt)
            return {"questions": [f"Is point {i} stated in the text?" for i in range(int(wanted.group(1)) if wanted else 5)]}
        if key == "answers":
            return {"answers": ["yes"] * _count_items(_section(prompt, "Questions"))}
        if key == "verdicts":
            listed = _section(prompt, "Summary Claims") or _section(prompt, "Claims") or _section(prompt, "Statements")
            return {"verdicts": [{"verdict": "yes", "reason": "stated in the text"} for _ in range(_count_items(listed))]}
        if key == "reason":
            return {"reason": "The score is high because the summary agrees with the text."}
        return {"result": "yes", "rationale": "The summary agrees with the text."}


if __name__ == "__main__":
    # The peer-aware judge in its own process, as ``scripts/serve_judge.py`` serves ours:
    #   python benchmarks/peer_answers.py --latency 0.2 --slots 32 [--stats-on-stdin]
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from serve_judge import main

    main(script=PeerAwareScript())
