"""docs/judges.md gives the ``Judge`` signature as the code has it, and a line for every parameter."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge.settings import DEFAULT_CACHE

DOC = Path(__file__).resolve().parents[1] / "docs" / "judges.md"


def documented_signature(text: str) -> list[str]:
    """The parameters of the ```python block that is a ``Judge(...)`` call, as written: ``name=default`` or ``*``."""
    block = re.search(r"```python\n(Judge\(.*?\))\n```", text, re.DOTALL)
    assert block, "docs/judges.md has no ```python block holding Judge(...)"
    inside = block.group(1)[len("Judge("):-1]
    return [" ".join(part.split()) for part in inside.split(",") if part.strip()]


def code_signature() -> list[str]:
    """``Judge.__init__``'s parameters in the same form; the default cache dir shows as ``<default>``."""
    written = []
    for parameter in list(inspect.signature(Judge.__init__).parameters.values())[1:]:
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in written:
            written.append("*")
        default = "<default>" if parameter.default is DEFAULT_CACHE else repr(parameter.default)
        written.append(parameter.name if parameter.default is parameter.empty else f"{parameter.name}={default}")
    return written


def documented_parameters(text: str) -> set[str]:
    """The parameters the first table after the signature names in its first column."""
    table = re.search(r"```python\nJudge\(.*?```.*?\n(\|.*?)\n\n", text, re.DOTALL)
    assert table, "no table after the Judge signature in docs/judges.md"
    cells = re.findall(r"^\| (`[^|]+) \|", table.group(1), re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}


def test_the_judge_signature_in_docs_judges_md_is_the_code_s():
    assert documented_signature(DOC.read_text()) == code_signature()


def test_docs_judges_md_says_what_every_judge_parameter_sets():
    names = [p for p in inspect.signature(Judge.__init__).parameters if p != "self"]
    assert sorted(set(names) - documented_parameters(DOC.read_text())) == []


def test_the_signature_check_fails_on_a_parameter_left_out_or_a_default_changed():
    text = DOC.read_text()
    assert documented_signature(text.replace("max_calls=None, ", "")) != code_signature()
    assert documented_signature(text.replace("max_concurrency=8", "max_concurrency=4")) != code_signature()
