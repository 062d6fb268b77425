"""docs/architecture.md states facts about the code (its floors, module and line counts, the line limit, the
modules it names); this test derives them from the code and fails when the page says otherwise.

The block between the ``layers`` markers is generated: ``MGM_WRITE_DOCS=1 pytest tests/test_architecture_doc.py``
rewrites it from the code.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mlflow_genai_metrics"
PAGE = ROOT / "docs" / "architecture.md"
LINE_LIMIT = 400
BEGIN = "<!-- layers: generated from the code's imports by tests/test_architecture_doc.py -->"
END = "<!-- /layers -->"


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, at any depth of its code (functions and TYPE_CHECKING blocks too)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in known else base)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in known and t != name}


def part_of(name: str) -> str:
    """The unit a floor holds: a subpackage (``judge/``) or a top-level module (``stats.py``)."""
    pieces = name.split(".")
    if len(pieces) == 1:
        return "__init__.py"
    path = PACKAGE / pieces[1]
    return f"{pieces[1]}/" if path.is_dir() else f"{pieces[1]}.py"


def floors() -> tuple[dict[str, int], dict[str, int]]:
    """Each part's floor (1 + the highest floor it imports; 1 for parts importing no other) and its lines."""
    known = modules()
    edges: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    for name, path in known.items():
        part = part_of(name)
        lines[part] = lines.get(part, 0) + len(path.read_text().splitlines())
        edges.setdefault(part, set()).update(part_of(t) for t in imported(name, path, known))
    for part in edges:
        edges[part].discard(part)
    floor: dict[str, int] = {}

    def place(part: str, seen: tuple[str, ...] = ()) -> int:
        assert part not in seen, f"an import circle between parts: {' -> '.join((*seen, part))}"
        if part not in floor:
            floor[part] = 1 + max((place(t, (*seen, part)) for t in edges[part]), default=0)
        return floor[part]

    for part in edges:
        place(part)
    return floor, lines


def layers_block() -> str:
    floor, lines = floors()
    known = modules()
    largest = max(known, key=lambda n: len(known[n].read_text().splitlines()))
    largest_lines = len(known[largest].read_text().splitlines())
    rows = ["| floor | parts, with their lines |", "|---|---|"]
    for level in sorted(set(floor.values()), reverse=True):
        parts = sorted((p for p in floor if floor[p] == level), key=lambda p: (-lines[p], p))
        rows.append(f"| {level} | " + ", ".join(f"`{p}` {lines[p]:,}" for p in parts) + " |")
    summary = (
        f"{len(known)} modules, {sum(lines.values()):,} lines, in {len(floor)} parts on {max(floor.values())} floors; "
        f"each part is above every part it imports. The largest module is "
        f"`{known[largest].relative_to(PACKAGE)}` ({largest_lines} lines): no module is over {LINE_LIMIT} lines."
    )
    return "\n".join([BEGIN, summary, "", *rows, END])


def test_the_pages_layers_are_the_codes():
    text = PAGE.read_text()
    assert BEGIN in text and END in text, f"docs/architecture.md lost its generated block ({BEGIN})"
    current = text[text.index(BEGIN): text.index(END) + len(END)]
    expected = layers_block()
    if os.environ.get("MGM_WRITE_DOCS") and current != expected:
        PAGE.write_text(text.replace(current, expected))
        current = expected
    assert current == expected, "docs/architecture.md's layers differ from the code: run MGM_WRITE_DOCS=1 pytest tests/test_architecture_doc.py"


def test_no_module_is_over_the_line_limit():
    over = {str(p.relative_to(ROOT)): n for p in modules().values() if (n := len(p.read_text().splitlines())) > LINE_LIMIT}
    assert not over, f"modules over {LINE_LIMIT} lines: {over}"


def test_every_module_the_page_names_exists():
    """Every ``**`x.py`**`` or ``**`x/`**`` the page names is a module or folder of the package, or a project path."""
    named = set(re.findall(r"\*\*`([\w/.]+)`\*\*", PAGE.read_text()))
    assert named, "the page names no module in bold"
    missing = [n for n in sorted(named) if not ((PACKAGE / n).exists() or (ROOT / n).exists())]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_line_and_module_counts_the_page_states_hold():
    """Sentences of the form "N lines in M modules" about a subpackage state its real size."""
    text = PAGE.read_text()
    claims = re.findall(r"`(\w+)/`[^.]*?\(([\d,]+) lines in (\d+) modules\)", text)
    assert claims, "the page states no subpackage's size"
    for folder, line_count, module_count in claims:
        files = sorted((PACKAGE / folder).rglob("*.py"))
        assert (sum(len(f.read_text().splitlines()) for f in files), len(files)) == (int(line_count.replace(",", "")), int(module_count)), folder


def test_a_circle_between_parts_is_found(tmp_path, monkeypatch):
    """The floor count cannot hide a circle: two parts importing each other fail with both named."""
    fake = tmp_path / "mlflow_genai_metrics"
    (fake / "a").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "a" / "__init__.py").write_text("from .. import b\n")
    (fake / "b.py").write_text("from .a import x\n")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "ROOT", tmp_path)
    monkeypatch.setattr(here, "PACKAGE", fake)
    try:
        floors()
    except AssertionError as error:
        assert "a/" in str(error) and "b.py" in str(error)
    else:
        raise AssertionError("a circle between a/ and b.py was not found")
