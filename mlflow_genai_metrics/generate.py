"""``summarize``: produce candidate outputs with any OpenAI-compatible model, through the judge's own client,
cache and concurrency, so a study can be reproduced with any candidate model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .judge import Judge, JudgeConfigError, JudgeRequest, TextAnswer, preflight
from .prompts import short_hash

DEFAULT_SUMMARY_PROMPT = "Summarize the article in one paragraph."


def summarize(
    texts: Sequence[str],
    *,
    model: str | None = None,
    base_url: str | None = None,
    prompt: str = DEFAULT_SUMMARY_PROMPT,
    api_key: str | None = None,
    max_tokens: int | None = 512,
    client: Judge | None = None,
    progress: bool | None = None,
    **client_options: Any,
) -> pd.DataFrame:
    """Ask a model to summarize each text; one row per text, in order.

    Columns: ``summary`` (None when the call failed), ``error`` ("" when it worked), ``finish_reason``
    (``length`` means ``max_tokens`` cut the summary off), ``cached``, ``prompt_tokens``, ``completion_tokens``.
    The request is the study's: the prompt, a blank line, then the article, as one user message. Pass a ready
    ``client`` (a ``Judge``) or ``model``/``base_url``/``api_key`` and any ``Judge`` option (``max_concurrency``,
    ``cache_dir``, ``temperature``, ...).
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of articles, not one string")
    texts = list(texts)
    bad = [f"row {i}: {type(t).__name__}" for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ValueError("cannot summarize these rows (not text, or empty):\n  " + "\n  ".join(bad[:20]))
    generator = client or Judge(model, base_url, api_key, **client_options)
    version = f"summarize:{short_hash(prompt)}"
    requests = [
        JudgeRequest(
            messages=[{"role": "user", "content": f"{prompt}\n\n{text}"}],
            answer_type=TextAnswer,
            prompt_version=version,
            purpose="summarize",
            max_tokens=max_tokens,
        )
        for text in texts
    ]
    replies = generator.ask_many(requests, progress=progress, desc=f"summarizing with {generator.model}")
    return pd.DataFrame(
        {
            "summary": [r.answer.text if r.ok else None for r in replies],
            "error": ["" if r.ok else str(r.error) for r in replies],
            "finish_reason": [r.finish_reason for r in replies],
            "cached": [r.cached for r in replies],
            "prompt_tokens": [r.usage.prompt_tokens for r in replies],
            "completion_tokens": [r.usage.completion_tokens for r in replies],
        }
    )


def check_generator(model: str, base_url: str | None, *, fix: str) -> None:
    """A ``ValueError`` in the candidate's words, before any run starts, when its endpoint does not serve ``model``,
    refuses the key or does not answer (the judge's own check, whose advice names the judge's settings); ``fix``
    says what to check ("--model M and --model-base-url")."""
    candidate = Judge(model, base_url, cache_dir=None)
    try:
        preflight(candidate)
    except JudgeConfigError as error:
        why = {404: "does not serve it (or the base URL is wrong: an OpenAI-compatible one usually ends in /v1)",
               401: "refused the API key (OPENAI_API_KEY)", 403: "refused this key access to it"}.get(
            error.status_code or 0, f"does not serve it (it serves {error.served})" if error.served else f"cannot be used: {error}")
        raise ValueError(f"the candidate's endpoint {candidate.settings.shown_url} {why}; check {fix}") from None
