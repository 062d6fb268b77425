"""Reading a table of rows from a file (and a human-labelled faithfulness set), the error for a table that lacks a
column the caller named, and a flat table as the rows ``mlflow.genai.evaluate`` takes (``table_records``)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # pandas' own missing-value words, for the other columns


class MissingColumnError(ValueError):
    """A table lacks a column the caller named: bad input (the command line's exit code 2), not a lookup bug."""


class _NamedProblem(ValueError):
    """A problem already said with the file's name (and line): passed on as it is."""


def read_table(path: str | Path, *, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """A CSV, JSONL/JSON or Parquet file as a DataFrame, chosen by extension.

    A file that cannot be read is a ``ValueError`` naming it and the problem: missing, a folder (a Parquet
    dataset's folder is read as one table), not readable, not of its format (a JSONL file: and the line). JSONL
    values are kept as JSON gives them (an id ``"001"`` stays text). A CSV's ``text_columns`` are read as text, as
    written (an id ``001`` stays "001", not 1 that another row's ``1`` repeats; an expected answer ``1889`` stays
    "1889"; a summary or id reading ``NA``, ``None`` or ``null`` stays that text, not a missing value); only an empty
    cell is missing. Other columns get pandas' defaults.
    """
    suffix = Path(path).suffix.lower()
    readers = {".csv": pd.read_csv, ".json": pd.read_json, ".parquet": pd.read_parquet, ".pq": pd.read_parquet}
    if suffix not in readers and suffix not in (".jsonl", ".ndjson"):
        raise ValueError(f"cannot read {path}: use a .csv, .jsonl, .json or .parquet file")
    with _reading(path, suffix[1:].upper(), folders=suffix in (".parquet", ".pq")):
        if suffix in (".jsonl", ".ndjson"):
            return pd.DataFrame.from_records(_jsonl_records(path))
        if suffix == ".csv" and text_columns:
            header = pd.read_csv(path, nrows=0).columns
            missing_values = {column: [""] if column in text_columns else sorted(STR_NA_VALUES) for column in header}
            return pd.read_csv(path, dtype={column: str for column in text_columns if column in header},
                               keep_default_na=False, na_values=missing_values)
        return readers[suffix](path)


@contextlib.contextmanager
def _reading(path: str | Path, kind: str, *, folders: bool = False) -> Iterator[None]:
    """Turn what opening and parsing ``path`` raises into one ``ValueError`` that names the file and the problem
    (a user's file that is missing, a folder, unreadable or malformed is bad input, not a bug)."""
    if Path(path).is_dir() and not folders:
        raise ValueError(f"cannot read {path}: it is a folder, not a {kind} file")
    try:
        yield
    except _NamedProblem:
        raise
    except OSError as exc:  # missing, a folder, no permission: the system's words, without its errno prefix
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # pandas' parser, empty-file and decoding errors are all ValueErrors
        raise ValueError(f"cannot read {path} as {kind}: {' '.join(str(exc).split())}") from exc


def _jsonl_records(path: str | Path) -> list[dict]:
    records = []
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line.strip():
                    continue
                record = json.loads(line)
            except UnicodeDecodeError as exc:
                raise _NamedProblem(f"{path}, line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
            except json.JSONDecodeError as exc:
                raise _NamedProblem(f"{path}, line {number}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
            if not isinstance(record, dict):
                raise _NamedProblem(f"{path}, line {number}: each line must be one JSON object (a row), not {type(record).__name__}")
            records.append(record)
    return records


def load_labelled(path: str | Path) -> pd.DataFrame:
    """A faithfulness file (``id``, ``source``, ``summary``, ``label``...) with ``human_binary`` and ``human_graded``.

    Binary: ``label_binary`` when the file has it (FRANK), else ``label == 1`` (QAGS: every sentence supported;
    SummEdits: consistent). Graded: ``label`` (a share in [0, 1], or 0/1).
    """
    with _reading(path, "JSONL"):
        frame = pd.read_json(path, lines=True)
    missing = [c for c in ("id", "source", "summary", "label") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: a labelled set needs columns {missing}; it has {list(frame.columns)}")
    graded = pd.to_numeric(frame["label"], errors="coerce")  # a text label ("yes") is NaN here: named below
    ids, labels = frame["id"].tolist(), frame["label"].tolist()
    bad = [f"line {position + 1} (id {ids[position]!r}): label {'missing' if is_missing(labels[position]) else repr(labels[position])}"
           for position in range(len(frame)) if not 0.0 <= graded.iloc[position] <= 1.0]  # NaN fails too
    if bad:  # a missing label once counted as "inconsistent" and a 7 as "consistent", with no word
        raise ValueError(f"{path}: a label is a number in [0, 1] (a share of supported sentences, or 0/1); "
                         f"{len(bad)} are not: {'; '.join(bad[:5])}{'; ...' if len(bad) > 5 else ''}")
    if "label_binary" in frame.columns:  # 0 or 1 (true/false): a 0.9 was cut to 0, a 2 failed after every row was judged
        given = frame["label_binary"].tolist()
        bad = [f"line {position + 1} (id {ids[position]!r}): label_binary {'missing' if is_missing(value) else repr(value)}"
               for position, value in enumerate(given) if isinstance(value, str) or value not in (0, 1)]
        if bad:
            raise ValueError(f"{path}: label_binary is 0 or 1 (1: fully consistent); {len(bad)} are not: "
                             f"{'; '.join(bad[:5])}{'; ...' if len(bad) > 5 else ''}")
    binary = frame["label_binary"] if "label_binary" in frame.columns else (graded >= 1.0)
    return frame.assign(human_binary=binary.astype(int), human_graded=graded.astype(float))


def is_missing(value: Any) -> bool:
    """None, NaN or ``pd.NA`` (what a pandas ``string`` Series holds for a missing value): no text at all."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def table_records(
    table: pd.DataFrame, *, source_col: str = "text", summary_col: str | None = "summary", id_col: str | None = None,
    category_col: str | None = None, reference_col: str | None = None,
) -> list[dict[str, Any]]:
    """A flat table (one row per summary) as ``mlflow.genai.evaluate``'s rows: ``inputs`` holds the source under
    ``text`` (and the id and category when their columns are named; without ``id_col`` the row number is the id),
    ``outputs`` the summary (left out when ``summary_col`` is None: ``predict_fn`` writes it), ``expectations``
    the reference under MLflow's ``expected_response`` (left out on a row without one)."""
    missing = [c for c in (source_col, summary_col, id_col, category_col, reference_col) if c and c not in table.columns]
    if missing:
        raise MissingColumnError(f"the table has no column {missing}; it has {list(table.columns)}")
    rows = table.to_dict(orient="records")
    if id_col:  # a missing id is refused like a repeated one, never replaced by the source's hash
        empty = [position for position, row in enumerate(rows) if is_missing(row[id_col])]
        if empty:
            shown = ", ".join(map(str, empty[:10])) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
            raise ValueError(f"no id in column {id_col!r} on row(s) {shown}: give every row an id (ids pair rows across runs)")
    records = []
    for position, row in enumerate(rows):
        inputs = {"text": row[source_col], "id": row[id_col] if id_col else position}
        if category_col:
            inputs["category"] = row[category_col]
        record: dict[str, Any] = {"inputs": inputs}
        if summary_col:
            record["outputs"] = row[summary_col]
        if reference_col and not is_missing(row[reference_col]):  # a gap: no expectations (MLflow stores no None or
            record["expectations"] = {"expected_response": row[reference_col]}  # NaN one: the whole run was lost)
        records.append(record)
    return records
