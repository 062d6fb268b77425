"""The judge's prompts: versioned text files, each with a short hash that the judge signature carries.

A prompt file starts with ``# <name> v<N>``; the rest is the template. ``{field}`` placeholders are filled in one
pass, so text inserted for one field is never scanned for another's placeholder. Source and summary text go
between *markers* whose label carries a hash of that very text: the text cannot contain its own closing marker,
so nothing inside it can pose as the end of the data and the start of new instructions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

__all__ = ["PROMPT_NAMES", "Prompt", "load_prompt", "marker"]

PROMPT_NAMES = ("claims", "claims_retry", "verify", "keypoints", "coverage")
_HEADER = re.compile(r"^# (?P<name>[a-z_]+) (?P<version>v\d+)\n")
_FIELD = re.compile(r"\{([a-z_]+)\}")


def short_hash(text: str, length: int = 4) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def marker(label: str, text: str) -> str:
    """``=====ARTICLE 5d41402abc4b=====``: unforgeable from inside ``text``, and deterministic, so caching works."""
    return f"====={label} {short_hash(text, 12)}====="


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    template: str
    source_text: str  # the whole file, which the hash covers

    @property
    def tag(self) -> str:
        """``claims:v1-3f2a``: name, version and a hash of the file, as the signature shows it."""
        return f"{self.name}:{self.version}-{short_hash(self.source_text)}"

    @property
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
