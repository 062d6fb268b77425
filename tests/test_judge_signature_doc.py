"""docs/judges.md gives the ``Judge`` signature as the code has it, and the table of its settings as they are declared
(``settings_table`` makes it from ``JudgeSettings``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from mlflow_genai_metrics import Judge
from mlflow_genai_metrics.judge import JudgeSettings, declared

DOC = Path(__file__).resolve().parents[1] / "docs" / "judges.md"


def documented_signature(text: str) -> list[str]:
    """The parameters of the ```python block that is a ``Judge(...)`` call, as written: ``name=default`` or ``*``."""
    block = re.search(r"```python\n(Judge\(.*?\))\n```", text, re.DOTALL)
    assert block, "docs/judges.md has no ```python block holding Judge(...)"
    inside = block.group(1)[len("Judge("):-1]
    return [" ".join(part.split()) for part in inside.split(",") if part.strip()]


def code_signature() -> list[str]:
    """``Judge``'s parameters in the same form (the default cache dir's repr is ``<default>``)."""
    written = []
    for parameter in inspect.signature(Judge).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in written:
            written.append("*")
        written.append(parameter.name if parameter.default is parameter.empty else f"{parameter.name}={parameter.default!r}")
    return written


def settings_table(settings_type: type[JudgeSettings] = JudgeSettings) -> str:
    """The settings table of docs/judges.md: each declared setting, its default (``$VARIABLE``: read from the
    environment) and its help."""
    rows = [f"| `{s.name}` | `{s.shown_default()}` | {s.help} |" for s in declared(settings_type)]
    return "\n".join(["| setting | default | what it sets |", "|---|---|---|", *rows])


def documented_table(text: str) -> str:
    """The first table after the signature."""
    table = re.search(r"```python\nJudge\(.*?```.*?\n(\|.*?)\n\n", text, re.DOTALL)
    assert table, "no table after the Judge signature in docs/judges.md"
    return table.group(1)


def test_the_judge_signature_in_docs_judges_md_is_the_code_s():
    assert documented_signature(DOC.read_text()) == code_signature()


def test_the_settings_table_in_docs_judges_md_is_the_declaration_s():
    assert documented_table(DOC.read_text()) == settings_table(), f"put this table in docs/judges.md:\n{settings_table()}"


def test_the_table_check_fails_on_a_help_or_default_changed():
    text = DOC.read_text()
    assert documented_table(text.replace("the longest wait between retries", "how long it waits")) != settings_table()
    assert documented_table(text.replace("| `max_retries` | `6` |", "| `max_retries` | `3` |")) != settings_table()


def test_the_signature_check_fails_on_a_parameter_left_out_or_a_default_changed():
    text = DOC.read_text()
    assert documented_signature(text.replace("max_calls=None, ", "")) != code_signature()
    assert documented_signature(text.replace("max_concurrency=8", "max_concurrency=4")) != code_signature()


def method_table() -> str:
    """The method's table in docs/judges.md: each option of ``Method``, its default and its help."""
    from mlflow_genai_metrics.summarization.method import Method

    rows = [f"| `{s.name}` | `{s.shown_default()}` | {s.help} |" for s in declared(Method)]
    return "\n".join(["| option | default | what it sets |", "|---|---|---|", *rows])


def test_the_method_s_table_in_docs_judges_md_is_its_declaration_and_the_judge_has_none_of_it():
    """Issue 46: stability, the order check and examples are the method's options, documented beside the judge's
    settings, never among them."""
    text = DOC.read_text()
    found = re.search(r"\n(\| option \| default \| what it sets \|.*?)\n\n", text, re.DOTALL)
    assert found and found.group(1) == method_table(), f"put this table in docs/judges.md:\n{method_table()}"
    assert not {"stability", "order_check", "examples"} & set(JudgeSettings.model_fields)
    assert "stability" not in " ".join(documented_signature(text))
