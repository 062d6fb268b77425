"""A judge setting's one declaration: ``setting(default, help, ...)``, a pydantic field of ``JudgeSettings`` (or of
``BatchOptions``, the ``batch`` setting's options), read back by ``declared``. ``Judge``'s parameters, attributes
and ``repr``, the ``mgm`` judge flags (``cli.common.judge_options``), the scorers' ``JudgeSpec`` and the settings
table of ``docs/judges.md`` are derived from it. Imports nothing of the judge, so ``batch.options`` can use it.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo


def setting(default: Any, help: str, *, env: str | None = None, flag: str | None = None, metavar: str | None = None,
            spec: bool = False, positional: bool = False, **field: Any) -> Any:
    """A setting's pydantic field: its ``default``, its ``help`` (the field's description) and pydantic's constraints
    (``ge=1``, ``repr=False``, ...) in ``field``; ``env``: the environment variable read when it is left out;
    ``flag`` (and ``metavar``): its flag on the ``mgm`` commands that make a judge; ``spec``: it travels in an MLflow
    scorer's serialisable ``JudgeSpec``; ``positional``: a positional parameter of ``Judge`` (else keyword-only)."""
    where = {"env": env, "flag": flag, "metavar": metavar, "spec": spec, "positional": positional}
    return Field(default, description=help, json_schema_extra={"setting": where}, **field)


@dataclass(frozen=True)
class Declared:
    """One setting as ``setting`` declared it."""

    name: str
    field: FieldInfo
    env: str | None = None
    flag: str | None = None
    metavar: str | None = None
    spec: bool = False
    positional: bool = False

    @property
    def default(self) -> Any:
        return self.field.default

    @property
    def help(self) -> str:
        return self.field.description or ""

    @property
    def dest(self) -> str:
        """The attribute its flag parses into (``--judge-model``: ``judge_model``)."""
        return (self.flag or "").lstrip("-").replace("-", "_")

    @property
    def kind(self) -> Any:
        """Its type, None left out (``int | None``: ``int``)."""
        annotation = self.field.annotation
        optional = get_origin(annotation) in (Union, types.UnionType)
        return next(arg for arg in get_args(annotation) if arg is not type(None)) if optional else annotation

    @property
    def model(self) -> type[BaseModel] | None:
        """The pydantic model its value is (``Prices``, ``BatchOptions``), if any."""
        return self.kind if isinstance(self.kind, type) and issubclass(self.kind, BaseModel) else None

    def shown_default(self) -> str:
        """The default as people read it: ``$VARIABLE`` for a setting read from the environment, else its repr."""
        return f"${self.env}" if self.env else repr(self.default)


def declared(model: type[BaseModel]) -> list[Declared]:
    """The settings ``model`` declares with ``setting``, in order (a field declared otherwise is not a setting)."""
    return [Declared(name, field, **field.json_schema_extra["setting"]) for name, field in model.model_fields.items()  # type: ignore[arg-type, index]
            if isinstance(field.json_schema_extra, dict) and "setting" in field.json_schema_extra]
