"""Batch mode: a Judge's calls answered through batch files (OpenAI's Batches API, or a command such as vLLM's
``run_batch``) instead of one HTTP call each.

``options`` (``BatchOptions``, ``BatchFilesWritten``) imports nothing of the judge: ``JudgeSettings`` holds the
options. ``sender`` (``BatchSender``, ``batch_settings``: what the ``Judge`` uses), ``files`` (the JSONL lines),
``runners`` (the Batches API or a command) and ``store`` (which batch each call is in) need the settings, so this
package exports only the options: the ``Judge`` imports ``batch.sender`` itself, and importing the settings never
runs batch mode's machinery (no import circle).
"""

from .options import OPENAI_MAX_BATCH_LINES, BatchFilesWritten, BatchOptions

__all__ = ["OPENAI_MAX_BATCH_LINES", "BatchFilesWritten", "BatchOptions"]
