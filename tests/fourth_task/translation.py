"""Translation faithfulness as a task: a row is ``{"inputs": {"source": text, "id": ...}, "outputs": translation}``;
the claim engine splits the translation into claims and verifies each against the source (no coverage: a
translation says all of its source or is faulty otherwise; no grounding check: its model reads English only);
the run's figures are the claim engine's results layer (``alignment``, ``strict_alignment``, the defect rates),
and each row's card ``translation_faithfulness`` says yes when every claim is supported.

Nothing in the package names this task: a ``TaskPipeline`` subclass (how a row is read, judged and summed up) and
a scorer subclass (its card) are all it takes; ``evaluate``, ``log_results``, the registrable form and the
settling of a run serve it as they serve summaries, answers and rewrites.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mlflow_genai_metrics.stats import StatisticsOptions
from mlflow_genai_metrics.summarization.api import build_result
from mlflow_genai_metrics.summarization.cards import Card, claim_card
from mlflow_genai_metrics.summarization.ids import canonical_id
from mlflow_genai_metrics.summarization.judging import judge_rows, one_row, prepare_rows, source_key
from mlflow_genai_metrics.summarization.options import JudgingOptions
from mlflow_genai_metrics.summarization.records import RowInput
from mlflow_genai_metrics.tracking.genai import trace_id_of
from mlflow_genai_metrics.tracking.judges import YES_NO, _Judged
from mlflow_genai_metrics.tracking.pipeline import TaskPipeline

OPTIONS = JudgingOptions(coverage=False, grounding=False, task="translations")  # signed: never compared with summaries


@dataclass(frozen=True)
class Keys:
    source: str = "source"
    id: str = "id"


@dataclass(frozen=True)
class ParsedTranslation:
    row: RowInput
    trace_id: str | None
    id_given: bool
    failure: str | None = None  # what the application (``predict_fn``) raised on this row: counted failed, not judged


class TranslationPipeline(TaskPipeline):
    holding = "a source and its translation"

    def parse(self, inputs: Any, outputs: Any, expectations: Any = None, trace: Any = None) -> ParsedTranslation:
        if not isinstance(inputs, dict) or not isinstance(inputs.get(self.keys.source), str):
            raise ValueError(f"the text translated must be `inputs[{self.keys.source!r}]`")
        if outputs is None:  # with ``predict_fn`` a row is read before the application answers (or when it failed)
            outputs = ""
        if not isinstance(outputs, str):
            raise ValueError(f"`outputs` must be the translation, not {type(outputs).__name__}")
        row_id = inputs.get(self.keys.id)
        source = inputs[self.keys.source]
        row = one_row(prepare_rows, source, outputs, row_id if row_id is not None else source_key(source))
        return ParsedTranslation(row, trace_id_of(trace), row_id is not None)

    def texts(self, parsed: ParsedTranslation) -> tuple[str, str]:
        return parsed.row.source_key, hashlib.sha256(parsed.row.summary.encode("utf-8")).hexdigest()

    def ask(self, rows: list[ParsedTranslation]) -> list[Any]:
        return judge_rows([p.row for p in rows], self.judge, OPTIONS, progress=False)

    def build(self, rows: list[ParsedTranslation], judgements: list[Any]) -> Any:
        return build_result([p.row for p in rows], judgements, judge=self.judge, options=OPTIONS.for_judge(self.judge),
                            statistics=self.statistics)

    def order(self, parsed: ParsedTranslation) -> tuple[str, str]:
        return canonical_id(parsed.row.id), parsed.row.summary


class TranslationFaithfulness(_Judged):
    """Yes when the translation says only what its source says (every claim of it supported by the source)."""

    name: str = "translation_faithfulness"
    description: str | None = "Yes when every claim of the translation is supported by its source."
    source_key: str = "source"
    id_key: str = "id"
    judge_kind: ClassVar[str] = "translation_faithfulness"
    judge_pass: ClassVar[Any] = "claims"
    feedback_value_type: ClassVar[Any] = YES_NO

    def card(self, judgement: Any) -> Card:
        return claim_card(judgement)

    def plain_pipeline(self) -> TranslationPipeline:
        return TranslationPipeline(self.live_judge(), keys=Keys(self.source_key, self.id_key), preflight=self.own_preflight())

    @classmethod
    def set_pipeline(cls, judges: Sequence[Any], *, statistics: StatisticsOptions, ter: bool = False) -> TranslationPipeline:
        first = judges[0]
        return TranslationPipeline(first.live_judge(), keys=Keys(first.source_key, first.id_key), statistics=statistics)
