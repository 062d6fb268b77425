"""The judge's prompts: versioned text files, each with a short hash that the judge signature carries.

A prompt file starts with ``# <name> v<N>``; the rest is the template. ``{field}`` placeholders are filled in one
pass, so text inserted for one field is never scanned for another's placeholder. Judged texts go between
*markers* (``=====ARTICLE 5d41402abc4b=====``) that no judged text can forge:

- the source is the evidence and goes in verbatim; its marker's label carries a hash of the source itself, and
  every later marker of the prompt a hash over the source too, so the source cannot contain any of them;
- a summary, a claim or a key point is *neutralised*: every run of five or more ``=`` is broken up, so it cannot
  contain any marker line at all;
- claims and key points are listed one per line, numbered, with their inner line breaks flattened to spaces, so
  no item can start a line of its own (``2. ...``) and renumber the list.

Each prompt puts its instructions first, then the text shared by every call about one source (the source, or a
source's key points), then what differs per call: that leading part is byte-identical across those calls, so
endpoints' prompt caches can reuse it. The prompts that read the source (``SOURCE_PROMPTS``) open with the very
same preamble and source block, their task after it, so the key-point call about a source and every verification
call against it share that prefix too.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib.resources import files

__all__ = ["ANSWER_PROMPTS", "MLFLOW_PROMPTS", "PROMPT_NAMES", "REWRITE_PROMPTS", "SOURCE_PROMPTS", "SUMMARY_PROMPTS", "Prompt", "load_prompt", "marker", "neutralise", "numbered_lines"]

# The summaries' prompts (``summarization``), those only answers from passages use (``rag``; an answer's claims are
# asked with the summaries' ``claims`` prompts), and those only rewrites use (``rewrites``).
SUMMARY_PROMPTS = ("claims", "claims_retry", "verify", "verify_examples", "keypoints", "coverage")
ANSWER_PROMPTS = ("verify_passages", "verify_passages_examples", "relevance", "facts")
REWRITE_PROMPTS = ("instruction",)  # a rewrite's own (``rewrites``; its claims and key points are a summary's)
MLFLOW_PROMPTS = ("claims_mlflow",)  # the instructions of the claim judge MLflow's make_judge builds (tracking.one_call)
PROMPT_NAMES = (*SUMMARY_PROMPTS, *ANSWER_PROMPTS, *REWRITE_PROMPTS, *MLFLOW_PROMPTS)
# The prompts that read the source: each opens with the same bytes, up to and including the source block.
SOURCE_PROMPTS = ("keypoints", "verify")
_HEADER = re.compile(r"^# (?P<name>[a-z_]+) (?P<version>v\d+)\n")
_FIELD = re.compile(r"\{([a-z_]+)\}")


def short_hash(text: str, length: int = 4) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def marker(label: str, *texts: str) -> str:
    """``=====ARTICLE 5d41402abc4b=====``: a hash of ``texts``, so unforgeable from inside any of them, and
    deterministic, so caching works."""
    return f"====={label} {short_hash(chr(0).join(texts), 12)}====="


_MARKER_RUN = re.compile(r"={5,}")


def neutralise(text: str) -> str:
    """``text`` with every run of five or more ``=`` spaced out (``= = = = =``): it can hold no marker line."""
    if "=====" not in text:  # nearly every text: no regex pass
        return text
    return _MARKER_RUN.sub(lambda run: " ".join(run.group()), text)


def numbered_lines(items: list[str]) -> str:
    """``1. first\n2. second``: each item neutralised and on one line (every kind of line break becomes a space)."""
    return "\n".join(f"{number}. {' '.join(neutralise(item).splitlines()).strip()}" for number, item in enumerate(items, start=1))


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str
    source_text: str  # the whole file, which the hash covers

    @cached_property
    def tag(self) -> str:
        """``claims:v1-3f2a``: name, version and a hash of the file, as the signature shows it."""
        return f"{self.name}:{self.version}-{short_hash(self.source_text)}"

    @cached_property
    def fields(self) -> set[str]:
        return set(_FIELD.findall(self.template))

    def render(self, **values: str | int) -> str:
        missing = self.fields - values.keys()
        if missing:
            raise KeyError(f"prompt {self.name} needs {sorted(missing)}")
        return _FIELD.sub(lambda match: str(values[match.group(1)]), self.template)


@cache
def load_prompt(name: str) -> Prompt:
    text = files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    header = _HEADER.match(text)
    if header is None or header["name"] != name:
        raise ValueError(f"prompt file {name}.txt must start with '# {name} v<N>'")
    return Prompt(name=name, version=header["version"], template=text[header.end() :].strip() + "\n", source_text=text)
