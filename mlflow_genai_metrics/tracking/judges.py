"""The judges as MLflow scorers, one class per card, for every task: the summaries' ``ClaimAlignment``,
``KeyPointCoverage`` and ``Grounding``, the rewrites' ``InstructionFollowing`` (``rewrite_scorers``), and the base
every task's scorers share (``_TaskScorer``; the answers' are in ``answer_judges``).

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.tracking import ClaimAlignment, Grounding, KeyPointCoverage

    judge = Judge("gpt-4o-mini")
    mlflow.genai.evaluate(data, scorers=[ClaimAlignment(judge), KeyPointCoverage(judge), Grounding()])
    ClaimAlignment(judge).register().start(sampling_config=ScorerSamplingConfig(sample_rate=1.0))

Each is a ``Scorer`` with a name, a description and serialisable settings (``judge``: the judge model, base URL,
options and prompt versions; never the key: ``spec.JudgeSpec``), and gives one ``Feedback`` per row (its card,
with the tokens and cost of its own judge calls under MLflow's assessment metadata keys), asking only what its card
needs with the ``Judge`` it was made with. MLflow aggregates the cards itself (``claim_alignment/mean``, ...); the
run's full report is ``log_results(run_id, judges)`` afterwards, or ``evaluate`` at once. A scorer keeps no row of
an evaluation and puts nothing on MLflow's objects: one scorer may serve evaluations at once.

MLflow serialises a ``@scorer`` function by its source, not a ``Scorer`` subclass, so ``registrable()`` is the
judge as a ``@scorer`` whose body imports this package and rebuilds the judge from the settings its signature carries
(``register()``, ``start()``, ``update()``, ``stop()`` and ``model_dump()`` use it). Loading it back needs
``MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS=true`` there (MLflow executes the stored source), this package and the key.
"""

from __future__ import annotations

import json
import threading
import types
from collections.abc import Hashable, Sequence
from contextvars import ContextVar, copy_context
from typing import Any, ClassVar

import pydantic
from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback
from mlflow.genai.evaluation import context
from mlflow.genai.scorers import Scorer, scorer
from mlflow.tracing.constant import TraceMetadataKey
from pydantic import BaseModel, PrivateAttr

from ..grounding.model import model_tag
from ..judge import ExampleSet, Judge, JudgeConfigError, Preflight
from ..rewrites.cards import instruction_card
from ..stats import StatisticsOptions
from ..summarization.cards import Card, claim_card, coverage_card, grounding_card
from ..summarization.method import Method
from ..summarization.options import JudgingOptions
from ..summarization.records import JudgePass, RowJudgement
from .feedback import APPLICATION_ERROR, aggregated, card_feedback, error_feedback, judge_cost, judge_source
from .genai import InputKeys, Pipeline, trace_id_of
from .pipeline import TaskPipeline
from .rows import Call, EvaluationRows, unreadable
from .spec import YES_NO, JudgeSpec, judge_and_spec, one_judge

# What a summary scorer's card reads of a row: its claims, its source's key points, the grounding check, a rewrite's instruction check.
CLAIMS, KEY_POINTS, GROUNDING, INSTRUCTION = "claims", "key_points", "grounding", "instruction"
# The evaluation of the plain row a scorer is scoring (``evaluation_of``), set for that call alone: ``own_preflight``.
_SCORING: ContextVar[Hashable | None] = ContextVar("mgm_scoring_evaluation", default=None)


class _TaskScorer(Scorer):
    """What every judge of every task shares: it reads a row as its task's ``TaskPipeline`` does, gives one card per
    row (``card``, with the tokens and cost of its own ``judge_pass``), and has a registrable form. In plain
    ``mlflow.genai.evaluate`` it judges each row itself (``plain_pipeline``), its judge checked once for the rows of
    one evaluation (``own_preflight``); bound to an evaluation (``bound_to``: ``evaluate``) it reads that
    evaluation's judgements and records every call for ``EvaluationRows.settle``. A task adds its scorers as
    subclasses: a ``judge_kind``, a ``card`` and how its rows are judged (``plain_pipeline``, ``set_pipeline``)."""

    judge_kind: ClassVar[str]
    judge_pass: ClassVar[JudgePass | None] = None  # the calls whose tokens and cost the card carries
    inputs_suffice: ClassVar[bool] = True  # a row can be read from ``inputs`` before the application answers
    _evaluation: EvaluationRows | None = PrivateAttr(default=None)
    _preflight: tuple[Hashable, Preflight] | None = PrivateAttr(default=None)  # the latest evaluation's check
    _check_first: bool = PrivateAttr(default=True)  # False: no model listing first (``rebuilt``)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _dumped: tuple[str, dict[str, Any]] | None = PrivateAttr(default=None)  # MLflow digests every feedback

    # -- what a task says --------------------------------------------------------------------------------------------

    def card(self, judgement: Any) -> Card:
        """This judge's card for a judged row."""
        raise NotImplementedError

    def source(self) -> AssessmentSource:
        raise NotImplementedError

    def priced(self) -> bool:
        return False

    def live_judge(self) -> Judge | None:
        return None

    def method(self) -> Method:
        """How this judge's claims are verified (a judge that asks no model: the default, unused)."""
        return Method()

    def plain_pipeline(self) -> TaskPipeline:
        """The pipeline that judges a row of plain ``mlflow.genai.evaluate`` (asking only what the card needs)."""
        raise NotImplementedError

    @classmethod
    def set_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions, ter: bool = False) -> TaskPipeline:
        """One pipeline for a set of this task's judges, judging each row once for all of them."""
        raise NotImplementedError

    @classmethod
    def report_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions) -> TaskPipeline:
        """``log_results``' pipeline for a plain run: ``set_pipeline``'s, less the passes none of ``judges`` asks."""
        return cls.set_pipeline(judges, statistics=statistics)

    # -- scoring -----------------------------------------------------------------------------------------------------

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None) -> Feedback:
        evaluation = self._evaluation
        pipeline = evaluation.pipeline if evaluation is not None else copy_context().run(self._plain, trace)
        record = evaluation.record if evaluation is not None else lambda call: None
        try:
            parsed = pipeline.read(inputs, outputs, expectations, trace)
        except ValueError as error:
            record(Call(self.name, trace_id_of(trace), None, valued=False, unreadable=unreadable(inputs, pipeline.keys.id, error)))
            return error_feedback(self.name, str(error), self.source(), code="BAD_ROW")
        try:
            judgement = pipeline.judgement(parsed)
        except JudgeConfigError as error:  # every later row of this evaluation fails at once, with no call (``own_preflight``)
            record(Call(self.name, parsed.trace_id, parsed, valued=False, config_error=str(error)))
            return error_feedback(self.name, str(error), self.source(), code="JUDGE_CONFIG_ERROR", metadata={"row_id": str(parsed.row.id)})
        feedback = self.feedback(judgement)
        record(Call(self.name, parsed.trace_id, parsed, valued=aggregated(feedback.value)))
        return feedback

    def _plain(self, trace: Any) -> TaskPipeline:
        _SCORING.set(evaluation_of(trace))  # in a copy of the caller's context: for this row's ``own_preflight`` alone
        return self.plain_pipeline()

    def feedback(self, judgement: Any) -> Feedback:
        """This judge's one feedback for a judged row, with the row's id (an error card's too)."""
        if judgement.error is not None and judgement.error.kind == "application":  # no card of this judge: the row has no output
            return error_feedback(self.name, str(judgement.error), self.source(), code=APPLICATION_ERROR, metadata={"row_id": str(judgement.id)})
        cost = judge_cost(judgement, self.judge_pass, priced=self.priced()) if self.judge_pass else {}
        return card_feedback(self.name, self.card(judgement), self.source(), {"row_id": str(judgement.id), **cost})

    def own_preflight(self) -> Preflight:
        """The judge's check for the plain row being scored: once for the rows of its evaluation (``evaluation_of``),
        its outcome (a failure or a pass) reaching no other; a row of no known evaluation is checked alone."""
        key = _SCORING.get()
        with self._lock:  # the latest evaluation's alone is kept: an earlier one's is never read again
            if key is None or self._preflight is None or self._preflight[0] != key:
                self._preflight = (key, Preflight(self.live_judge(), needed=self._check_first))
            return self._preflight[1]

    def bound_to(self, evaluation: EvaluationRows, **update: Any) -> _TaskScorer:
        """A copy of this judge reading (and recording into) ``evaluation`` (``update``: fields to change)."""
        copy = self.model_copy(update=update)
        copy._evaluation, copy._lock, copy._preflight = evaluation, threading.Lock(), None
        return copy

    # -- the registrable form: MLflow serialises a ``@scorer`` function by its source, not a ``Scorer`` subclass ----

    def settings(self) -> dict[str, Any]:
        """Everything that rebuilds this judge, JSON-ready (``rebuilt(settings)``)."""
        fields = BaseModel.model_dump(self, mode="json", exclude={"aggregations", "timeout"})
        return {"kind": self.judge_kind, **fields}

    def registrable(self) -> Scorer:
        """This judge as a ``@scorer`` function MLflow can serialise, register and load back: its body (``task_judge``)
        rebuilds the judge from ``settings()``, which its signature carries as a default value."""
        defaults = (None, None, None, None, self.settings())
        func = types.FunctionType(task_judge.__code__, task_judge.__globals__, task_judge.__name__, defaults)
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


class _Judged(_TaskScorer):
    """A judge that asks the judge model: its settings, the live ``Judge`` it was made with (kept in-process), and
    how its claims are verified (``stability``, ``order_check``, ``examples``: ``summarization.method.Method``)."""

    judge: JudgeSpec
    max_source_tokens: int | None = None
    # the method's own fields (declared once, in ``Method``): a bad value is refused when the judge is made
    stability: int = Method.model_fields["stability"]
    order_check: float = Method.model_fields["order_check"]
    examples: ExampleSet | None = Method.model_fields["examples"]
    _live: Judge | None = PrivateAttr(default=None)

    @pydantic.field_validator("examples", mode="before")
    @classmethod
    def _read_examples(cls, value: Any) -> ExampleSet | None:
        return ExampleSet.coerce(value)

    def method(self) -> Method:
        return Method(stability=self.stability, order_check=self.order_check, examples=self.examples)

    def __init__(self, judge: Judge | JudgeSpec | dict | None = None, /, **data: Any):
        live, spec = judge_and_spec(data.pop("judge") if "judge" in data else judge)
        super().__init__(judge=spec, **data)
        self._live = live

    def live_judge(self) -> Judge:
        """The ``Judge`` this judge asks (the one it was made with, else one built from its settings)."""
        if self._live is None:
            self._live = self.judge.build()
        return self._live

    def source(self) -> AssessmentSource:
        return judge_source(self.judge.model)

    def priced(self) -> bool:
        """Whether the judge has prices: its cards then say what their calls cost."""
        return self.judge.prices is not None


class _SummaryScorer(_TaskScorer):
    """A judge of summaries (and rewrites): where the texts are in a row, what of a row's judgement its card reads."""

    source_key: str = "text"
    id_key: str = "id"
    category_key: str = "category"
    instruction_key: str | None = None  # rewrites: the instruction's key in ``inputs`` (``rewrite_scorers``)
    needs: ClassVar[frozenset[str]]  # the parts of a row's judgement its card reads

    def input_keys(self) -> InputKeys:
        return InputKeys(self.source_key, self.id_key, self.category_key, self.instruction_key)

    def plain_pipeline(self) -> Pipeline:
        """A pipeline for one row, asking only what this card needs (the claim passes, the key-point passes, the
        instruction, or no judge for ``Grounding``), so scorers made with different Judges never wait for one another."""
        needs, judge = self.needs, self.live_judge()
        grounding = GROUNDING in needs or (CLAIMS in needs and self.instruction_key is None)  # rewrites: no check
        options = JudgingOptions(coverage=KEY_POINTS in needs, grounding=grounding, max_source_tokens=getattr(self, "max_source_tokens", None),
                                 method=self.method())
        return Pipeline(judge, options=options, keys=self.input_keys(), claims=CLAIMS in needs, instruction=INSTRUCTION in needs,
                        preflight=self.own_preflight())

    @classmethod
    def set_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions, ter: bool = False, instruction: bool | None = None) -> Pipeline:
        """One pipeline for ``judges`` (sharing the judge's settings and where the texts are); coverage only with a
        ``KeyPointCoverage``; TER with ``ter``; ``instruction``: ask a rewrite's (default: when the rows are rewrites)."""
        judged = [j for j in judges if isinstance(j, _Judged)]
        keys = one_setting(judges, "where the texts are (source_key, id_key, category_key)", _SummaryScorer.input_keys)
        if not judged:
            return Pipeline(None, options=JudgingOptions(coverage=False, ter=ter), statistics=statistics, keys=keys, instruction=instruction)
        one_setting(judged, "one judge's settings", lambda j: j.judge)
        judge = one_judge(judged)  # every setting, a budget's and a cache's too: the set asks this one Judge
        options = JudgingOptions(
            coverage=any(KEY_POINTS in j.needs for j in judges), ter=ter,
            max_source_tokens=one_setting(judged, "max_source_tokens", lambda j: j.max_source_tokens),
            method=one_setting(judged, "one method (stability, order_check, examples)", lambda j: j.method()),
            # rewrites are judged without the grounding check (as ``judge_rewrites``), unless a Grounding judge asks for it
            grounding=keys.instruction is None or any(GROUNDING in j.needs for j in judges),
        )
        return Pipeline(judge, options=options, statistics=statistics, keys=keys, instruction=instruction)

    @classmethod
    def report_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions) -> Pipeline:
        """A rewrite's instruction only for an ``InstructionFollowing`` (the claims always: a result needs them)."""
        return cls.set_pipeline(judges, statistics=statistics, instruction=any(INSTRUCTION in j.needs for j in judges))


def one_setting(judges: Sequence[Any], what: str, read: Any) -> Any:
    """What ``read`` gives for every judge of a set, which must be one value (``ValueError`` naming them): a set
    judges each row once for all its judges."""
    values = {repr(read(j)): read(j) for j in judges}
    if len(values) > 1:
        raise ValueError(f"the judges of one set judge each row once, so they must share {what}; got {sorted(values)}")
    return next(iter(values.values()))


class ClaimAlignment(_Judged, _SummaryScorer):
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
    # Declared as MLflow's judges declare it: make_scorer_ensemble checks it first (agg_all, agg_any, majority_vote; not mean)
    feedback_value_type: ClassVar[Any] = YES_NO
    needs: ClassVar[frozenset[str]] = frozenset({CLAIMS})
    judge_pass: ClassVar[JudgePass | None] = "claims"

    def card(self, judgement: RowJudgement) -> Card:
        return claim_card(judgement)


class KeyPointCoverage(_Judged, _SummaryScorer):
    """What share of the source's key points does the summary cover? The rationale lists the missed and covered ones."""

    name: str = "key_point_coverage"
    description: str | None = "The share of the source's key points (listed by the judge) that the summary covers."
    judge_kind: ClassVar[str] = "key_point_coverage"
    feedback_value_type: ClassVar[Any] = float
    needs: ClassVar[frozenset[str]] = frozenset({KEY_POINTS})
    judge_pass: ClassVar[JudgePass | None] = "key_points"

    def card(self, judgement: RowJudgement) -> Card:
        return coverage_card(judgement)


class InstructionFollowing(_Judged, _SummaryScorer):
    """Does the rewrite follow its instruction? "yes" or "no" with the judge's reason (one call per row; an empty
    rewrite is "no" with no call). The rewrite is ``outputs``, its input and instruction in ``inputs``."""

    name: str = "instruction_following"
    description: str | None = "Whether the rewrite does what its instruction asks (yes/no), with the judge's reason."
    source_key: str = "input"
    instruction_key: str | None = "instruction"
    judge_kind: ClassVar[str] = "instruction_following"
    feedback_value_type: ClassVar[Any] = YES_NO
    needs: ClassVar[frozenset[str]] = frozenset({INSTRUCTION})
    judge_pass: ClassVar[JudgePass | None] = "instruction"

    @pydantic.field_validator("instruction_key")
    @classmethod
    def _has_instruction(cls, value: str | None) -> str:
        if not value:
            raise ValueError("InstructionFollowing needs instruction_key: the key of the instruction in each row's inputs")
        return value

    def card(self, judgement: RowJudgement) -> Card:
        return instruction_card(judgement)


class Grounding(_SummaryScorer):
    """The model-free grounding score in [0, 1]: how much of each summary sentence the source supports (no judge)."""

    name: str = "grounding"
    description: str | None = "Model-free grounding score in [0, 1], calibrated on its training mix (each card names it); no judge call."
    judge_kind: ClassVar[str] = "grounding"
    feedback_value_type: ClassVar[Any] = float
    needs: ClassVar[frozenset[str]] = frozenset({GROUNDING})

    def card(self, judgement: RowJudgement) -> Card:
        return grounding_card(judgement)

    def source(self) -> AssessmentSource:
        return AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=model_tag())


def kinds() -> dict[str, type[_TaskScorer]]:
    """Every judge class loaded, by its ``judge_kind``: each task's scorers register themselves by subclassing."""
    found, todo = {}, [_TaskScorer]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "judge_kind" in vars(cls):
            found[cls.judge_kind] = cls
    return found


def rebuilt(settings: dict[str, Any]) -> _TaskScorer:
    """The judge ``settings()`` describe, made anew for each call of the registrable form (nothing reaches another
    call), with no preflight: a wrong model is the call's ``JUDGE_CONFIG_ERROR``, from its first request."""
    fields = dict(settings)
    if (cls := kinds().get(kind := fields.pop("kind"))) is None:  # a task of one's own, its module not imported here
        raise ValueError(f"no judge of kind {kind!r} is loaded where this registered judge runs: import the module that defines its class first")
    judge = cls(**fields)  # (Scorer.model_validate reads serialised scorers, not fields)
    judge._check_first = False
    return judge


def task_judge(inputs=None, outputs=None, expectations=None, trace=None, settings=None):
    """The registrable form of a judge: MLflow stores this body and signature (its ``settings`` default: the judge)."""
    import mlflow_genai_metrics.tracking  # noqa: F401  (every task's judges, loaded)
    from mlflow_genai_metrics.tracking.judges import rebuilt

    return rebuilt(settings)(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace)


def evaluation_of(trace: Any) -> Hashable | None:
    """Which evaluation a plain row is of, as far as MLflow tells a scorer: the run its evaluation context evaluates
    into (its score threads set it for each row) and the run the row's trace was made in; None without a trace."""
    made_in = (getattr(getattr(trace, "info", None), "trace_metadata", None) or {}).get(TraceMetadataKey.SOURCE_RUN)
    try:  # MLflow's evaluation context is not public API: without it, the trace's run alone
        evaluating = context.get_context().get_mlflow_run_id() if trace is not None and context.context_is_active() else None
    except Exception:
        evaluating = None
    return None if evaluating is None and made_in is None else (evaluating, made_in)
