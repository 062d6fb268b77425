"""Each name has one import path: nothing was released, so the moved modules' old paths are gone (issue 46, 5), and
the top level exports what a user calls and nothing else."""

from __future__ import annotations

import importlib

import pytest

OLD_PATHS = ["mlflow_genai_metrics.traditional", "mlflow_genai_metrics.sacrebleu_metrics", "mlflow_genai_metrics.meta",
             "mlflow_genai_metrics.judge.batch_options"]  # re-exports that were to be kept "for one release": none was made


@pytest.mark.parametrize("old", OLD_PATHS)
def test_a_moved_module_has_one_path(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_spark_path_is_unchanged():
    pytest.importorskip("pyspark", reason="the Spark path needs pyspark (pip install -e '.[spark]')")
    from mlflow_genai_metrics.spark import SparkSummarizationResult, judge_summaries_spark  # noqa: F401


def test_the_top_level_exports_what_a_user_calls_and_nothing_else():
    """About fifteen names, each resolving (the MLflow ones on first use); the rest is each subpackage's."""
    import mlflow_genai_metrics as top

    assert len(top.__all__) <= 16 and len(set(top.__all__)) == len(top.__all__)
    assert {name: hasattr(top, name) for name in top.__all__} == dict.fromkeys(top.__all__, True)


@pytest.mark.parametrize(("name", "home"), [("Usage", "judge"), ("SummarizationResult", "summarization"), ("log_result", "tracking"),
                                          ("traditional_metrics", "reference"), ("summarize", "generate")])
def test_a_name_of_a_subpackage_is_imported_from_it_not_from_the_top_level(name, home):
    """Nothing was released: the re-exports kept "for one release" are gone; each name has one home."""
    import mlflow_genai_metrics as top

    assert hasattr(importlib.import_module(f"mlflow_genai_metrics.{home}"), name)
    with pytest.raises(AttributeError, match=name):
        getattr(top, name)


def test_importing_the_grounding_check_imports_no_other_part(tmp_path):
    """The top level loads its names on first use: the grounding check (its worker process starts with this import)
    brings neither the judge, the statistics, the tables nor MLflow; ``import mlflow_genai_metrics`` then
    ``.Judge`` still gives the judge's class."""
    import subprocess
    import sys

    code = ("import sys, mlflow_genai_metrics.grounding.worker; "
            "print(sorted(m for m in ('openai', 'scipy', 'pandas', 'mlflow', 'mlflow_genai_metrics.judge', 'mlflow_genai_metrics.stats') if m in sys.modules)); "
            "import mlflow_genai_metrics as top; from mlflow_genai_metrics.judge import Judge; print(top.Judge is Judge)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True"]
