"""Build the grounding check's table of Porter stems (a development script, not in the wheel).

    .venv/bin/python scripts/build_stem_table.py   # writes mlflow_genai_metrics/grounding/porter-stems-v1.json.gz

NLTK's ``PorterStemmer`` (its default mode, NLTK_EXTENSIONS) stems each lower-case ASCII word of the word-vector
table's vocabulary (``word-vectors-v1.npz``: BERT's WordPiece words, a general English list, nothing of the BBC or of
any evaluation set). ``grounding.words.stem`` reads a word's stem from the table before asking NLTK, whose pure-Python
rules cost about 35 us a word the first time a process meets it: a tenth of the grounding worker's CPU on a
1,000-row run. The table holds NLTK's own stems (``tests/test_grounding_worker.py`` checks every entry against the
installed NLTK), so a score cannot change by it.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlflow_genai_metrics.grounding.vectors import load_vectors  # noqa: E402
from mlflow_genai_metrics.grounding.words import STEM_TABLE, porter_class  # noqa: E402


def main() -> None:
    import nltk

    stemmer = porter_class()()
    words = sorted({token for token in load_vectors().rows if token.isascii() and token.isalpha() and token.islower()})
    stems = {word: stemmer.stem(word) for word in words}
    table = {"nltk": nltk.__version__, "vocabulary": load_vectors().tag,
             "same": [word for word in words if stems[word] == word],  # words that are their own stem
             "stems": {word: stem for word, stem in stems.items() if stem != word}}
    STEM_TABLE.write_bytes(gzip.compress(json.dumps(table, separators=(",", ":")).encode("utf-8"), mtime=0))
    print(f"{len(words)} words ({len(table['stems'])} with a stem of their own) -> {STEM_TABLE} ({STEM_TABLE.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
