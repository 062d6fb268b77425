"""A Judge's settings, each declared once (``JudgeSettings``): the arguments and the environment, read once
(``resolve``: nothing below the ``Judge`` reads the environment again), validated before any call, frozen."""

from __future__ import annotations

import functools
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator, model_validator

from ..sqlite_store import default_cache_dir
from .batch import BatchOptions
from .declaration import setting
from .errors import JudgeConfigError, json_unescaped, redact, redact_url, url_secrets
from .http import HttpBackend
from .records import Prices

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CACHE: Any = type("DefaultCache", (), {"__repr__": lambda self: "<default>"})()  # the default cache dir; None: no cache
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


def mlflow_model_uri(model: str) -> str:
    """A model as MLflow's judges name it, ``openai:/gpt-4o-mini``, is the model ``gpt-4o-mini`` (the judge speaks the
    OpenAI protocol, whatever serves it); another provider's prefix is refused, saying what to do instead."""
    provider, separator, name = model.partition(":/")
    if not separator or "/" in provider or " " in provider:
        return model
    if provider == "openai" and name:
        return name
    raise ValueError(
        f"judge model {model!r}: this judge speaks the OpenAI protocol, so it takes openai:/<model> or a bare model id; "
        f"for {provider!r}, point base_url= at an OpenAI-compatible endpoint that serves the model (many providers have one, "
        "as do vLLM, llama.cpp and Ollama) and pass the model id"
    )


def environment_context_window(model: str | None, environ: Mapping[str, str] | None = None) -> int | None:
    """``MGM_JUDGE_CONTEXT``: the context window, in tokens, of the model ``MGM_JUDGE_MODEL`` names (``mgm serve``
    prints both), so it holds for a judge of that model, or of any model when ``MGM_JUDGE_MODEL`` is unset.

    None when it is unset or names another model's window; ``ValueError`` naming the variable when it is not a
    positive whole number.
    """
    env = os.environ if environ is None else environ
    text = env.get("MGM_JUDGE_CONTEXT", "").strip()
    named = env.get("MGM_JUDGE_MODEL", "").strip()
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
    parts = urlsplit(base_url)
    if parts.username or parts.password:  # the URL's credentials are sent, never beside a key (``resolve``)
        return _LOCAL_KEY
    return environ.get("OPENAI_API_KEY") or (_LOCAL_KEY if is_loopback(base_url) else "")


class JudgeSettings(BaseModel):
    """Everything a ``Judge`` is configured with, each setting declared once (``declaration.setting``). One whose
    default is None but whose type is not optional (``model``, ``base_url``, ``api_key``) is read by ``resolve``.

    Frozen: a Judge with other settings is a new Judge (``Judge.with_limits``). Pickled, it carries ``api_key``
    only when the key was passed explicitly (``api_key_given``); otherwise the process that unpickles it reads its
    own ``OPENAI_API_KEY``. Its ``repr`` shows neither the key nor the credentials of the base URL.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = setting(None, "the model id requests name; checked against the endpoint's listing before the first call",
                         env="MGM_JUDGE_MODEL", flag="--judge-model", spec=True, positional=True, min_length=1)
    base_url: str = setting(None, "the OpenAI-compatible endpoint (default: $MGM_JUDGE_BASE_URL, else $OPENAI_BASE_URL, "
                            f"else {DEFAULT_BASE_URL})", env="MGM_JUDGE_BASE_URL", flag="--judge-base-url", spec=True,
                            positional=True, min_length=1)
    api_key: SecretStr = setting(None, "the key sent; a server on a loopback address needs none",
                                 env="OPENAI_API_KEY", positional=True, repr=False)
    temperature: float = setting(0.0, "sent with every request; part of the judge's signature", spec=True)
    seed: int | None = setting(None, "sent with every request; part of the judge's signature", spec=True)
    max_tokens: int | None = setting(None, "the completion limit of a request that names none; part of the signature",
                                     spec=True, gt=0)
    context_window: int | None = setting(
        None, "the model's context window in tokens: longer sources are split (default: $MGM_JUDGE_CONTEXT, which mgm "
        "serve prints, when $MGM_JUDGE_MODEL is unset or names this model; else none: nothing is split)",
        env="MGM_JUDGE_CONTEXT", flag="--judge-context", metavar="TOKENS", spec=True, gt=0)
    max_concurrency: int = setting(8, "HTTP calls in flight at once, across every thread and event loop using the judge "
                                   "(in batch mode: requests waiting for one batch)", flag="--concurrency", spec=True, ge=1)
    max_requests_per_s: float | None = setting(None, "calls started per second, retries included; no limit unless set",
                                               spec=True, gt=0)
    timeout_s: float = setting(60.0, "the total deadline of one HTTP attempt, in seconds", spec=True, gt=0)
    max_retries: int = setting(6, "retries of one call before its request gets an error", spec=True, ge=0)
    prices: Prices | None = setting(
        None, "USD per million prompt, completion (and cached prompt) tokens, e.g. 0.15,0.60: turns usage into cost; "
        "no cost unless set", flag="--prices", metavar="IN,OUT[,CACHED]", spec=True)
    check_model: bool = setting(True, "list the endpoint's models before the first call; refuse a model not served", spec=True)
    cache_dir: Path | None = setting(DEFAULT_CACHE, "where answers are cached (its variable unset: in the user cache dir); "
                                     "None turns the cache off", env="MGM_CACHE_DIR")
    backoff_initial_s: float = setting(1.0, "the first wait between retries, doubled at each (with full jitter)", ge=0)
    backoff_max_s: float = setting(60.0, "the longest wait between retries", ge=0)
    max_retry_after_s: float = setting(300.0, "the longest Retry-After a 429 may make it wait", ge=0)
    progress: bool | None = setting(None, "the progress bar of ask_many: None shows it on a terminal only")
    reask_invalid: bool = setting(False, "ask again the cached requests whose replies gave no answer")
    max_calls: int | None = setting(None, "HTTP calls the judge may make at most; requests past it get a budget error; "
                                    "no limit unless set", flag="--max-calls", ge=0)
    max_cost_usd: float | None = setting(None, "what the judge may spend at most, in USD; needs prices; requests past it "
                                         "get a budget error", flag="--max-cost-usd", ge=0)
    batch: BatchOptions | None = setting(
        None, "ask through batch files, not one call at a time: OpenAI's Batches API (half the price; answers within 24 h; "
        "a rerun resumes the batches), or a command such as vLLM's run_batch (BatchOptions; True: its defaults)",
        flag="--batch")
    http_backend: HttpBackend = setting("auto", "the HTTP library under the openai client: 'auto' (aiohttp on the "
                                        "judge's own loop, httpx on a caller's), 'httpx' or 'aiohttp'; changes no answer")
    api_key_given: bool = False  # worked out by resolve, not a setting: whether the key travels in a pickle

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
    def resolve(cls, model: str | None = None, base_url: str | None = None, api_key: str | None = None, *,
                environ: Mapping[str, str] | None = None, **options: Any) -> JudgeSettings:
        """The settings for these arguments, what is left out taken from ``environ`` (default: ``os.environ``).

        Raises ``ValueError`` naming what to set when there is no model, or no key for an endpoint that is not on
        this machine, and ``pydantic.ValidationError`` (a ``ValueError``) for a setting out of range.
        """
        env = os.environ if environ is None else environ
        model = model or env.get("MGM_JUDGE_MODEL", "").strip()  # blank: unset, as a shell leaves it
        if not model:
            raise ValueError(
                "No judge model given: pass Judge(model=...) or set MGM_JUDGE_MODEL "
                "(e.g. gpt-4o-mini, or the model id a local server reports at /v1/models)."
            )
        model = mlflow_model_uri(model)
        url = (base_url or env.get("MGM_JUDGE_BASE_URL", "").strip() or env.get("OPENAI_BASE_URL", "").strip()
               or DEFAULT_BASE_URL).rstrip("/")
        _check_base_url(url)
        parts = urlsplit(url)
        key = api_key or _environment_key(env, url)
        if parts.username or parts.password:
            # HTTP sends a URL's credentials as the Authorization header, the one the API key travels in: they would
            # replace the key without a word, and a 401 would then blame a key that was never sent.
            given = "api_key=" if api_key else "OPENAI_API_KEY" if env.get("OPENAI_API_KEY") else None
            if given:
                raise ValueError(
                    f"the judge's base URL {redact_url(url)} carries credentials and {given} gives a key: HTTP would send "
                    "the URL's credentials in place of the key (one Authorization header carries one); give the key "
                    "alone with a base URL without credentials, or the URL's credentials alone (unset OPENAI_API_KEY)"
                )
            key = _LOCAL_KEY  # never sent: the URL's credentials are
        if not key:
            raise ValueError(
                f"No API key for the judge endpoint {redact_url(url)}: set OPENAI_API_KEY or pass api_key=. "
                "(A server on 127.0.0.1 needs none.)"
            )
        if options.get("cache_dir", DEFAULT_CACHE) is DEFAULT_CACHE:
            options["cache_dir"] = default_cache_dir(env)
        if options.get("context_window") is None:
            options["context_window"] = environment_context_window(model, env)
        return cls(model=model, base_url=url, api_key=SecretStr(key), api_key_given=api_key is not None, **options)

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
        return _unpickled, (type(self), fields)

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
        """The endpoint as the signature shows it: the host, its port when not the scheme's default (two servers on
        one machine are two judges) and its path unless ``/v1`` (a gateway's or a deployment's path picks what
        answers), never credentials; loopback servers are all ``localhost`` (a local server's port changes from run
        to run)."""
        if self.is_loopback:
            return "localhost"
        url = urlparse(self.base_url)
        if not url.hostname:
            return self.shown_url
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        port = url.port if url.port not in (None, {"http": 80, "https": 443}.get(url.scheme)) else None
        path = url.path.rstrip("/")
        return host + (f":{port}" if port else "") + ("" if path in ("", "/v1") else path)

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
        words must not be cut by a run of the key's characters. A secret written with JSON escapes (``\\/``,
        ``\\u002d``), which parsing the answer would undo, is found too: the escapes that change nothing once parsed
        are undone first (``errors.json_unescaped``), in a text that holds a secret."""
        plain = json_unescaped(text) if "\\" in text else text
        if any(secret in plain for secret in self._stored_secrets):
            text = plain
        for secret in self._stored_secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def redacted(self, error: JudgeConfigError) -> JudgeConfigError:
        """``error`` with its message redacted."""
        return JudgeConfigError(self.redact(str(error)), status_code=error.status_code, served=error.served)


def _unpickled(settings_type: type[JudgeSettings], fields: dict[str, Any]) -> JudgeSettings:
    if fields["api_key"] is None:
        fields = {**fields, "api_key": SecretStr(_environment_key(os.environ, fields["base_url"]))}
    return settings_type.model_validate(fields)
