"""The run signature: what produced the numbers, pinned field by field, in the manner of sacreBLEU's signatures.

    judge:gpt-4o-mini|base:api.openai.com|mode:json_schema|max_tokens:default|claims:v1-9cff|claims_retry:v1-3afd|
    verify:v3-8c70|keypoints:v2-68ca|coverage:v2-fb4f|temp:0|seed:7|rouge:rouge-score=0.1.2,stem=porter|
    bleu:nrefs=1,case=mixed,...|grounding:v2-8bb9|resamples:1000|confidence:0.95|bootstrap_seed:12345|mgm:0.1.0

It is composite: a **judge** part (model, endpoint, response mode, max tokens, each prompt's version and hash, the
chunk size, temperature, seed), a **coverage** part (the key-point prompts: only the coverage metrics read their
answers, so a run judged without coverage still compares on the judge's other metrics), a **reference** part (each traditional metric's own signature: sacreBLEU's for BLEU,
chrF and TER, rouge-score's settings), a **grounding** part (the model-free scorer's model file), a **statistics**
part (resamples, confidence, bootstrap seed) and the package version. A run with no judge has no judge part and
still a signature. Two runs are compared per metric: a judge metric needs the judge and statistics parts to match,
ROUGE only the reference and statistics parts.

Inside a value, sacreBLEU's own ``|`` and ``:`` become ``,`` and ``=`` so that the whole stays one line of
``name:value`` fields; any other ``|`` (a model id may hold one) is written ``%7C`` and ``%`` ``%25``, so that
``Signature.parse(signature.format()) == signature`` whatever the values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._version import __version__
from .prompts import PROMPT_NAMES, load_prompt

if TYPE_CHECKING:
    from .judge import Judge
    from .stats import StatisticsOptions

Part = Literal["judge", "coverage", "reference", "grounding", "statistics"]
_COVERAGE_FIELDS = ("keypoints", "coverage")  # the key-point prompts: only the coverage metrics read their answers
_JUDGE_FIELDS = ("judge", "base", "mode", "max_tokens", *(n for n in PROMPT_NAMES if n not in _COVERAGE_FIELDS), "chunk", "temp",
                 "seed", "stability", "examples", "task")
_ALL_PARTS: tuple[Part, ...] = ("judge", "coverage", "reference", "grounding", "statistics")
_REFERENCE_FIELDS = ("rouge", "bleu", "chrf", "ter")
_STATISTICS_FIELDS = ("resamples", "confidence", "bootstrap_seed")
# Which parts must match for two runs' values of a metric family to be compared pair by pair (the package version
# too, always). The statistics part is not among them: a comparison resamples the pairs with its own settings.
FAMILY_PARTS: dict[str, tuple[Part, ...]] = {
    "judge": ("judge",),
    "coverage": ("judge", "coverage"),
    "usage": ("judge", "coverage"),
    "reference": ("reference",),
    "length": (),
    "grounding": ("grounding",),
    "suspect": ("judge", "grounding"),
    "rag": ("judge",),
    "rewrite": ("judge",),
    "stability": ("judge",),
    "order": ("judge", "coverage"),
}


class SignatureMismatchError(ValueError):
    """Two results were produced by different judges or prompts; their numbers are not comparable."""


class TaskMismatchError(SignatureMismatchError):
    """Two results judged different tasks (summaries, rewrites, answers from passages): never comparable."""


# The prompts only one task's judge asks: a signature naming one was judged on that task (else on summaries).
_TASK_PROMPTS = (("rewrites", ("instruction",)),
                 ("answers from passages", ("verify_passages", "verify_passages_examples", "relevance", "facts")))
PACKAGE_TASKS = ("summaries", *(task for task, _ in _TASK_PROMPTS))  # what ``task_of`` says of the package's own


def task_of(signature: Signature) -> str | None:
    """The task a signature's judge judged: the one it names (a task of the user's: ``JudgingOptions.task``), else
    ``"rewrites"``, ``"answers from passages"`` or ``"summaries"`` by its prompts (None: no judge, the grounding
    check alone, whose task the signature does not say)."""
    if signature.judge is None:
        return None
    if signature.judge.task:
        return signature.judge.task
    return next((task for task, prompts in _TASK_PROMPTS if any(p in signature.judge.prompts for p in prompts)), "summaries")


def check_same_task(a: Signature, b: Signature) -> None:
    """``TaskMismatchError`` when ``a`` and ``b`` judged different tasks: their rows are different questions, so no
    judge setting or option makes them comparable (an answers run and a summaries run were refused as "different
    judges or prompts", with the advice to rejudge both with one judge)."""
    tasks = task_of(a), task_of(b)
    if None not in tasks and tasks[0] != tasks[1]:
        raise TaskMismatchError(f"run A judged {tasks[0]} and run B judged {tasks[1]}: runs of different tasks are never "
                                "compared, whatever the judge (their rows ask different questions); compare runs of one task")


class JudgePart(BaseModel):
    """Everything about the judge that changes a number."""

    model_config = ConfigDict(frozen=True)

    model: str
    base: str
    mode: str = "unknown"  # the response mode the endpoint answered in (it changes the prompt)
    max_tokens: str = "default"
    prompts: dict[str, str] = Field(default_factory=dict)  # prompt name -> "v1-3f2a"
    chunk: int | None = None
    temp: str = "0"
    seed: str = "none"
    stability: int | None = None  # each verification asked this many times, the majority kept (None: once)
    examples: str | None = None  # the tag of people's corrected verdicts shown as examples (None: none)
    task: str | None = None  # a task of the user's on the claim engine, by its name (None: the prompts say the task)


class Signature(BaseModel):
    """A run's signature, part by part; ``format()`` for tags and params, ``parse()`` to read one back."""

    model_config = ConfigDict(frozen=True)

    judge: JudgePart | None = None
    reference: dict[str, str] | None = None  # metric -> its own signature
    grounding: str | None = None  # the grounding model's tag
    resamples: int | None = None
    confidence: float | None = None
    bootstrap_seed: int | None = None
    version: str = ""

    def fields(self) -> dict[str, str]:
        """Every field as ``name -> value``, in the signature's order."""
        out: dict[str, str] = {}
        if self.judge is not None:
            out.update(judge=self.judge.model, base=self.judge.base, mode=self.judge.mode, max_tokens=self.judge.max_tokens)
            out.update(self.judge.prompts)
            if self.judge.chunk:
                out["chunk"] = str(self.judge.chunk)
            out.update(temp=self.judge.temp, seed=self.judge.seed)
            if self.judge.stability:
                out["stability"] = str(self.judge.stability)
            if self.judge.examples:
                out["examples"] = self.judge.examples
            if self.judge.task:
                out["task"] = self.judge.task
        for name, value in (self.reference or {}).items():
            out[name] = value.replace("|", ",").replace(":", "=")
        if self.grounding is not None:
            out["grounding"] = self.grounding
        if self.resamples is not None:
            out.update(resamples=str(self.resamples), confidence=f"{self.confidence:g}", bootstrap_seed=str(self.bootstrap_seed))
        out["mgm"] = self.version
        return out

    def format(self) -> str:
        return "|".join(f"{name}:{_escape(value)}" for name, value in self.fields().items())

    def __str__(self) -> str:
        return self.format()

    @classmethod
    def parse(cls, text: str) -> Signature:
        """Read a formatted signature (also the shorter ones older versions wrote: absent fields stay absent)."""
        fields = parse_signature(text)
        judge = None
        if "judge" in fields:
            prompts = {name: fields[name] for name in PROMPT_NAMES if name in fields}
            chunk, stability = fields.get("chunk"), fields.get("stability")
            judge = JudgePart(
                model=fields["judge"], base=fields.get("base", ""), mode=fields.get("mode", "unknown"),
                max_tokens=fields.get("max_tokens", "default"), prompts=prompts, chunk=int(chunk) if chunk else None,
                temp=fields.get("temp", "0"), seed=fields.get("seed", "none"), stability=int(stability) if stability else None,
                examples=fields.get("examples"), task=fields.get("task"),
            )
        reference = {name: fields[name] for name in _REFERENCE_FIELDS if name in fields} or None
        statistics = {name: fields[name] for name in _STATISTICS_FIELDS if name in fields}
        return cls(
            judge=judge,
            reference=reference,
            grounding=fields.get("grounding"),
            resamples=int(statistics["resamples"]) if "resamples" in statistics else None,
            confidence=float(statistics["confidence"]) if "confidence" in statistics else None,
            bootstrap_seed=int(statistics["bootstrap_seed"]) if "bootstrap_seed" in statistics else None,
            version=fields.get("mgm", ""),
        )

    def part_fields(self, part: Part) -> dict[str, str]:
        names = {"judge": _JUDGE_FIELDS, "coverage": _COVERAGE_FIELDS, "reference": _REFERENCE_FIELDS, "grounding": ("grounding",),
                 "statistics": _STATISTICS_FIELDS}[part]
        return {name: value for name, value in self.fields().items() if name in names}

    def differences(self, other: Signature, parts: tuple[Part, ...] = _ALL_PARTS) -> list[str]:
        """What differs, field by field, in ``parts`` (and the package version): ``["verify: v1-9c1d != v2-1a2b"]``.
        A part one signature lacks is not compared (a run with no judge has no judge part to differ in), nor a
        reference metric one of them lacks: each reference metric has a signature of its own, and one that only one
        run computed (TER asked on one side) is in one table only (it once left ROUGE, BLEU and chrF out too). The
        coverage part (the key-point prompts) is compared whenever both runs have a judge: one asked for coverage and
        the other not differ there, not in the judge part, so their judge's metrics still compare."""
        found = []
        for part in parts:
            mine, theirs = self.part_fields(part), other.part_fields(part)
            if part == "coverage" and (self.judge is None or other.judge is None):
                continue
            if not mine and not theirs or part != "coverage" and (not mine or not theirs):
                continue
            if part == "reference":
                mine, theirs = ({name: value for name, value in fields.items() if name in mine and name in theirs} for fields in (mine, theirs))
            found += _field_differences(mine, theirs)
        if self.version != other.version:
            found.append(f"mgm: {self.version or '(absent)'} != {other.version or '(absent)'}")
        return found


def _field_differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [
        f"{name}: {a.get(name, '(absent)')} != {b.get(name, '(absent)')}"
        for name in dict.fromkeys([*a, *b])
        if a.get(name) != b.get(name)
    ]


def summarization_signature(
    judge: Judge | None,
    *,
    coverage: bool = True,
    max_source_tokens: int | None = None,
    response_mode: str | None = None,
    reference: dict[str, str] | None = None,
    grounding: str | None = None,
    statistics: StatisticsOptions | None = None,
    prompts: Sequence[str] | None = None,
    method: Any = None,
    task: str | None = None,
) -> str:
    """The formatted signature of a result judged by ``judge`` (None: no judge part) with these settings;
    ``prompts`` the names of the prompts asked (default: a summary's, with coverage's when ``coverage``);
    ``grounding`` is the grounding model's tag (``grounding:v2-8bb9``), its field reads ``grounding:v2-8bb9``;
    ``statistics`` the statistics part (None: none; ``bootstrap_seed`` is its ``seed``).
    ``response_mode`` is the mode the judge's replies came in (default: the one the endpoint is known to accept);
    ``method`` how claims were verified (a ``summarization.method.Method``, read for its ``stability`` and
    ``examples``, never imported: the engine sits above this module; None: each once, no examples): its stability
    and the examples' tag are signed; ``task`` the name of a task of the user's judged on the claim engine (None: the
    prompts say which of the package's tasks it is)."""
    judge_part = None
    if judge is not None:
        examples = method.examples if method is not None else None
        stability = method.stability if method is not None and method.repeated else None
        verify = "verify_examples" if examples is not None else "verify"
        names = list(prompts) if prompts is not None else ["claims", "claims_retry", verify, *(["keypoints", "coverage"] if coverage else [])]
        prompts = {name: load_prompt(name).tag.split(":", 1)[1] for name in names}
        mode = response_mode or judge.response_mode or "unknown"
        judge_part = JudgePart(
            model=judge.model, base=judge.endpoint_label, mode=mode,
            max_tokens=str(judge.max_tokens) if judge.max_tokens else "default", prompts=prompts,
            chunk=max_source_tokens or None, temp=f"{judge.temperature:g}", seed="none" if judge.seed is None else str(judge.seed),
            stability=stability, examples=examples.tag if examples is not None else None, task=task,
        )
    return Signature(
        judge=judge_part, reference=reference, grounding=grounding.removeprefix("grounding:") if grounding else None,
        resamples=statistics.resamples if statistics else None, confidence=statistics.confidence if statistics else None,
        bootstrap_seed=statistics.seed if statistics else None, version=__version__,
    ).format()


_ESCAPES = {"%": "%25", "|": "%7C"}
_ESCAPED = re.compile("|".join(re.escape(code) for code in _ESCAPES.values()))


def _escape(value: str) -> str:
    """A field's value as the formatted signature writes it: a ``|`` in it (``judge:org/m|v2``) would end the field
    and make the rest a field of its own, so two judges would read back alike."""
    return "".join(_ESCAPES.get(char, char) for char in value)


def parse_signature(signature: str) -> dict[str, str]:
    """``"judge:m|temp:0"`` -> ``{"judge": "m", "temp": "0"}`` (the flat fields, for MLflow params)."""
    unescaped = {code: char for char, code in _ESCAPES.items()}
    fields = {}
    for part in signature.split("|"):
        name, _, value = part.partition(":")
        fields[name] = _ESCAPED.sub(lambda found: unescaped[found.group()], value)
    return fields


def signature_differences(a: str, b: str, parts: tuple[Part, ...] = _ALL_PARTS) -> list[str]:
    """Human-readable differences between two formatted signatures, in ``parts``."""
    return Signature.parse(a).differences(Signature.parse(b), parts)
