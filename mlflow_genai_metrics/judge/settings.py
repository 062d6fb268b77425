"""A Judge's settings: the arguments and the environment, read once, validated, frozen.

``JudgeSettings.resolve`` reads ``MGM_JUDGE_MODEL``, ``MGM_JUDGE_BASE_URL`` (else ``OPENAI_BASE_URL``, else
OpenAI), ``MGM_JUDGE_CONTEXT``, ``OPENAI_API_KEY`` and ``MGM_CACHE_DIR`` once; nothing below the ``Judge`` reads the environment again.
Bad settings are refused here, before any call.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ..sqlite_store import default_cache_dir
from .batch import BatchOptions
from .errors import JudgeConfigError, redact, redact_url, url_secrets
from .http import HttpBackend
from .records import Prices

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_CACHE", "JudgeSettings", "environment_context_window", "is_loopback"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CACHE: Any = object()  # sentinel: "use the default cache dir"; None means no cache
MIN_SECRET_CHARS = 8  # the shortest key or password searched for in answers (``JudgeSettings.redact_reply``)
_LOCAL_KEY = "local"  # what a loopback server gets when no key is set: it checks none, the openai client wants one


def is_loopback(base_url: str) -> bool:
    """Is the endpoint on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)?"""
    host = urlparse(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def environment_context_window(model: str | None, environ: Mapping[str, str] | None = None) -> int | None:
    """``MGM_JUDGE_CONTEXT``: the context window, in tokens, of the model ``MGM_JUDGE_MODEL`` names (``mgm serve``
    prints both), so it holds for a judge of that model, or of any model when ``MGM_JUDGE_MODEL`` is unset.

    None when it is unset or names another model's window; ``ValueError`` naming the variable when it is not a
    positive whole number.
    """
    env = os.environ if environ is None else environ
    text = env.get("MGM_JUDGE_CONTEXT", "").strip()
    named = env.get("MGM_JUDGE_MODEL")
    if not text or (model and named and model != named):
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"MGM_JUDGE_CONTEXT must be the judge's context window in tokens (a positive whole number), not {text!r}")
    return int(text)


def _check_base_url(url: str) -> None:
    """Refuse a base URL no call can go to (no http(s) scheme, no host, a port out of range) before any call: the
    client would otherwise fail every row, after its retries, with a bare "Connection error"."""
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(
            f"the judge's base URL {redact_url(url)!r} is not an http:// or https:// URL with a host and a valid port "
            "(e.g. http://127.0.0.1:8080/v1): set MGM_JUDGE_BASE_URL or pass base_url="
        )


def _environment_key(environ: Mapping[str, str], base_url: str) -> str:
    return environ.get("OPENAI_API_KEY") or (_LOCAL_KEY if is_loopback(base_url) else "")


class JudgeSettings(BaseModel):
    """Everything a ``Judge`` is configured with (see ``Judge`` for what each setting does).

    Frozen: a Judge with other settings is a new Judge (``Judge.with_limits``). Pickled, it carries ``api_key``
    only when the key was passed explicitly (``api_key_given``); otherwise the process that unpickles it reads its
    own ``OPENAI_API_KEY``. Its ``repr`` shows neither the key nor the credentials of the base URL.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key: SecretStr = Field(repr=False)
    api_key_given: bool = False
    temperature: float = 0.0
    seed: int | None = None
    max_concurrency: int = Field(8, ge=1)
    max_requests_per_s: float | None = Field(None, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(6, ge=0)
    cache_dir: Path | None = None
    prices: Prices | None = None
    max_tokens: int | None = Field(None, gt=0)
    context_window: int | None = Field(None, gt=0)
    backoff_initial_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    max_retry_after_s: float = Field(300.0, ge=0)
    progress: bool | None = None
    reask_invalid: bool = False
    check_model: bool = True
    max_calls: int | None = Field(None, ge=0)
    max_cost_usd: float | None = Field(None, ge=0)
    batch: BatchOptions | None = None  # batch mode: calls go through batch files (see ``batching``), not one by one
    http_backend: HttpBackend = "auto"  # the HTTP library under the openai client (see ``http``); changes no answer

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("prices", mode="before")
    @classmethod
    def _coerce_prices(cls, value: Any) -> Prices | None:
        return Prices.coerce(value)

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> JudgeSettings:
        if self.max_cost_usd is not None and self.prices is None:
            raise ValueError("max_cost_usd needs prices (USD per million tokens) to turn tokens into cost: pass prices=")
        return self

    @classmethod
    def resolve(
        cls,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None | Any = DEFAULT_CACHE,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> JudgeSettings:
        """The settings for these arguments, what is left out taken from ``environ`` (default: ``os.environ``).

        Raises ``ValueError`` naming what to set when there is no model, or no key for an endpoint that is not on
        this machine, and ``pydantic.ValidationError`` (a ``ValueError``) for a setting out of range.
        """
        env = os.environ if environ is None else environ
        model = model or env.get("MGM_JUDGE_MODEL")
        if not model:
            raise ValueError(
                "No judge model given: pass Judge(model=...) or set MGM_JUDGE_MODEL "
                "(e.g. gpt-4o-mini, or the model id a local server reports at /v1/models)."
            )
        url = (base_url or env.get("MGM_JUDGE_BASE_URL") or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        _check_base_url(url)
        key = api_key or _environment_key(env, url)
        if not key:
            raise ValueError(
                f"No API key for the judge endpoint {redact_url(url)}: set OPENAI_API_KEY or pass api_key=. "
                "(A server on 127.0.0.1 needs none.)"
            )
        if cache_dir is DEFAULT_CACHE:
            cache_dir = default_cache_dir(env)
        if options.get("context_window") is None:
            options["context_window"] = environment_context_window(model, env)
        return cls(model=model, base_url=url, api_key=SecretStr(key), api_key_given=api_key is not None,
                   cache_dir=cache_dir, **options)

    def with_limits(self, *, max_concurrency: int, max_requests_per_s: float | None) -> JudgeSettings:
        """These settings with other limits, validated."""
        return self.replaced(max_concurrency=max_concurrency, max_requests_per_s=max_requests_per_s)

    def replaced(self, **changes: Any) -> JudgeSettings:
        """These settings with ``changes``, validated."""
        return self.model_validate({**self._fields(), **changes})

    def _fields(self) -> dict[str, Any]:
        # Not dict(self): the instance dict also holds the cached properties.
        return {name: getattr(self, name) for name in type(self).model_fields}

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        fields = self._fields()
        if not self.api_key_given:
            fields["api_key"] = None  # read from this process's environment: the receiving one reads its own
        return _unpickled, (fields,)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, self.shown_url if name == "base_url" else value

    @property
    def key(self) -> str:
        """The API key sent."""
        return self.api_key.get_secret_value()

    @functools.cached_property  # asked on every request (the cache key): worked out once
    def is_loopback(self) -> bool:
        return is_loopback(self.base_url)

    @property
    def shown_url(self) -> str:
        """The base URL as messages, logs and ``repr`` show it: credentials in it replaced by ``***``."""
        return redact_url(self.base_url)

    @property
    def endpoint_label(self) -> str:
        """The endpoint as the signature shows it: the host, with loopback servers all called ``localhost``."""
        if self.is_loopback:
            return "localhost"
        return urlparse(self.base_url).hostname or self.shown_url

    @functools.cached_property
    def cache_endpoint(self) -> str:
        """The endpoint as cache keys see it: a loopback server's port changes from run to run (``LocalModelServer``
        picks a free one), the model behind the same model id does not; nor do credentials in the URL."""
        if self.is_loopback:
            return "localhost" + (urlparse(self.base_url).path or "")
        return self.shown_url

    def redact(self, text: str) -> str:
        """``text`` without the API key or the credentials of the base URL."""
        text = redact_url(text.replace(self.base_url, self.shown_url))
        for secret in (self.key, *url_secrets(self.base_url)):
            text = redact(text, secret)
        return text

    @functools.cached_property
    def _stored_secrets(self) -> tuple[str, ...]:
        # Under 8 characters a "secret" is a placeholder ("local", vLLM's "EMPTY") or would match ordinary words.
        found = {self.key, *url_secrets(self.base_url)}
        return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True))

    def redact_reply(self, text: str) -> str:
        """``text`` (what an endpoint answered: content, refusal, model id) with the API key and the base URL's
        credentials, wherever they appear whole, replaced by ``***``, before it is parsed, cached or stored. Unlike
        ``redact`` (for error messages, where servers echo keys in part) it leaves other text alone: an answer's
        words must not be cut by a run of the key's characters."""
        for secret in self._stored_secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def redacted(self, error: JudgeConfigError) -> JudgeConfigError:
        """``error`` with its message redacted."""
        return JudgeConfigError(self.redact(str(error)), status_code=error.status_code)


def _unpickled(fields: dict[str, Any]) -> JudgeSettings:
    if fields["api_key"] is None:
        fields = {**fields, "api_key": SecretStr(_environment_key(os.environ, fields["base_url"]))}
    return JudgeSettings.model_validate(fields)
