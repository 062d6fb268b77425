"""Kept for one release: ``BatchOptions`` is ``mlflow_genai_metrics.judge.batch.BatchOptions`` (or
``mlflow_genai_metrics.BatchOptions``)."""

from .batch import BatchOptions

__all__ = ["BatchOptions"]
