"""The benchmarks print Markdown tables; their smoke tests read them by header name, not by column position."""

from __future__ import annotations

__all__ = ["markdown_table"]


def _cells(line: str) -> list[str]:
    line = line.strip()
    return [cell.strip() for cell in line[1:-1].split("|")] if line.startswith("|") and line.endswith("|") else []


def markdown_table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the first table in ``text`` whose first header is ``first_header``, each as {header: cell}."""
    lines = text.splitlines()
    for at, line in enumerate(lines[:-1]):
        header = _cells(line)
        if header[:1] == [first_header] and set("".join(_cells(lines[at + 1]))) <= set("-:"):
            rows = []
            for row in lines[at + 2:]:
                cells = _cells(row)
                if not cells:
                    break
                assert len(cells) == len(header), f"a row of the {first_header!r} table has {len(cells)} cells, not {len(header)}: {row}"
                rows.append(dict(zip(header, cells)))
            return rows
    raise AssertionError(f"no table headed {first_header!r} in:\n{text}")
