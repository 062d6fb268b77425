"""Every import path README and docs have shown still works: the moved modules' old paths re-export the same
objects for one release (``mlflow_genai_metrics.traditional``, ``mlflow_genai_metrics.sacrebleu_metrics``)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# Old path -> (the names docs, README, benchmarks and earlier releases import from it, where they live now).
MOVED = {
    "mlflow_genai_metrics.traditional": (
        ["traditional_metrics", "TraditionalResult", "traditional_signatures", "corpus_scores", "paired_corpus_difference",
         "statistics_column", "reference_key", "ROUGE_TYPES", "TRADITIONAL_COLUMNS"],
        "mlflow_genai_metrics.reference",
    ),
    "mlflow_genai_metrics.sacrebleu_metrics": (
        ["corpus_score", "segment_scores", "sacrebleu_signatures", "rouge_signature", "check_sacrebleu", "PRIVATE_CALLS",
         "CORPUS_METRICS"],
        "mlflow_genai_metrics.reference",
    ),
}
TEXT_NAMES = ["split_sentences", "lcs_length"]  # were in traditional, now in mlflow_genai_metrics.text


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_re_exports_the_same_objects_as_the_new_one(old):
    names, new = MOVED[old]
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert {name: getattr(before, name) is getattr(after, name) for name in names} == dict.fromkeys(names, True)
    assert set(names) <= set(before.__all__) and all(hasattr(before, name) for name in before.__all__)
    assert "kept for one release" in before.__doc__.lower() and "mlflow_genai_metrics.reference" in before.__doc__


def test_the_text_utilities_are_still_importable_from_traditional():
    import mlflow_genai_metrics.text as text
    import mlflow_genai_metrics.traditional as traditional

    assert all(getattr(traditional, name) is getattr(text, name) for name in TEXT_NAMES)


def test_the_top_level_and_spark_paths_are_unchanged():
    from mlflow_genai_metrics import TraditionalResult, traditional_metrics
    from mlflow_genai_metrics.reference import TraditionalResult as moved, traditional_metrics as moved_metrics

    assert (TraditionalResult, traditional_metrics) == (moved, moved_metrics)
    pytest.importorskip("pyspark", reason="the Spark path needs pyspark (pip install -e '.[spark]')")
    from mlflow_genai_metrics.spark import SparkSummarizationResult, judge_summaries_spark  # noqa: F401


def test_the_text_module_and_the_reference_metrics_import_nothing_from_mlflow_or_spark():
    code = (
        "import sys, mlflow_genai_metrics.text, mlflow_genai_metrics.reference, mlflow_genai_metrics.traditional, "
        "mlflow_genai_metrics.sacrebleu_metrics; print(sorted({m.split('.')[0] for m in sys.modules} & {'mlflow', 'pyspark'}))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
