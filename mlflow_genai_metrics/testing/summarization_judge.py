"""A deterministic judge for the summarization passes, to run behind ``ScriptedJudgeServer``.

It reads what the package's prompts put between their markers (summary, article, claims, key points) and answers
from tables you give it, or by simple rules when a table has no entry:

- claims: the summary's sentences;
- verdict: ``yes`` when every word of the claim (lower-cased, 4+ letters) appears in the article, else ``idk``;
- key points: the article's first three sentences;
- coverage: ``yes`` when at least half the key point's 4+-letter words appear in the summary;
- a rewrite's instruction (``rewrites``): followed when the rewrite has fewer words than its input.

    script = SummarizationJudgeScript(verdicts={"Everton are second in the Premiership.": "no"})
    with ScriptedJudgeServer(script) as server: ...
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..prompts import load_prompt
from ..text import content_words, stated_sentences
from .script import Reply, ScriptedRequest

# A section is a marker line, the text, and the same marker line again (markers quoted inside sentences don't count).
_SECTION = re.compile(
    r"^=====(?P<label>[A-Z][A-Z0-9 ]*?) (?P<hash>[0-9a-f]{12})=====\n(?P<body>.*?)\n=====(?P=label) (?P=hash)=====$",
    re.DOTALL | re.MULTILINE,
)
_NUMBERED = re.compile(r"^\d+\. ", re.MULTILINE)
_ONE_CALL_OPENING = load_prompt("claims_mlflow").template.splitlines()[0]


def marked_sections(prompt: str) -> dict[str, str]:
    """``{"ARTICLE": ..., "CLAIMS": ...}`` (``"PASSAGE 2"`` for a numbered passage): the texts between the prompt's
    markers."""
    return {m["label"]: m["body"] for m in _SECTION.finditer(prompt)}


def pass_of(sections: Mapping[str, str]) -> str:
    """Which pass a prompt belongs to, from the sections it carries."""
    if "INSTRUCTION" in sections:
        return "instruction"
    if "CLAIMS" in sections:
        return "verify"
    if "KEY POINTS" in sections:
        return "coverage"
    if "ARTICLE" in sections:
        return "keypoints"
    if "SUMMARY" in sections:
        return "claims"
    return "unknown"


def _numbered_items(text: str) -> list[str]:
    return [item.strip() for item in _NUMBERED.split(text) if item.strip()]


def one_call_material(request: ScriptedRequest) -> tuple[str, str] | None:
    """The article and summary of a request from the one-call claim judge (MLflow's ``make_judge`` sends the
    instructions as a system message, then ``inputs: <json>\\noutputs: <json>``); None for any other request."""
    system = next((str(m.get("content", "")) for m in request.messages if m.get("role") == "system"), "")
    if _ONE_CALL_OPENING not in system:
        return None
    inputs, _, outputs = request.last_user_message.removeprefix("inputs: ").rpartition("\noutputs: ")
    article = json.loads(inputs)
    return str(article.get("text", article) if isinstance(article, dict) else article), str(json.loads(outputs))


class MarkedPromptScript:
    """A script that reads a prompt's marked sections, tells which pass it is (``kind_of``), lets ``fault`` (a
    field of the subclass) send something else, and otherwise replies with ``answer(kind, sections)`` as JSON."""

    fault: Callable[[ScriptedRequest, str], object] | None
    kind_of: Callable[[Mapping[str, str]], str]

    def answer(self, kind: str, sections: Mapping[str, str]) -> dict:
        raise NotImplementedError

    def __call__(self, request: ScriptedRequest):
        prompt = request.messages[0]["content"] if request.messages else ""
        sections = marked_sections(prompt)
        kind = self.kind_of(sections)
        if self.fault is not None:
            injected = self.fault(request, kind)
            if injected is not None:
                return injected
        return Reply(json.dumps(self.answer(kind, sections)))


@dataclass
class SummarizationJudgeScript(MarkedPromptScript):
    """Callable script: ``ScriptedRequest`` -> ``Reply`` with the JSON answer the pass asks for.

    ``verdicts`` maps a claim to ``yes``/``no``/``idk``, or to a function ``(article, claim) -> verdict`` (useful for
    chunked articles). ``fault`` may return a ``Reply``/``Fault`` to send instead of the answer (or None).
    """

    claims: Mapping[str, list[str]] = field(default_factory=dict)
    verdicts: Mapping[str, str | Callable[[str, str], str]] = field(default_factory=dict)
    key_points: Mapping[str, list[str]] = field(default_factory=dict)
    covered: Mapping[tuple[str, str], bool] = field(default_factory=dict)
    followed: Mapping[str, str] = field(default_factory=dict)  # a rewrite -> "yes"/"no": does it follow its instruction
    fault: Callable[[ScriptedRequest, str], object] | None = None

    kind_of = staticmethod(pass_of)

    def __call__(self, request: ScriptedRequest):
        material = one_call_material(request)
        if material is None:
            return super().__call__(request)
        if self.fault is not None and (injected := self.fault(request, "one_call")) is not None:
            return injected
        return Reply(json.dumps(self.one_call_answer(*material)))

    def one_call_answer(self, article: str, summary: str) -> dict:
        """What the one-call claim judge (MLflow's ``make_judge``, ``tracking.one_call``) answers: the claims and
        verdicts the two passes would give, in one reply."""
        claims = list(self.claims.get(summary, stated_sentences(summary)))
        verdicts = [self.verdict(article, claim) for claim in claims]
        listed = "\n".join(f"{n}. {claim} - {verdict}: rule for claim {n}" for n, (claim, verdict) in enumerate(zip(claims, verdicts), start=1))
        return {"result": "yes" if claims and set(verdicts) == {"yes"} else "no", "rationale": listed or "no claim"}

    def answer(self, kind: str, sections: Mapping[str, str]) -> dict:
        if kind == "claims":
            summary = sections["SUMMARY"]
            return {"claims": list(self.claims.get(summary, stated_sentences(summary)))}
        if kind == "keypoints":
            article = sections["ARTICLE"]
            return {"key_points": list(self.key_points.get(article, stated_sentences(article)[:3]))}
        if kind == "verify":
            article = sections["ARTICLE"]
            claims = _numbered_items(sections["CLAIMS"])
            return {
                "verdicts": [
                    {"claim": number, "reason": f"rule for claim {number}", "verdict": self.verdict(article, claim)}
                    for number, claim in enumerate(claims, start=1)
                ]
            }
        if kind == "coverage":
            summary = sections["SUMMARY"]
            points = _numbered_items(sections["KEY POINTS"])
            return {
                "covered": [
                    {"key_point": number, "reason": f"rule for key point {number}", "covered": "yes" if self.is_covered(point, summary) else "no"}
                    for number, point in enumerate(points, start=1)
                ]
            }
        if kind == "instruction":
            rewrite, text = sections["REWRITE"], sections["INPUT"]
            verdict = self.followed.get(rewrite) or ("yes" if len(rewrite.split()) < len(text.split()) else "no")
            return {"reason": f"rule: the rewrite has {len(rewrite.split())} words, its input {len(text.split())}", "followed": verdict}
        raise ValueError("the scripted summarization judge did not recognise this prompt")

    def verdict(self, article: str, claim: str) -> str:
        rule = self.verdicts.get(claim)
        if callable(rule):
            return rule(article, claim)
        if rule is not None:
            return rule
        return "yes" if content_words(claim) <= content_words(article) else "idk"

    def is_covered(self, point: str, summary: str) -> bool:
        if (point, summary) in self.covered:
            return self.covered[(point, summary)]
        words = content_words(point)
        return bool(words) and len(words & content_words(summary)) >= len(words) / 2
