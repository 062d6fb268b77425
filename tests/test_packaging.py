"""What the package ships and needs: the scripted server's dependencies are an extra, and the study application
stands on the library, not on the command line."""

from __future__ import annotations

import functools
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# A Python without the `testing` extra: importing starlette or uvicorn fails as if they were not installed.
WITHOUT_SERVER_DEPENDENCIES = "import sys\nsys.modules['starlette'] = None\nsys.modules['uvicorn'] = None\n"


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name for r in requirements}


def test_the_server_dependencies_are_the_testing_extra_not_hard_dependencies():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert not {"starlette", "uvicorn"} & names(project["dependencies"])
    assert {"starlette", "uvicorn"} <= names(project["optional-dependencies"]["testing"])
    assert "mlflow_genai_metrics[testing]" in project["optional-dependencies"]["dev"]


def test_the_package_and_its_testing_module_import_without_the_server_dependencies():
    done = run_python(
        WITHOUT_SERVER_DEPENDENCIES
        + "import mlflow_genai_metrics\n"
        + "from mlflow_genai_metrics.testing import Fault, Reply, ScriptedJudgeServer, SummarizationJudgeScript\n"
        + "server = ScriptedJudgeServer(SummarizationJudgeScript())\n"
        + "print(Reply('{}').content, Fault.server_error().status, server.request_count)\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["{}", "500", "0"]


def test_starting_the_scripted_server_without_them_names_the_extra_to_install():
    done = run_python(
        WITHOUT_SERVER_DEPENDENCIES
        + "from mlflow_genai_metrics.testing import ScriptedJudgeServer\n"
        + "try:\n    ScriptedJudgeServer().start()\n"
        + "except ImportError as error:\n    print(error)\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'pip install "mlflow_genai_metrics[testing]"' in done.stdout and "starlette" in done.stdout


def test_the_study_reads_its_articles_without_the_command_line(tmp_path):
    articles = tmp_path / "articles.jsonl"
    articles.write_text('{"text": "The council approved the budget."}\n')
    done = run_python(
        "import sys\nfrom mlflow_genai_metrics.study import load_articles\n"
        f"print(len(load_articles({str(articles)!r})), 'mlflow_genai_metrics.cli' in sys.modules)"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "False"]


@functools.cache  # read once for both tests
def python_each_module_needs() -> dict[str, tuple[int, int]]:
    """The oldest Python 3 that runs each module of the package (by path inside it), as vermin finds it from the code:
    the standard library members, syntax and keyword arguments each version added."""
    import vermin

    config = vermin.Config()
    config.set_eval_annotations(True)  # `from __future__ import annotations` everywhere: annotations count too
    package = PYPROJECT.parent / "mlflow_genai_metrics"
    return {str(path.relative_to(package)): vermin.detect(path.read_text(encoding="utf-8"), config, str(path))[1] for path in package.rglob("*.py")}


def test_requires_python_is_the_oldest_python_the_code_runs_on():
    from packaging.specifiers import SpecifierSet

    required = SpecifierSet(tomllib.loads(PYPROJECT.read_text())["project"]["requires-python"])
    needs = python_each_module_needs()
    major, minor = max(needs.values())
    modules = ", ".join(sorted(name for name, version in needs.items() if version == (major, minor)))
    assert f"{major}.{minor}" in required, f"the code needs Python {major}.{minor} ({modules}); requires-python says {required}"
    assert f"{major}.{minor - 1}" not in required, f"requires-python {required} admits Python {major}.{minor - 1}, which {modules} cannot run on"


def test_the_version_check_sees_what_the_pipeline_needs():
    assert python_each_module_needs()["summarization/pipeline.py"] >= (3, 11)  # asyncio.TaskGroup, BaseExceptionGroup


def _clean_copy(folder):
    """A copy of what a clean checkout has to build from (no build/ left over from another build to ship stale files)."""
    import shutil

    project, source = PYPROJECT.parent, folder / "project"
    shutil.copytree(project / "mlflow_genai_metrics", source / "mlflow_genai_metrics", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(project / "scripts", source / "scripts")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(project / name, source / name)
    return source


def test_the_editable_install_prints_no_wall_and_names_the_root_in_a_pth_file(tmp_path):
    """``./run``'s ``pip install -e`` printed setuptools' "Editable installation ... Please be careful with folders in
    your working directory" wall at every set-up (its import hook, for a package at the root without ``package-dir``);
    a .pth file naming the root installs it now, and nothing is printed."""
    import sysconfig

    source = _clean_copy(tmp_path)
    # --ignore-installed: pip would otherwise uninstall this environment's own install of the package first
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-e", str(source), "--no-deps", "-q", "--ignore-installed",
                           "--prefix", str(tmp_path / "prefix")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(Path(sysconfig.get_paths()["purelib"]).glob("__editable__.mlflow_genai_metrics-*.pth"))  # this environment's is still there
    said = [line for line in (done.stdout + done.stderr).splitlines() if "Warning" in line or "Editable" in line or "!!" in line]
    assert said == []
    [pth] = (tmp_path / "prefix").rglob("__editable__*.pth")
    assert pth.read_text().strip() == str(source.resolve())


def test_the_wheel_ships_the_package_and_not_the_development_scripts(tmp_path):
    import zipfile

    project = PYPROJECT.parent
    source = _clean_copy(tmp_path)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "-w", str(tmp_path / "wheel"), "--no-deps", "-q"],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    modules = {str(path.relative_to(source)) for path in (source / "mlflow_genai_metrics").rglob("*.py")}
    assert shipped == modules  # every module of the package, and nothing else
    scripts = sorted(path.name for path in (project / "scripts").glob("*.py"))
    assert {"train_grounding.py", "serve_judge.py"} <= set(scripts)
    assert not [name for name in shipped if name.rsplit("/", 1)[-1] in scripts or name.startswith("scripts/")]
    data = set(zipfile.ZipFile(wheel).namelist())  # the grounding check's model and word vectors travel with it
    assert {"mlflow_genai_metrics/grounding/grounding-v2.json", "mlflow_genai_metrics/grounding/word-vectors-v1.npz"} <= data
