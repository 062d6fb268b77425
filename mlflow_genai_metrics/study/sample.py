"""``python -m mlflow_genai_metrics.study.sample my_summaries.csv``: write the sample summaries that ship with the
package (``sample_summaries``) to a file, to judge them as your own (the quickstart's data)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .articles import sample_summaries


def main(argv: list[str] | None = None) -> None:
    """Write the sample to the file named (.csv, .jsonl or .parquet, by its suffix)."""
    parser = argparse.ArgumentParser(prog="python -m mlflow_genai_metrics.study.sample", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="where to write it: a .csv, .jsonl or .parquet file")
    path = Path(parser.parse_args(argv).file)
    frame = sample_summaries()
    if path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        parser.error(f"{path}: name a .csv, .jsonl or .parquet file")
    print(f"wrote {path}: {len(frame)} rows, columns {', '.join(frame.columns)}")


if __name__ == "__main__":
    main()
