"""How a Judge in batch mode submits its calls: ``BatchOptions``, held in ``JudgeSettings.batch``; and
``BatchFilesWritten``, where ``files_dir`` without ``command`` stops a run. Imports nothing of the judge, so the
settings can hold the options without importing batch mode's machinery. Those with a flag (``declaration.setting``)
are the ``mgm evaluate --batch-*`` flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..declaration import setting

OPENAI_MAX_BATCH_LINES = 50_000  # the most requests OpenAI takes in one batch input file


class BatchOptions(BaseModel):
    """Batch mode's settings.

    - ``poll_s``: seconds between two looks at a submitted batch's status;
    - ``quiet_s``: the calls waiting are submitted as one batch once no new call has come for this long (and for
      several turns of the event loop);
    - ``completion_window``: the Batches API's window (OpenAI takes ``"24h"``);
    - ``max_resubmits``: how many times the lines an expired batch left undone are asked again in a new batch;
      after that they are the requests' ``batch_expired`` errors;
    - ``response_mode``: the mode structured answers are asked in when the endpoint's is not known yet: batch mode
      never probes (a rejected mode would cost a whole batch round), so set it for an endpoint that refuses
      OpenAI's ``json_schema`` (llama-cpp-python's server: ``json_object``);
    - ``max_lines``: requests per batch at most (OpenAI's limit); in batch mode a Judge lets this many requests wait
      at once (its ``max_concurrency``);
    - ``files_dir`` and ``command``: no Batches API; each batch's input file is written to ``files_dir`` and
      ``command`` (e.g. ``"vllm run_batch -i {input} -o {output} --model Qwen/Qwen2.5-7B-Instruct"``) is run to
      make its output file; without ``command`` the run stops saying what to run, and a rerun reads the output.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    poll_s: float = setting(30.0, "seconds between looks at a submitted batch", flag="--batch-poll-s", metavar="S", gt=0)
    quiet_s: float = Field(0.05, ge=0)
    completion_window: str = "24h"
    max_resubmits: int = Field(2, ge=0)
    response_mode: Literal["json_schema", "json_object", "text"] = "json_schema"
    max_lines: int = Field(OPENAI_MAX_BATCH_LINES, ge=1)
    files_dir: Path | None = setting(None, "batch mode without the Batches API: write the batch files here, for "
                                     "vLLM's run_batch (implies --batch)", flag="--batch-dir", metavar="DIR")
    command: str | None = setting(None, "run this on each batch file, {input} and {output} replaced by their paths, "
                                  "e.g. 'vllm run_batch -i {input} -o {output} --model M' (default: stop, saying what to "
                                  "run)", flag="--batch-command", metavar="CMD")


class BatchFilesWritten(RuntimeError):
    """Batch mode without the Batches API and without a command: the input file is written; run the batch runner on
    it, then run again to read its output."""
