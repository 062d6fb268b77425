"""People's corrected verdicts, as few-shot examples for the judge (the method's ``examples=...``, built by ``mgm align``).

An example is a statement people judged against its source (a summary, as a trace's ``claim_alignment`` feedback
judges it), their verdict (``yes``: the source supports all of it; ``no``: some of it is contradicted or not in the
source) and their reason. Each verification request shows the ``per_request`` examples most like its claims (the
share of content words in common), each with the source sentences nearest its statement, never an example whose
source or statement is one of the rows being judged (``without``). The set's ``tag`` (a hash of its
content) is in the judge's signature, beside the examples prompt's version, so aligned and unaligned runs are never
compared as equals.

    examples = ExampleSet.read("examples.json")   # what mgm align wrote (from mlflow_genai_metrics.judge)
    judge_summaries(sources, summaries, judge=judge, examples=examples)   # or examples="examples.json"; mgm evaluate --examples FILE
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..text import content_words, normalised, split_sentences

EXCERPT_SENTENCES = 2  # the source sentences shown with an example's statement


def text_key(text: str) -> str:
    """What identifies a text whatever its spacing and Unicode form: a hash of its words, composed (NFC)."""
    return hashlib.sha256(" ".join(normalised(text).split()).encode("utf-8")).hexdigest()[:16]


class CorrectedVerdict(BaseModel):
    """One statement people judged against its source; ``origin`` says where it came from (a trace id, a row id)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=1)
    statement: str = Field(min_length=1)
    verdict: Literal["yes", "no"]
    rationale: str = ""
    origin: str = ""

    def excerpt(self, sentences: int = EXCERPT_SENTENCES) -> str:
        """The source sentences sharing the most words with the statement, in the source's order."""
        found = split_sentences(self.source) or [self.source]
        words = content_words(self.statement)
        ranked = sorted(range(len(found)), key=lambda i: (-len(content_words(found[i]) & words), i))[:sentences]
        return " ".join(found[i] for i in sorted(ranked))


class ExampleSet(BaseModel):
    """Corrected verdicts and how many each request shows. The method's ``examples=...`` takes one, a dict of one, or the
    path of a file ``write`` made."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    examples: tuple[CorrectedVerdict, ...] = Field(min_length=1)
    per_request: int = Field(3, ge=1)

    def __repr__(self) -> str:
        return f"ExampleSet({len(self.examples)} examples, {self.per_request} per request, {self.tag})"

    @property
    def tag(self) -> str:
        """``ex-3f2a9c1b7d20``: a hash of the content, as the signature shows it."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return "ex-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def choose(self, claims: Collection[str]) -> list[CorrectedVerdict]:
        """The ``per_request`` examples most like ``claims`` (content words in common over those of either; ties by
        their order in the set)."""
        words = set().union(*(content_words(claim) for claim in claims)) if claims else set()

        def likeness(example: CorrectedVerdict) -> float:
            theirs = content_words(example.statement)
            return len(words & theirs) / len(words | theirs) if words | theirs else 0.0

        return sorted(self.examples, key=likeness, reverse=True)[: self.per_request]  # stable: ties keep the set's order

    def without(self, keys: Collection[str]) -> ExampleSet:
        """This set less the examples whose source or statement has a ``text_key`` in ``keys`` (the rows a run
        judges); a ``ValueError`` when none is left."""
        kept = tuple(e for e in self.examples if text_key(e.source) not in keys and text_key(e.statement) not in keys)
        if not kept:
            raise ValueError(f"every one of the {len(self.examples)} examples comes from the rows being judged: "
                             "examples are never drawn from them, so judge other rows or build the examples from others")
        return self if len(kept) == len(self.examples) else self.model_copy(update={"examples": kept})

    @classmethod
    def read(cls, path: str | Path) -> ExampleSet:
        """The set in the JSON file ``path``; a ``ValueError`` naming the file when it is missing or not a set."""
        file = Path(path).expanduser()
        try:
            return cls.model_validate_json(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"examples file {file} does not exist (mgm align writes one)") from None
        except ValueError as error:
            raise ValueError(f"examples file {file} is not a set of corrected verdicts: {error}") from None

    def write(self, path: str | Path) -> Path:
        file = Path(path).expanduser()
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return file

    @classmethod
    def coerce(cls, value: ExampleSet | Mapping[str, Any] | str | Path | None) -> ExampleSet | None:
        """Accept a set, its dict (as a judge's settings travel) or the path of its file (``--examples FILE``)."""
        if value is None or isinstance(value, ExampleSet):
            return value
        if isinstance(value, Mapping):
            return cls.model_validate(value)
        return cls.read(value)
