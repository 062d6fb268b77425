"""What is judged (``JudgingOptions``) and how its intervals are computed (``stats.StatisticsOptions``): two small
option objects that the public functions take, and pass whole down to the code that reads them.

    judge_summaries(sources, summaries, judge=judge, options=JudgingOptions(coverage=False),
                    statistics=StatisticsOptions(resamples=200))
    judge_summaries(sources, summaries, judge=judge, coverage=False, resamples=200)  # the same, as keywords
    judge_summaries(sources, summaries, judge=judge, stability=3)  # JudgingOptions(method=Method(stability=3))

``resolve`` is the one place that merges the two forms: every public function with ``**keywords`` hands them to it.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

from ..judge import Judge
from ..signature import PACKAGE_TASKS
from ..stats import StatisticsOptions
from .chunking import MIN_CHUNK_TOKENS
from .method import Method

# Room the verification prompt needs besides the source: instructions, up to 60 numbered claims, and the answer.
PROMPT_RESERVE_TOKENS = 3072


def source_token_budget(judge: Judge | None) -> int | None:
    """How many tokens of source fit in one verification call of this judge (None: no limit known, or no judge)."""
    if judge is None or judge.context_window is None:
        return None
    return max(judge.context_window - PROMPT_RESERVE_TOKENS, 256)


@dataclass(frozen=True)
class JudgingOptions:
    """What is judged of each row, the same for every row of a run (its signature records what changes numbers).

    ``coverage``: extract the source's key points and judge which the summary covers (``coverage``; one more call
    per distinct source and one per row); ``grounding``: add the model-free grounding check (``grounding`` and
    ``grounded`` per row, and on each judged claim its ``lexical_support`` and whether the verdict is ``suspect``);
    ``ter``: with references, TER beside ROUGE, BLEU and chrF (slow: about 0.8 s per row); ``max_source_tokens``:
    sources longer than this are verified chunk by chunk and the verdicts combined (``chunking``); None: what the
    judge's ``context_window`` leaves room for (``source_token_budget``), no limit when that is unknown; else an
    integer >= ``MIN_CHUNK_TOKENS``; ``method``: how claims are verified (``method.Method``: ``stability``,
    ``order_check``, ``examples``, which a door also takes as keywords); ``task``: the name a task of the user's on the
    claim engine signs its runs with (None: summaries), so that its runs are never compared with another task's.
    A bad value is refused here, before any judge call.
    """

    coverage: bool = True
    grounding: bool = True
    ter: bool = False
    max_source_tokens: int | None = None
    method: Method = field(default_factory=Method)
    task: str | None = None

    def __post_init__(self) -> None:
        for name in ("coverage", "grounding", "ter"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        tokens = self.max_source_tokens
        if tokens is not None and (not isinstance(tokens, numbers.Integral) or isinstance(tokens, bool) or tokens < MIN_CHUNK_TOKENS):
            raise ValueError(f"max_source_tokens must be None or an integer >= {MIN_CHUNK_TOKENS}, got {tokens!r}")
        if self.task is not None and (not isinstance(self.task, str) or not self.task.strip() or self.task in PACKAGE_TASKS):
            raise ValueError(f"task must be None or the name of a task of yours (not one of {', '.join(PACKAGE_TASKS)}), got {self.task!r}")
        if not isinstance(self.method, Method):
            raise ValueError(f"method must be a Method (stability, order_check, examples), got {self.method!r}")

    def for_judge(self, judge: Judge | None) -> JudgingOptions:
        """These options with ``max_source_tokens`` settled: the one given, else the judge's ``source_token_budget``."""
        if self.max_source_tokens is not None:
            return self
        return replace(self, max_source_tokens=source_token_budget(judge))


class Resolved(NamedTuple):
    options: JudgingOptions
    statistics: StatisticsOptions


def resolve(
    door: str,
    keywords: Mapping[str, Any],
    options: JudgingOptions | None = None,
    statistics: StatisticsOptions | None = None,
    *,
    judging: bool = True,
) -> Resolved:
    """The options a public function ``door`` was given: its option objects (None: the defaults), or the same
    fields as ``keywords`` (``coverage=False``, ``resamples=200``) over the defaults.

    ``judging=False``: ``door`` takes ``statistics`` only, so a judging field is an unknown keyword (the options
    returned are then the defaults, unused). An unknown keyword is a ``TypeError`` naming it; a field given as a
    keyword beside the object that holds it is a ``ValueError`` (the object is whole: give each field once); a bad
    value is the option object's own ``ValueError``.
    """
    kinds: list[tuple[str, type, Any]] = [("options", JudgingOptions, options)] if judging else []
    kinds.append(("statistics", StatisticsOptions, statistics))
    owner = {field.name: name for name, kind, _ in kinds for field in fields(kind) if field.name != "method"}
    if judging:  # the method's fields are the options' keywords too: stability=3 is method=Method(stability=3)
        owner.update(dict.fromkeys(Method.model_fields, "options"))
    unknown = [key for key in keywords if key not in owner]
    if unknown:
        close = difflib.get_close_matches(unknown[0], owner, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(
            f"{door}() got an unexpected keyword argument {unknown[0]!r}{hint}; its option keywords are "
            f"{', '.join(owner)} ({' and '.join(kind.__name__ for _, kind, _ in kinds)})"
        )
    found: dict[str, Any] = {"options": JudgingOptions(), "statistics": StatisticsOptions()}
    for name, kind, given in kinds:
        mine = {key: value for key, value in keywords.items() if owner[key] == name}
        if given is None:
            method = {key: mine.pop(key) for key in list(mine) if key in Method.model_fields and kind is JudgingOptions}
            found[name] = kind(**mine, **({"method": Method(**method)} if method else {}))
            continue
        if not isinstance(given, kind):
            raise TypeError(f"{door}(): {name}= must be a {kind.__name__}, not {type(given).__name__}")
        if mine:
            raise ValueError(
                f"{door}(): {', '.join(mine)} given as a keyword and in {name}= (a {kind.__name__} holds every field); "
                "give each field once"
            )
        found[name] = given
    return Resolved(**found)
