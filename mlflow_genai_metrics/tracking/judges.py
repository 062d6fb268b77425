"""The summarization judges as MLflow scorers: ``ClaimAlignment``, ``KeyPointCoverage`` and ``Grounding``; for
rewrites also ``InstructionFollowing`` (``judge_sets.rewrite_scorers``: the claims and key points of a rewrite
against its input, and its instruction).

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage

    judge = Judge("gpt-4o-mini")
    mlflow.genai.evaluate(data, scorers=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    ClaimAlignment(judge).register().start(sampling_config=ScorerSamplingConfig(sample_rate=1.0))

Each is a ``Scorer`` with a name, a description and serialisable settings (``judge``: the judge model, base URL,
options and prompt versions; never the key), and gives one ``Feedback`` per row (``feedback``; a judge's card
carries the tokens and cost of its own judge calls under MLflow's assessment metadata keys). Each asks only
what its card needs (``ClaimAlignment`` the claim passes, ``KeyPointCoverage`` the key-point passes, ``Grounding``
no judge), with the ``Judge`` it was made with. In plain ``mlflow.genai.evaluate`` MLflow aggregates the cards'
values itself (``claim_alignment/mean``, ...); the run's full report is ``log_results(run_id, judges)`` afterwards,
or comes from ``evaluate_summaries`` at once (``scored_rows``). A scorer keeps no row and puts nothing on MLflow's
objects: one scorer may serve evaluations at once.

MLflow serialises a ``@scorer`` function by its source, not a ``Scorer`` subclass, so ``registrable()`` is the
judge as a ``@scorer`` whose body imports this package and rebuilds the judge from the settings its signature
carries; ``register()``, ``start()``, ``update()``, ``stop()`` and ``model_dump()`` use it. Loading it back needs
``MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS=true`` where it is loaded (MLflow executes the stored source), this package
installed there, and the judge's key in that environment.
"""

from __future__ import annotations

import json
import threading
import types
import typing
from typing import Any, ClassVar, Literal

import pydantic
from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback
from mlflow.genai.scorers import Scorer, scorer
from pydantic import BaseModel, ConfigDict, PrivateAttr

from ..grounding.model import model_tag
from ..judge import Declared, Judge, JudgeConfigError, JudgeSettings, declared
from ..prompts import PROMPT_NAMES, load_prompt
from ..summarization.records import RowJudgement
from .feedback import (
    claim_alignment_feedback,
    error_feedback,
    grounding_feedback,
    instruction_feedback,
    judge_source,
    key_point_coverage_feedback,
)
from .genai import InputKeys, trace_id_of
from .scored_rows import CLAIMS, GROUNDING, INSTRUCTION, KEY_POINTS, Call, ScoredRows


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


class Registrable:
    """The registrable form a judge scorer shares (``_SummaryScorer``, ``answer_judges._AnswerScorer``): MLflow
    serialises a ``@scorer`` function by its source, not a ``Scorer`` subclass, so ``registrable()`` is the judge as
    a ``@scorer`` whose body (``registered_body``, a module-level function of the judge's family) imports this
    package and rebuilds the judge from the settings its signature carries as a default value."""

    registered_body: ClassVar[Any]
    judge_kind: ClassVar[str]
    _dumped: tuple[str, dict[str, Any]] | None  # (settings, dump), a private attribute of each scorer class: MLflow digests every feedback

    # -- the registrable form -----------------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """Everything that rebuilds this judge, JSON-ready (``rebuilt(settings)``)."""
        fields = BaseModel.model_dump(self, mode="json", exclude={"aggregations", "timeout"})
        return {"kind": self.judge_kind, **fields}

    def registrable(self) -> Scorer:
        """This judge as a ``@scorer`` function MLflow can serialise, register and load back: its body imports this
        package and rebuilds the judge from ``settings()``, which its signature carries as a default value."""
        body = type(self).registered_body
        defaults = (None, None, None, None, self.settings())
        func = types.FunctionType(body.__code__, body.__globals__, body.__name__, defaults)
        return scorer(func, name=self.name, description=self.description, aggregations=[])

    def register(self, *, name: str | None = None, experiment_id: str | None = None) -> Scorer:
        """Register ``registrable()`` (see ``Scorer.register``); returns the registered scorer, ready to ``start``."""
        return self.registrable().register(name=name, experiment_id=experiment_id)

    def start(self, **options: Any) -> Scorer:
        return self.registrable().start(**options)

    def update(self, **options: Any) -> Scorer:
        return self.registrable().update(**options)

    def stop(self, **options: Any) -> Scorer:
        return self.registrable().stop(**options)

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The serialised form MLflow stores: that of ``registrable()``."""
        key = json.dumps([self.settings(), self.name, self.description], sort_keys=True)
        if self._dumped is None or self._dumped[0] != key:
            self._dumped = (key, self.registrable().model_dump(**kwargs))
        return dict(self._dumped[1])




class _SummaryScorer(Registrable, Scorer):
    """What every judge shares: where the texts are in a row, how it reads rows, one feedback per row."""

    source_key: str = "text"
    id_key: str = "id"
    category_key: str = "category"
    instruction_key: str | None = None  # rewrites: the instruction's key in ``inputs`` (``rewrite_scorers``)
    judge_kind: ClassVar[str]
    needs: ClassVar[frozenset[str]]  # the parts of a row's judgement its feedback reads
    _rows: ScoredRows | None = PrivateAttr(default=None)
    _rows_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _dumped: tuple[str, dict[str, Any]] | None = PrivateAttr(default=None)

    # -- scoring ----------------------------------------------------------------------------------------------------

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None) -> Feedback:
        scored = self.scored_rows()
        try:
            parsed = scored.parse(inputs, outputs, expectations, trace)
        except ValueError as error:
            scored.record(Call(self.name, trace_id_of(trace), None, valued=False))
            return error_feedback(self.name, str(error), self.source(), code="BAD_ROW")
        try:
            judgement = scored.judgement(parsed, self.needs)
        except JudgeConfigError as error:
            scored.preflight.failed(error)  # every later row fails at once, with no call
            scored.record(Call(self.name, parsed.trace_id, parsed, valued=False, config_error=str(error)))
            return error_feedback(self.name, str(error), self.source(), code="JUDGE_CONFIG_ERROR")
        feedback = self.feedback(judgement)
        scored.record(Call(self.name, parsed.trace_id, parsed, valued=_aggregated(feedback.value)))
        return feedback

    def feedback(self, judgement: RowJudgement) -> Feedback:
        """This judge's one feedback for a judged row."""
        raise NotImplementedError

    def source(self) -> AssessmentSource:
        raise NotImplementedError

    def scored_rows(self) -> ScoredRows:
        """How this judge reads rows: on its own, or in an ``evaluate_summaries`` call (``bound_to``)."""
        with self._rows_lock:
            if self._rows is None:
                self._rows = self._own_rows()
            return self._rows

    def _own_rows(self) -> ScoredRows:
        return ScoredRows(None, needs=self.needs, keys=self.input_keys())

    def input_keys(self) -> InputKeys:
        return InputKeys(self.source_key, self.id_key, self.category_key, self.instruction_key)

    def bound_to(self, rows: ScoredRows, **update: Any) -> _SummaryScorer:
        """A copy of this judge reading ``rows`` (``update``: fields to change, e.g. ``aggregations=[]``)."""
        copy = self.model_copy(update=update)
        copy._rows, copy._rows_lock = rows, threading.Lock()
        return copy


class _JudgedScorer(_SummaryScorer):
    """A judge that asks the judge model: its settings, and the live ``Judge`` it was made with (kept in-process)."""

    judge: JudgeSpec
    max_source_tokens: int | None = None
    _live: Judge | None = PrivateAttr(default=None)

    def __init__(self, judge: Judge | JudgeSpec | dict | None = None, /, **data: Any):
        live, spec = judge_and_spec(data.pop("judge") if "judge" in data else judge)
        super().__init__(judge=spec, **data)
        self._live = live

    def live_judge(self) -> Judge:
        """The ``Judge`` this judge asks (the one it was made with, else one built from its settings)."""
        if self._live is None:
            self._live = self.judge.build()
        return self._live

    def _own_rows(self) -> ScoredRows:
        return ScoredRows(self.live_judge(), needs=self.needs, keys=self.input_keys(), max_source_tokens=self.max_source_tokens,
                          grounding=self.instruction_key is None)  # rewrites are judged without the grounding check

    def source(self) -> AssessmentSource:
        return judge_source(self.judge.model)

    def priced(self) -> bool:
        """Whether the judge has prices: its cards then say what their calls cost."""
        return self.judge.prices is not None


class ClaimAlignment(_JudgedScorer):
    """Is the summary faithful to the source? "yes" when the summary makes claims and the source supports every one
    (``strictly_aligned``), else "no": a contradicted claim or an unverifiable one (idk, what an invented detail
    looks like) makes it "no". The rationale says why, then lists every claim with its verdict and reason."""

    name: str = "claim_alignment"
    description: str | None = (
        "Splits the summary into claims and checks each against the source: yes when the source supports every "
        "claim (a contradicted or unverifiable claim makes it no). Rationale: every claim with its verdict "
        "(contradicted first, then unverifiable) and reason."
    )
    judge_kind: ClassVar[str] = "claim_alignment"
    # The value type declared as MLflow's own judges declare it: make_scorer_ensemble checks it before any row
    # (agg_all, agg_any and majority_vote take a yes/no judge; mean refuses it up front).
    feedback_value_type: ClassVar[Any] = YES_NO
    needs: ClassVar[frozenset[str]] = frozenset({CLAIMS})

    def feedback(self, judgement: RowJudgement) -> Feedback:
        return claim_alignment_feedback(self.name, judgement, self.source(), priced=self.priced())


class KeyPointCoverage(_JudgedScorer):
    """What share of the source's key points does the summary cover? The rationale lists the missed and covered ones."""

    name: str = "key_point_coverage"
    description: str | None = "The share of the source's key points (listed by the judge) that the summary covers."
    judge_kind: ClassVar[str] = "key_point_coverage"
    feedback_value_type: ClassVar[Any] = float
    needs: ClassVar[frozenset[str]] = frozenset({KEY_POINTS})

    def feedback(self, judgement: RowJudgement) -> Feedback:
        return key_point_coverage_feedback(self.name, judgement, self.source(), priced=self.priced())


class InstructionFollowing(_JudgedScorer):
    """Does the rewrite follow its instruction? "yes" or "no" with the judge's reason (one call per row; an empty
    rewrite is "no" with no call). The rewrite is ``outputs``, its input ``inputs["input"]`` and its instruction
    ``inputs["instruction"]`` (``source_key``, ``instruction_key``)."""

    name: str = "instruction_following"
    description: str | None = "Whether the rewrite does what its instruction asks (yes/no), with the judge's reason."
    source_key: str = "input"
    instruction_key: str | None = "instruction"
    judge_kind: ClassVar[str] = "instruction_following"
    feedback_value_type: ClassVar[Any] = YES_NO
    needs: ClassVar[frozenset[str]] = frozenset({INSTRUCTION})

    @pydantic.field_validator("instruction_key")
    @classmethod
    def _has_instruction(cls, value: str | None) -> str:
        if not value:
            raise ValueError("InstructionFollowing needs instruction_key: the key of the instruction in each row's inputs")
        return value

    def feedback(self, judgement: RowJudgement) -> Feedback:
        return instruction_feedback(self.name, judgement, self.source(), priced=self.priced())


class Grounding(_SummaryScorer):
    """The model-free grounding score in [0, 1]: how much of each summary sentence the source supports (no judge)."""

    name: str = "grounding"
    description: str | None = "Model-free grounding score in [0, 1]: how well the source supports each summary sentence (no judge call)."
    judge_kind: ClassVar[str] = "grounding"
    feedback_value_type: ClassVar[Any] = float
    needs: ClassVar[frozenset[str]] = frozenset({GROUNDING})

    def feedback(self, judgement: RowJudgement) -> Feedback:
        return grounding_feedback(self.name, judgement, self.source())

    def source(self) -> AssessmentSource:
        return AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=model_tag())


KINDS = types.MappingProxyType({cls.judge_kind: cls for cls in (ClaimAlignment, KeyPointCoverage, InstructionFollowing, Grounding)})


def rebuilt(settings: dict[str, Any]) -> _SummaryScorer:
    """The judge ``settings()`` describe, made anew for each call of the registrable form: nothing is kept for the
    process, so no judge (or its rows) reaches another call. No preflight: a wrong model is the call's
    ``JUDGE_CONFIG_ERROR``, from its first request."""
    fields = dict(settings)
    judge = KINDS[fields.pop("kind")](**fields)  # (Scorer.model_validate reads serialised scorers, not fields)
    judge.scored_rows().preflight.skip()
    return judge


def summary_judge(inputs=None, outputs=None, expectations=None, trace=None, settings=None):
    """The registrable form of a judge: MLflow stores this body and the signature (whose ``settings`` default names
    the judge), and runs them where the scorer is loaded."""
    from mlflow_genai_metrics.tracking.judges import rebuilt

    return rebuilt(settings)(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace)


def _aggregated(value: Any) -> bool:
    """Whether MLflow aggregates a feedback of this value: a number or a yes/no (as its ``aggregation`` module)."""
    return isinstance(value, (int, float, bool)) or (isinstance(value, str) and value.lower() in ("yes", "no"))


_SummaryScorer.registered_body = staticmethod(summary_judge)
