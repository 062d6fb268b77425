"""Which model answers: the endpoint's model listing, checked before a Judge's first call, and the model id each
reply reports.

Servers such as llama.cpp answer to any model name with the one model they loaded, so a ``Judge("gpt-4o-mini")``
pointed at one would judge with another model under the name the signature shows. The listing catches that before
any row is judged; the reported id catches an endpoint that routes a name to another model.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import Counter
from typing import Any, NamedTuple

import openai

from .errors import JudgeConfigError, config_error, is_unreachable, unreachable_error
from .limits import within_deadline
from .settings import JudgeSettings

log = logging.getLogger(__name__)

NO_LISTING = (404, 405, 501)  # an endpoint without /models: the name cannot be checked, nothing is wrong
_SHOWN = 20
_SNAPSHOT = r"-\d[\d-]*"  # a dated snapshot: gpt-4o-mini-2024-07-18, gpt-4-0613, claude-3-5-sonnet-20240620


def _names_for(model: str) -> set[str]:
    """The ids under which an endpoint may list or report ``model``: Ollama adds ``:latest``, Gemini ``models/``."""
    return {model, f"{model}:latest", f"models/{model}"}


def is_listed(model: str, ids: list[str]) -> bool:
    """Is ``model`` among the ids an endpoint lists?"""
    return not _names_for(model).isdisjoint(ids)


def same_model(requested: str, reported: str) -> bool:
    """Does a reply's reported model id name the requested model (itself, or a dated snapshot of it)?

    ``gpt-4o-mini-2024-07-18`` answers for ``gpt-4o-mini``; ``gpt-4o-mini`` does not answer for ``gpt-4o``.
    """
    return reported in _names_for(requested) or re.fullmatch(re.escape(requested) + _SNAPSHOT, reported) is not None


def read_model_ids(response: Any) -> list[str] | None:
    """The ids in a ``/models`` listing (OpenAI's ``{"data": [{"id": ...}]}``); None when the body is not one."""
    try:
        data = json.loads(response.content)["data"]
        ids = [entry["id"] for entry in data]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return ids if all(isinstance(i, str) for i in ids) else None


def not_listed_error(model: str, shown_url: str, ids: list[str]) -> JudgeConfigError:
    """The error for a model the endpoint does not list, naming the models it does."""
    served = ", ".join(sorted(ids)[:_SHOWN]) + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")
    return JudgeConfigError(
        f"The judge endpoint {shown_url} does not serve model {model!r}; it serves: {served or '(none)'}. Set "
        "MGM_JUDGE_MODEL or pass model= to one of these. (Some servers answer any model name with the model they "
        "loaded, which would judge under a name that is not the judge's; Judge(check_model=False) skips this check.)",
        served=served or "(none)",
    )


class Listing(NamedTuple):
    """What the model check learnt: did the endpoint answer, and the ids it lists (None: no listing, not checked)."""

    answered: bool
    ids: list[str] | None


async def check_served_model(client: openai.AsyncOpenAI, settings: JudgeSettings, *, reached: bool) -> Listing:
    """List the endpoint's models and refuse a model it does not list. Without a listing (HTTP 404, 405, 501) the
    name cannot be checked; a listing that fails otherwise is logged and skipped (the calls will say more).
    ``reached``: has a call to the endpoint succeeded before (if not, an unreachable endpoint is a config error)."""
    model, shown = settings.model, settings.shown_url
    try:
        raw = await within_deadline(client.models.with_raw_response.list(), settings.timeout_s)
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            raise settings.redacted(config_error(exc, model=model, base_url=settings.base_url, available=None)) from None
        if exc.status_code not in NO_LISTING:
            log.warning("listing the models of %s failed (HTTP %s); model %r not checked", shown, exc.status_code, model)
        return Listing(answered=False, ids=None)
    except openai.APIConnectionError as exc:
        if is_unreachable(exc) and not reached:
            raise settings.redacted(unreachable_error(exc, base_url=settings.base_url)) from None
        log.warning("listing the models of %s failed (%s); model %r not checked", shown, exc, model)
        return Listing(answered=False, ids=None)
    ids = read_model_ids(raw.http_response)
    if ids is None:
        log.warning("the model listing of %s is not OpenAI's {\"data\": [...]}; model %r not checked", shown, model)
    elif not is_listed(model, ids):
        raise settings.redacted(not_listed_error(model, shown, ids))
    return Listing(answered=True, ids=ids)


class ReportedModels:
    """The model ids a Judge's replies reported, counted; one warning the first time one is another model."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._warned = False

    def record(self, requested: str, reported: str, replies: int = 1) -> bool:
        """Count a reply's model id (``replies`` replies naming it); True when it names another model than the one
        asked for."""
        other = not same_model(requested, reported)
        with self._lock:
            self._counts[reported] += replies
            warn, self._warned = other and not self._warned, self._warned or other
        if warn:
            log.warning(
                "asked for model %r, the endpoint answered with %r: the numbers come from %r (JudgeReply.model_mismatch "
                "marks each such reply; Judge.reported_models counts them)", requested, reported, reported,
            )
        return other

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
