"""The judge's preflight: one cheap request (the endpoint's model listing) before any row, so that a model the
endpoint does not serve, a key it refuses or an endpoint that does not answer is a ``JudgeConfigError`` in seconds,
not a failure on every row; and ``Preflight``, that check once for one evaluation, its outcome shared by every row."""

from __future__ import annotations

import threading

import openai

from .client import Judge
from .errors import JudgeConfigError
from .models import check_served_model
from .runner import run_sync


class Preflight:
    """The judge's preflight, once for the rows of one evaluation (a new evaluation makes a new one): rows arriving
    together wait for the one check, then share its outcome; a configuration error is raised for every later row, with
    no further call."""

    def __init__(self, judge: Judge | None, *, needed: bool = True):
        self.judge = judge
        self.needed = needed and judge is not None
        self._lock = threading.Lock()
        self._outcome: JudgeConfigError | bool = not self.needed

    def check(self) -> None:
        with self._lock:
            if isinstance(self._outcome, JudgeConfigError):
                raise self._outcome
            if self._outcome:
                return
            try:
                preflight(self.judge)
            except JudgeConfigError as error:
                self._outcome = error
                raise
            self._outcome = True

    def failed(self, error: JudgeConfigError) -> None:
        """A row's call found the configuration refused: every later row fails at once."""
        with self._lock:
            self._outcome = error


def preflight(judge: Judge) -> None:
    """One cheap request before any row: the endpoint's model listing. A model it does not serve, a key it refuses
    or an endpoint that does not answer raises ``JudgeConfigError`` in seconds (``Judge(check_model=False)`` skips it)."""
    if not judge.check_model:
        return
    settings = judge.settings

    async def check() -> None:
        client = openai.AsyncOpenAI(api_key=settings.key, base_url=settings.base_url, timeout=settings.timeout_s, max_retries=0)
        try:
            await check_served_model(client, settings, reached=False)
        finally:
            await client.close()

    run_sync(check())
