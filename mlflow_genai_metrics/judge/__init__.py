"""The judge engine: typed questions to any OpenAI-compatible chat endpoint, with retries, concurrency,
response-mode fallback, an on-disk cache and usage accounting. Imports nothing from MLflow."""

from .answers import AnswerParseError, ResponseMode, parse_answer
from .batch import BatchFilesWritten, BatchOptions
from .cache import JudgeCache, StoreUnreadable, cache_key, default_cache_dir
from .client import DEFAULT_BASE_URL, Judge
from .errors import JudgeConfigError, redact, redact_url
from .modes import EndpointModes
from .records import ErrorKind, JudgeError, JudgeReply, JudgeRequest, Message, Prices, TextAnswer, Usage
from .settings import JudgeSettings

__all__ = [
    "DEFAULT_BASE_URL",
    "AnswerParseError",
    "BatchFilesWritten",
    "BatchOptions",
    "EndpointModes",
    "ErrorKind",
    "Judge",
    "JudgeCache",
    "JudgeConfigError",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "JudgeSettings",
    "Message",
    "Prices",
    "ResponseMode",
    "StoreUnreadable",
    "TextAnswer",
    "Usage",
    "cache_key",
    "default_cache_dir",
    "parse_answer",
    "redact",
    "redact_url",
]
