"""The judge signature: a short string that pins everything that produced the numbers, like sacreBLEU's.

``judge:gpt-4o-mini|base:api.openai.com|claims:v1-3f2a|claims_retry:v1-51c0|verify:v2-9c1d|keypoints:v1-77aa|coverage:v2-0b3e|temp:0|seed:7|mgm:0.1.0``

Prompt versions carry a short hash of the prompt file, so an edited prompt changes the signature even if
nobody bumped its version. ``chunk:N`` appears when long sources were verified in chunks of N tokens.
"""

from __future__ import annotations

from .judge import Judge
from .prompts import load_prompt

__all__ = ["parse_signature", "signature_differences", "summarization_signature"]


def summarization_signature(judge: Judge, *, coverage: bool = True, max_source_tokens: int | None = None) -> str:
    from . import __version__

    judge_fields = parse_signature(judge.signature)  # judge, base, temp, seed
    parts = [f"judge:{judge_fields['judge']}", f"base:{judge_fields['base']}"]
    parts += [load_prompt("claims").tag, load_prompt("claims_retry").tag, load_prompt("verify").tag]
    if coverage:
        parts += [load_prompt("keypoints").tag, load_prompt("coverage").tag]
    if max_source_tokens:
        parts.append(f"chunk:{max_source_tokens}")
    parts += [f"temp:{judge_fields['temp']}", f"seed:{judge_fields['seed']}", f"mgm:{__version__}"]
    return "|".join(parts)


def parse_signature(signature: str) -> dict[str, str]:
    """``"judge:m|temp:0"`` -> ``{"judge": "m", "temp": "0"}``."""
    fields = {}
    for part in signature.split("|"):
        name, _, value = part.partition(":")
        fields[name] = value
    return fields


def signature_differences(a: str, b: str) -> list[str]:
    """Human-readable differences: ``["verify: v1-9c1d != v2-1a2b"]``."""
    fields_a, fields_b = parse_signature(a), parse_signature(b)
    return [
        f"{name}: {fields_a.get(name, '(absent)')} != {fields_b.get(name, '(absent)')}"
        for name in dict.fromkeys([*fields_a, *fields_b])
        if fields_a.get(name) != fields_b.get(name)
    ]
