"""The package's layout, read from its imports with ``ast`` (nothing is imported): no import circle, nothing outside
``judge/`` reaching into the judge's modules, and no private name taken from another subpackage.

Every import statement counts wherever it is: at module level, under ``if TYPE_CHECKING:`` (a type-only import is
still one module knowing another: a circle of them is a circle of knowledge, and the day one turns into a runtime
import the package stops importing) and inside functions (a deferred import only hides a circle). Importing
``a.b.c`` also runs ``a/b/__init__.py``: a module importing a submodule of a package it is not inside depends on that
package's ``__init__`` too, so ``judge/settings.py`` importing ``judge/batch/options.py`` would close a circle if
``judge/batch/__init__.py`` imported the batch sender, which imports the settings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mlflow_genai_metrics"
SEALED = ("judge",)  # subpackages the rest of the package imports only from their __init__


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name ("pkg.judge" for pkg/judge/__init__.py)
    target: str  # the module imported from
    names: tuple[str, ...]  # the names taken (empty for ``import x``)
    line: int


@dataclass(frozen=True)
class Package:
    """A package's modules, each parsed once: ``paths`` and ``trees`` by dotted name (``pkg.judge`` for
    ``pkg/judge/__init__.py``)."""

    name: str
    paths: dict[str, Path] = field(repr=False)
    trees: dict[str, ast.Module] = field(repr=False)

    @classmethod
    def read(cls, root: Path) -> Package:
        paths = {}
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                parts = (root.name, *path.relative_to(root).with_suffix("").parts)
                paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        return cls(root.name, paths, {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in paths.items()})

    def is_package(self, name: str) -> bool:
        return name in self.paths and self.paths[name].name == "__init__.py"

    def bound_names(self, name: str) -> set[str]:
        """The names a module binds at its top level (imported, assigned, defined): ``from pkg import x`` takes the
        package's ``x`` if its ``__init__`` binds one (``judge.preflight``, the function), else the submodule ``x``."""
        bound = set()
        for node in self.trees[name].body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        return bound

    def submodules_taken(self, found: Import) -> list[str]:
        """The submodules a ``from package import a, b`` takes (names its ``__init__`` does not bind itself)."""
        if not self.is_package(found.target):
            return []
        bound = self.bound_names(found.target)
        return [n for n in found.names if f"{found.target}.{n}" in self.paths and n not in bound]

    def imports(self) -> list[Import]:
        """Every package-internal import statement of every module, relative ones resolved."""
        found = []
        for name, tree in self.trees.items():
            package = name if self.is_package(name) else name.rpartition(".")[0]
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found += [Import(name, alias.name, (), node.lineno) for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                        target = ".".join(base + ([node.module] if node.module else []))
                    else:
                        target = node.module or ""
                    found.append(Import(name, target, tuple(alias.name for alias in node.names), node.lineno))
        return [i for i in found if i.target == self.name or i.target.startswith(self.name + ".")]

    def graph(self) -> dict[str, set[str]]:
        """Module -> the modules importing it runs: the one imported from, the submodules ``from x import y`` names,
        and the ``__init__`` of every package entered that the importer is not already inside."""
        graph: dict[str, set[str]] = {name: set() for name in self.paths}
        for found in self.imports():
            inside = {*_ancestors(found.importer), found.importer}
            for target in {found.target} | {f"{found.target}.{n}" for n in self.submodules_taken(found)}:
                graph[found.importer] |= {m for m in [*_ancestors(target), target] if m in self.paths and m not in inside}
        return graph

    def subpackage(self, name: str) -> str | None:
        """The top-level subpackage a module is in (``judge`` for ``pkg.judge.batch.files``), None for the package
        itself and its top-level modules."""
        parts = name.split(".")
        return parts[1] if len(parts) > 1 and self.is_package(".".join(parts[:2])) else None


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:  # recursion depth is bounded by the module count (~150)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def sealed_breaches(package: Package, sealed: tuple[str, ...] = SEALED) -> list[str]:
    """Imports of a sealed subpackage's modules from outside it (``from ..judge.cache import X``, or ``from ..judge
    import cache``) instead of from its ``__init__``."""
    breaches = []
    for found in package.imports():
        for name in sealed:
            prefix = f"{package.name}.{name}"
            if found.importer == prefix or found.importer.startswith(prefix + "."):
                continue
            submodules = package.submodules_taken(found) if found.target == prefix else []
            if found.target.startswith(prefix + ".") or submodules:
                breaches.append(f"{found.importer}:{found.line} imports {found.target}" + (f" {submodules}" if submodules else ""))
    return breaches


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_breaches(package: Package) -> list[str]:
    """Private names (``_x``, or a module ``_x``) taken from a subpackage other than the importer's own."""
    breaches = []
    for found in package.imports():
        owner = package.subpackage(found.target)
        if owner is None or owner == package.subpackage(found.importer):
            continue
        private = [n for n in found.names if _private(n)] + [p for p in found.target.split(".")[2:] if _private(p)]
        if private:
            breaches.append(f"{found.importer}:{found.line} takes {private} from {found.target}")
    return breaches


# -- the package ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def package() -> Package:
    return Package.read(PACKAGE)  # read once: nothing here changes it


def test_no_import_circle_among_the_packages_modules(package):
    assert import_circles(package.graph()) == []


def test_nothing_outside_judge_imports_the_judges_own_modules(package):
    assert sealed_breaches(package) == []


def test_no_module_takes_a_private_name_of_another_subpackage(package):
    assert private_breaches(package) == []


def test_the_graph_sees_the_package(package):
    assert all((PACKAGE / name / "__init__.py").exists() for name in SEALED)
    graph = package.graph()
    assert "mlflow_genai_metrics.judge" in graph["mlflow_genai_metrics.summarization.pipeline"]
    assert "mlflow_genai_metrics.judge.batch.sender" in graph["mlflow_genai_metrics.judge.client"]
    assert "mlflow_genai_metrics.judge.batch" in graph["mlflow_genai_metrics.judge.settings"]  # the package entered


# -- the checks themselves, on small packages -----------------------------------------------------------------------


def make_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_circle_through_a_type_only_import_is_found(tmp_path):
    root = make_package(tmp_path, {
        "a.py": "from .b import B\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nB = 1\n",
        "c.py": "from .a import A\n",
    })
    assert import_circles(Package.read(root).graph()) == [["pkg.a", "pkg.b"]]


def test_a_circle_through_a_deferred_import_is_found(tmp_path):
    root = make_package(tmp_path, {"a.py": "from .b import B\n", "b.py": "def f():\n    from .a import A\n"})
    assert import_circles(Package.read(root).graph()) == [["pkg.a", "pkg.b"]]


def test_a_circle_through_a_packages_init_is_found(tmp_path):
    # settings -> batch.options runs batch/__init__, which imports the sender, which imports the settings
    root = make_package(tmp_path, {
        "judge/__init__.py": "",
        "judge/settings.py": "from .batch.options import Options\n",
        "judge/batch/__init__.py": "from .options import Options\nfrom .sender import Sender\n",
        "judge/batch/options.py": "Options = 1\n",
        "judge/batch/sender.py": "from ..settings import Settings\n",
    })
    assert import_circles(Package.read(root).graph()) == [["pkg.judge.batch", "pkg.judge.batch.sender", "pkg.judge.settings"]]


def test_a_package_importing_its_own_modules_is_no_circle(tmp_path):
    root = make_package(tmp_path, {
        "judge/__init__.py": "from .client import Judge\nfrom .records import Usage\n",
        "judge/client.py": "from .records import Usage\nfrom . import records\n",
        "judge/records.py": "Usage = 1\n",
        "user.py": "from .judge import Judge\n",
    })
    assert import_circles(Package.read(root).graph()) == []


def test_reaching_into_a_sealed_subpackage_is_found_and_its_init_is_not(tmp_path):
    root = make_package(tmp_path, {
        "judge/__init__.py": "from .cache import Cache\nfrom .preflight import preflight\n",  # the function, not the module
        "judge/cache.py": "Cache = 1\n",
        "judge/client.py": "from .cache import Cache\n",  # inside judge/: its own business
        "grounding/__init__.py": "",
        "grounding/store.py": "from ..judge.cache import Cache\nfrom ..judge import Cache as Fine\n",
        "judge/preflight.py": "def preflight(): ...\n",
        "cli.py": "from .judge import cache\nimport pkg.judge.cache\nfrom .judge import preflight\n",
    })
    assert sealed_breaches(Package.read(root)) == [
        "pkg.cli:1 imports pkg.judge ['cache']",
        "pkg.cli:2 imports pkg.judge.cache",
        "pkg.grounding.store:1 imports pkg.judge.cache",
    ]


def test_a_private_name_of_another_subpackage_is_found_and_ones_own_are_not(tmp_path):
    root = make_package(tmp_path, {
        "_version.py": "__version__ = '1'\n",
        "grounding/__init__.py": "",
        "grounding/scoring.py": "def _indexed(): ...\n",
        "grounding/cache.py": "from .scoring import _indexed\nfrom .._version import __version__\n",
        "grounding/_impl.py": "X = 1\n",
        "summarization/__init__.py": "",
        "summarization/run.py": "from ..grounding.scoring import _indexed\nfrom ..grounding._impl import X\n",
    })
    assert private_breaches(Package.read(root)) == [
        "pkg.summarization.run:1 takes ['_indexed'] from pkg.grounding.scoring",
        "pkg.summarization.run:2 takes ['_impl'] from pkg.grounding._impl",
    ]
