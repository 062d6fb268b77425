"""A judge's serialisable settings (``JudgeSpec``): what a scorer carries so that MLflow can store it and rebuild
the same judge elsewhere, never the key."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict

from ..judge import Declared, Judge, JudgeSettings, declared
from ..prompts import PROMPT_NAMES, load_prompt


def installed_prompts() -> dict[str, str]:
    """Each prompt's version tag in this installation (``v1-3f2a``), as the signature pins them."""
    return {name: load_prompt(name).tag.split(":", 1)[1] for name in PROMPT_NAMES}


def _travelling(setting: Declared) -> tuple[Any, Any]:
    """A setting's field in ``JudgeSpec``: one of a model's type (``Prices``) as its dump, and one read from the
    environment when left out (``model``, ``base_url``: default None, type not optional) required."""
    annotation = dict[str, Any] | None if setting.model is not None else setting.field.annotation
    required = setting.default is None and type(None) not in typing.get_args(annotation)
    return annotation, (... if required else setting.default)


_Travelling: Any = pydantic.create_model(
    "_Travelling", __config__=ConfigDict(frozen=True, extra="forbid"), __module__=__name__,
    **{setting.name: _travelling(setting) for setting in declared(JudgeSettings) if setting.spec},
)


YES_NO = Literal["yes", "no"]  # a yes/no judge's value type, as MLflow's built-in judges declare theirs

class JudgeSpec(_Travelling):
    """A judge's serialisable settings: what rebuilds the same judge elsewhere. The settings ``JudgeSettings`` marks
    ``spec`` (``model``, ``base_url``, ``temperature``, ...), whether it caches, and the versions of its prompts.
    Never the API key (the rebuilt judge reads ``OPENAI_API_KEY`` where it runs) nor credentials in the base URL
    (shown as ``***``)."""

    cache: bool = True
    prompts: dict[str, str] = pydantic.Field(default_factory=installed_prompts)

    @classmethod
    def of(cls, judge: Judge) -> JudgeSpec:
        """The settings of ``judge``."""
        s = judge.settings
        values = {name: getattr(s, name) for name in _Travelling.model_fields}
        values = {name: v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v for name, v in values.items()}
        return cls(**{**values, "base_url": s.shown_url}, cache=s.cache_dir is not None)

    def build(self) -> Judge:
        """The judge these settings describe; refused when this installation's prompts are not the ones named."""
        if self.prompts != installed_prompts():
            raise ValueError(
                f"this judge was set up with the prompts {self.prompts}, but this installation of mlflow_genai_metrics "
                f"has {installed_prompts()}: its numbers would not be the same judge's. Install the version it was "
                "registered with, or register the judge again."
            )
        if "***" in self.base_url:
            raise ValueError(f"the judge's base URL {self.base_url} held credentials, which its settings never keep: pass the key as OPENAI_API_KEY")
        options = self.model_dump(exclude={"model", "base_url", "cache", "prompts"})
        return Judge(self.model, self.base_url, **options, **({} if self.cache else {"cache_dir": None}))


def judge_and_spec(judge: Judge | JudgeSpec | dict | None) -> tuple[Judge | None, JudgeSpec | dict]:
    """A scorer's ``judge`` argument as the live ``Judge`` it asks (None: built from the settings when first needed)
    and the settings it carries: a ``Judge`` as it is, None as the environment's judge, settings as they are."""
    live = Judge() if judge is None else judge if isinstance(judge, Judge) else None
    return live, JudgeSpec.of(live) if live is not None else judge


_SAME_JUDGE_WHATEVER = {"api_key_given", "progress"}  # where the key came from, a progress bar: no other answer or spend


def one_judge(scorers: Sequence[Any]) -> Judge:
    """The one ``Judge`` a set of scorers asks (the first's): a set judges each row once for all of them, so their
    Judges must have one judge's settings, every one, not only those the scorers carry (``JudgeSpec``): a budget, a
    cache folder or a key of another scorer's Judge was silently not used (``ValueError`` naming what differs)."""
    judges = [scorer.live_judge() for scorer in scorers]
    first = judges[0].settings
    for scorer, judge in zip(scorers[1:], judges[1:]):
        differ = [name for name in type(first).model_fields
                  if name not in _SAME_JUDGE_WHATEVER and getattr(judge.settings, name) != getattr(first, name)]
        if differ:
            raise ValueError(f"the judges of one set judge each row once, with one Judge, so they must share one judge's "
                             f"settings; {scorers[0].name}'s Judge and {scorer.name}'s differ in {', '.join(differ)}: "
                             "make them with one Judge")
    return judges[0]
