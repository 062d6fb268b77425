"""The fenced code blocks of the project's Markdown pages, and the marker that says how the docs test runs each.

A marker is an HTML comment on the line right above a block's opening fence (GitHub shows none of it):

    <!-- mgm-docs: MODE...; key: value; key: value -->

MODE is one or more of:

- (no marker) the block runs as written, offline: nothing is configured for it but the page's session;
- ``scripted-openai``: a paid endpoint, played by the scripted judge server through the variables a user sets for
  the real one (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); it answers as judge for the summarization passes and as a
  candidate model (the article's first two sentences) for anything else;
- ``local-model``: needs the ``local`` extra (llama.cpp and the packaged models), and runs them for real;
- ``background``: a shell command that runs until it is stopped (``mgm serve``): started, awaited until its output
  matches ``ready``, stopped when the page is done;
- ``skip``: not run; ``reason`` says why, and the test suite lists it with that reason.

Keys (each may repeat where it makes sense):

- ``reason``: why a block is skipped (it may hold ``;``, as may a pattern: a part begins at ``; key:``);
- ``given``: names the block uses without defining them, provided by the test (``doc_session.GIVENS``);
- ``sub``: ``OLD => NEW``, a text replaced before the block runs (a smaller ``--limit``; free ports, the same
  for the whole page: ``{port}``, ``{port2}``; the shared data folder: ``{shared}``); a ``sub`` whose OLD is not in
  the block is an error;
- ``expect``: a regular expression the block's output must match;
- ``raises``: the exception class a Python block must end with;
- ``exit``: the exit status a shell block must end with (default 0);
- ``capture``: ``NAME = REGEX``: the first group of REGEX in the block's output becomes the session's ``$NAME``
  (what a reader copies from the output: a run id, a model URI);
- ``ready``: with ``background``, the output that says the command is ready.

Blocks of one page run in order in one session: one Python interpreter for its Python blocks, one environment and
working folder for its shell blocks, as a reader working through the page would have them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "Marker", "MarkerError", "LANGUAGES", "MODES", "parse_marker", "parse_page"]

RUNNABLE = {"python", "bash"}
LANGUAGES = RUNNABLE | {"text"}  # text: output, diagrams and formats, never run
MODES = {"scripted-openai", "local-model", "background", "skip"}
KEYS = {"reason", "given", "sub", "expect", "raises", "exit", "capture", "ready"}
_MARKER = re.compile(r"^<!--\s*mgm-docs:(?P<body>.*?)-->\s*$")
_FENCE = re.compile(r"^```(?P<language>\S*)\s*$")


class MarkerError(ValueError):
    """A marker or fence the docs test cannot read: it fails the test rather than skip a block."""


@dataclass(frozen=True)
class Marker:
    modes: frozenset[str] = frozenset()
    reason: str = ""
    given: tuple[str, ...] = ()
    subs: tuple[tuple[str, str], ...] = ()
    expect: tuple[str, ...] = ()
    raises: str | None = None
    exit: int = 0
    capture: tuple[tuple[str, str], ...] = ()
    ready: str | None = None

    @property
    def skipped(self) -> bool:
        return "skip" in self.modes


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: Marker = field(default_factory=Marker)

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in RUNNABLE and not self.marker.skipped


def parse_marker(body: str, where: str) -> Marker:
    """``MODE...; key: value; ...`` as a ``Marker``; anything unknown is a ``MarkerError`` naming ``where``."""
    # A part starts at "; key:" for a known key, so a reason or a pattern may hold ";" of its own.
    parts = [part.strip() for part in re.split(rf";\s*(?=(?:{'|'.join(KEYS)})\s*:)", body) if part.strip()]
    head = parts[0].split(";", 1) if parts and ":" not in parts[0].split(";", 1)[0] else None
    if head is not None:
        parts[:1] = [head[1].strip()] if len(head) > 1 and head[1].strip() else []
    modes = frozenset(head[0].split()) if head is not None else frozenset()
    if modes - MODES:
        raise MarkerError(f"{where}: unknown mode {sorted(modes - MODES)}; known: {sorted(MODES)}")
    values: dict[str, list[str]] = {}
    for part in parts:
        key, colon, value = part.partition(":")
        key, value = key.strip(), value.strip()
        if not colon or key not in KEYS or not value:
            raise MarkerError(f"{where}: cannot read {part!r}; keys: {sorted(KEYS)}, written 'key: value'")
        values.setdefault(key, []).append(value)
    subs = []
    for sub in values.get("sub", []):
        old, arrow, new = sub.partition(" => ")
        if not arrow:
            raise MarkerError(f"{where}: sub {sub!r} needs 'OLD => NEW'")
        subs.append((old, new))
    captures = []
    for capture in values.get("capture", []):
        name, equals, pattern = capture.partition(" = ")
        if not equals or not name.strip().isidentifier() or re.compile(pattern).groups < 1:
            raise MarkerError(f"{where}: capture {capture!r} needs 'NAME = REGEX' with one group")
        captures.append((name.strip(), pattern))
    marker = Marker(
        modes=modes,
        reason=" ".join(values.get("reason", [])),
        given=tuple(name for given in values.get("given", []) for name in given.split()),
        subs=tuple(subs),
        expect=tuple(values.get("expect", [])),
        raises=(values.get("raises") or [None])[-1],
        exit=int((values.get("exit") or ["0"])[-1]),
        capture=tuple(captures),
        ready=(values.get("ready") or [None])[-1],
    )
    if marker.skipped and not marker.reason:
        raise MarkerError(f"{where}: a skipped block needs a reason")
    if "background" in modes and not marker.ready:
        raise MarkerError(f"{where}: a background block needs 'ready: REGEX'")
    return marker


def parse_page(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with its marker; a fence without a language, or one of another language than
    ``LANGUAGES``, or a marker not followed by a fence, is a ``MarkerError``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, marker, position = [], None, 0
    while position < len(lines):
        line = lines[position]
        where = f"{page.name}:{position + 1}"
        found = _MARKER.match(line)
        if found:
            marker = parse_marker(found["body"], where)
            position += 1
            if position >= len(lines) or not _FENCE.match(lines[position]):
                raise MarkerError(f"{where}: a marker must stand on the line right above a block's opening fence")
            continue
        fence = _FENCE.match(line)
        if fence:
            language = fence["language"]
            if language not in LANGUAGES:
                raise MarkerError(f"{where}: a fence of language {language!r}; write one of {sorted(LANGUAGES)}")
            end = next((i for i in range(position + 1, len(lines)) if lines[i].startswith("```")), None)
            if end is None:
                raise MarkerError(f"{where}: the block is never closed")
            code = "\n".join(lines[position + 1 : end]) + "\n"
            blocks.append(Block(page, position + 1, language, code, marker or Marker()))
            marker, position = None, end + 1
            continue
        position += 1
    return blocks
