"""Test support that ships with the package: a scripted OpenAI-compatible judge server for deterministic
verdicts and fault injection (used by this project's tests and benchmarks, and usable in yours)."""

from .scripted_server import Fault, LoggedRequest, Reply, ScriptedJudgeServer, ScriptedRequest, count_tokens

__all__ = ["Fault", "LoggedRequest", "Reply", "ScriptedJudgeServer", "ScriptedRequest", "count_tokens"]
