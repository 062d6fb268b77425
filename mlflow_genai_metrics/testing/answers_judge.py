"""A deterministic judge for answers from passages (``rag``), to run behind ``ScriptedJudgeServer``.

It reads what the prompts put between their markers and answers from tables you give it, or by simple rules:

- claims (of an answer): its sentences;
- verification against passages: ``yes`` citing the first passage that holds every word of the claim (lower-cased,
  4+ letters), quoting (its first 25 words of) that passage's sentence sharing most words with it; else ``idk``
  (passage 0, no quote);
- relevance: ``yes`` when the answer shares a 4+-letter word with the question, else ``no``;
- expected facts: the expected answer's sentences.

    script = AnswersJudgeScript(citations={"Paris is in Germany.": ("no", 1, "Paris is the capital of France")})
    with ScriptedJudgeServer(script) as server: ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..text import content_words, split_sentences, stated_sentences
from .script import ScriptedRequest
from .summarization_judge import MarkedPromptScript, _numbered_items

Citation = tuple[str, int, str]  # verdict, passage number (0 for none), quote
QUOTE_WORDS = 25  # the verification prompt asks for at most 25 words of quote


def answer_pass_of(sections: Mapping[str, str]) -> str:
    if "CLAIMS" in sections and any(label.startswith("PASSAGE ") for label in sections):
        return "verify_passages"
    if "EXPECTED ANSWER" in sections:
        return "facts"
    if "QUESTION" in sections and "ANSWER" in sections:
        return "relevance"
    if "SUMMARY" in sections:
        return "claims"
    return "unknown"


@dataclass
class AnswersJudgeScript(MarkedPromptScript):
    """Callable script: ``ScriptedRequest`` -> ``Reply`` with the JSON answer the pass asks for.

    ``claims`` maps an answer to its claims; ``citations`` maps a claim (or fact) to ``(verdict, passage, quote)``
    or to a function ``(passages: dict[int, str], claim) -> (verdict, passage, quote)`` (passages by number, as the
    chunk shows them); ``relevance`` maps a question to ``yes``/``partly``/``no``; ``facts`` maps an expected answer to
    its facts. ``fault`` may return a ``Reply``/``Fault`` to send instead (or None), given the request and the pass.
    """

    claims: Mapping[str, list[str]] = field(default_factory=dict)
    citations: Mapping[str, Citation | Callable[[dict[int, str], str], Citation]] = field(default_factory=dict)
    relevance: Mapping[str, str] = field(default_factory=dict)
    facts: Mapping[str, list[str]] = field(default_factory=dict)
    fault: Callable[[ScriptedRequest, str], object] | None = None

    kind_of = staticmethod(answer_pass_of)

    def answer(self, kind: str, sections: Mapping[str, str]) -> dict:
        if kind == "claims":
            text = sections["SUMMARY"]
            return {"claims": list(self.claims.get(text, stated_sentences(text)))}
        if kind == "facts":
            expected = sections["EXPECTED ANSWER"]
            return {"facts": list(self.facts.get(expected, stated_sentences(expected)))}
        if kind == "relevance":
            question, answer = sections["QUESTION"], sections["ANSWER"]
            verdict = self.relevance.get(question) or ("yes" if content_words(question) & content_words(answer) else "no")
            return {"reason": f"rule for the question {question[:40]!r}", "relevance": verdict}
        if kind == "verify_passages":
            passages = {int(label.split()[1]): body for label, body in sections.items() if label.startswith("PASSAGE ")}
            claims = _numbered_items(sections["CLAIMS"])
            verdicts = []
            for number, claim in enumerate(claims, start=1):
                verdict, passage, quote = self.cite(passages, claim)
                verdicts.append({"claim": number, "reason": f"rule for claim {number}", "passage": passage, "quote": quote, "verdict": verdict})
            return {"verdicts": verdicts}
        raise ValueError("the scripted answers judge did not recognise this prompt")

    def cite(self, passages: dict[int, str], claim: str) -> Citation:
        rule = self.citations.get(claim)
        if callable(rule):
            return rule(passages, claim)
        if rule is not None:
            return rule
        words = content_words(claim)
        for number, text in sorted(passages.items()):
            if words and words <= content_words(text):
                quote = max(split_sentences(text), key=lambda sentence: len(words & content_words(sentence)))
                return "yes", number, " ".join(quote.split(" ")[:QUOTE_WORDS])  # at most 25 words, as the prompt asks
        return "idk", 0, ""
