"""The judge engine: typed questions to any OpenAI-compatible chat endpoint, with retries, concurrency,
response-mode fallback, an on-disk cache and usage accounting. Imports nothing from MLflow.

The rest of the package imports the judge from here only, never its modules (``tests/test_layout.py``): the second
group of names below is what ``summarization/``, ``tracking/``, ``cli/`` and ``spark/`` use of its internals."""

from ..sqlite_store import StoreUnreadable, default_cache_dir
from .answers import AnswerParseError, ResponseMode, parse_answer
from .batch import BatchFilesWritten, BatchOptions
from .budget import BudgetExhausted, drawing_from
from .cache import CACHE_FILE, JudgeCache, cache_key, canonical_json
from .client import Judge
from .declaration import Declared, declared, setting
from .errors import JudgeConfigError, redact, redact_url
from .examples import CorrectedVerdict, ExampleSet, text_key
from .models import same_model
from .modes import EndpointModes
from .preflight import Preflight, preflight
from .records import USAGE_SUMS, ErrorKind, JudgeError, JudgeReply, JudgeRequest, Message, Prices, TextAnswer, Usage
from .runner import older_objects_set_aside, run_sync
from .settings import DEFAULT_BASE_URL, JudgeSettings, environment_context_window
from .tokens import CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, estimate_tokens

__all__ = [
    "DEFAULT_BASE_URL",
    "AnswerParseError",
    "BatchFilesWritten",
    "BatchOptions",
    "CorrectedVerdict",
    "EndpointModes",
    "ExampleSet",
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
    "CACHE_FILE",
    "cache_key",
    "canonical_json",
    "default_cache_dir",
    "parse_answer",
    "redact",
    "redact_url",
    "setting",
    # for the package's other parts
    "Declared",
    "CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD_TOKENS",
    "USAGE_SUMS",
    "BudgetExhausted",
    "Preflight",
    "declared",
    "drawing_from",
    "environment_context_window",
    "estimate_tokens",
    "text_key",
    "preflight",
    "older_objects_set_aside",
    "run_sync",
    "same_model",
]
