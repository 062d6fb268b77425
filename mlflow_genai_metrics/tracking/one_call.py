"""The claim judge as MLflow's own ``make_judge`` builds it: one call per row, the claims and their verdicts in one
structured answer (``result`` yes/no, the numbered claims with their verdicts in ``rationale``).

    from mlflow_genai_metrics import Judge
    from mlflow_genai_metrics.tracking import ClaimAlignment, make_claim_judge
    one_call = make_claim_judge(Judge("gpt-4o-mini"))
    mlflow.genai.evaluate(data=rows, scorers=[ClaimAlignment(judge), one_call])   # side by side
    one_call.register(experiment_id=...)                                           # then .start(), .align(...)

Its value means what ``claim_alignment``'s does: "yes" when the summary makes claims and the source supports every
one: a "yes" its own rationale denies (no claim listed, or one marked no or idk) or a value other than yes/no is the
row's error, never a score, and an empty summary is "no" without a call (``answer_problem``). It is an MLflow
judge through and through, so MLflow's machinery takes it (server-side scheduling with ``register().start()``, ``align()``, ``make_scorer_ensemble``), and it has none of ours: no cache, no chunking of
long sources, no repair turn, no per-claim table, no signature. docs/judges.md ("Our pipeline or MLflow's
make_judge") has the measured trade-off.

The judge's model, temperature, seed and completion limit are the ``Judge``'s; MLflow reads the key from
``$OPENAI_API_KEY`` where the judge runs (a server on 127.0.0.1 takes any value), so a Judge given another key
explicitly is refused: its key would be replaced by the variable's. A registered judge keeps its
instructions, model and parameters but not its endpoint (MLflow 3.x stores no ``base_url``): where it is loaded,
``$OPENAI_BASE_URL`` says where to send it.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ..judge import DEFAULT_BASE_URL, Judge
from ..prompts import load_prompt
from ..summarization.statements import has_words

if TYPE_CHECKING:
    from mlflow.genai.judges import Judge as MlflowJudge

ONE_CALL_NAME = "claim_alignment_one_call"
ONE_CALL_PROMPT = "claims_mlflow"


def one_call_instructions() -> str:
    """The instructions the judge is built with (``prompts/claims_mlflow.txt``, without its version line)."""
    return load_prompt(ONE_CALL_PROMPT).template.strip()


def inference_params(judge: Judge) -> dict[str, Any]:
    """What every request of the judge carries besides the messages: the ``Judge``'s temperature, seed and
    completion limit (those set)."""
    params: dict[str, Any] = {"temperature": judge.temperature}
    if judge.seed is not None:
        params["seed"] = judge.seed
    if judge.max_tokens is not None:
        params["max_tokens"] = judge.max_tokens
    return params


def make_claim_judge(judge: Judge, *, name: str = ONE_CALL_NAME) -> MlflowJudge:
    """The claim judge built by ``mlflow.genai.judges.make_judge`` for ``judge``'s model and endpoint, named
    ``name``; its description carries the instructions' version (``claims_mlflow:v1-....``)."""
    if not isinstance(judge, Judge):
        raise TypeError(f"judge must be a mlflow_genai_metrics.Judge, not {type(judge).__name__}")
    url = urlsplit(judge.base_url)
    if url.username or url.password:
        # MLflow's judge keeps its base URL in its definition (registered with the experiment): the credentials would
        # be stored and shown, and HTTP would send them in place of $OPENAI_API_KEY
        raise ValueError(f"make_claim_judge: the Judge's base URL {judge.shown_url} carries credentials, which MLflow's judge "
                         "would store in its definition and send in place of $OPENAI_API_KEY; give the key alone "
                         "(OPENAI_API_KEY) with a base URL without credentials")
    key = judge.settings.api_key.get_secret_value() if judge.settings.api_key is not None else ""
    if judge.settings.api_key_given and key and os.environ.get("OPENAI_API_KEY") != key:
        # MLflow's judges send $OPENAI_API_KEY to the endpoint, and take no key of their own: the Judge's key would be
        # replaced by whatever the variable holds (another service's key, sent to this endpoint)
        raise ValueError("make_claim_judge: MLflow's judges send $OPENAI_API_KEY, not the key this Judge was given, and the two "
                         "differ; set OPENAI_API_KEY to the Judge's key (or build the Judge from the variable) before making it")
    if not os.environ.get("OPENAI_API_KEY"):
        warnings.warn(
            "OPENAI_API_KEY is not set: MLflow's judges read the key from it when they run (a server on 127.0.0.1 "
            "takes any value, e.g. OPENAI_API_KEY=local)", stacklevel=2,
        )
    prompt = load_prompt(ONE_CALL_PROMPT)
    endpoint = None if judge.base_url == DEFAULT_BASE_URL else f"{judge.base_url}/chat/completions"
    return _checked_judge_class()(
        name=name,
        instructions=one_call_instructions(),
        model=f"openai:/{judge.model}",
        description=f"Is every claim of the summary supported by the source? One call per row ({prompt.tag}).",
        feedback_value_type=Literal["yes", "no"],
        aggregations=[],  # what make_judge gives a Literal value type
        inference_params=inference_params(judge),
        base_url=endpoint,
    )


_VERDICT_NOT_YES = re.compile(r"\b(no|idk)\W{0,3}:", re.IGNORECASE)
_NUMBERED_ITEM = re.compile(r"^\s*\d+[.)]\s+\S", re.MULTILINE)


def answer_problem(value: Any, rationale: str | None) -> str | None:
    """Why the one-call judge's answer cannot stand as the row's card, or None: a value other than yes/no (MLflow
    checks no answer against the declared ``Literal["yes", "no"]``), or a "yes" its own rationale denies
    (no numbered claim listed, or a claim listed with the verdict no or idk: the instructions' rule 4 makes that
    a "no", and which half of the answer is wrong cannot be told)."""
    if not isinstance(value, str) or value.strip().lower() not in ("yes", "no"):
        return f"the judge answered {value!r}, not yes or no"
    if value.strip().lower() == "no":
        return None
    if not _NUMBERED_ITEM.search(rationale or ""):
        return "the judge answered yes but listed no claim in its rationale (yes needs at least one supported claim)"
    if _VERDICT_NOT_YES.search(rationale or ""):
        return "the judge answered yes but its rationale marks a claim no or idk (yes needs every claim supported)"
    return None


def _checked_judge_class() -> type:
    """MLflow's ``InstructionsJudge`` with its answer checked (``answer_problem``) and an empty summary decided without
    a call, as ``claim_alignment`` decides it (No: no claim, defect empty); made at each call, nothing kept at module
    level. Registered and loaded back, or aligned by MLflow, it is MLflow's plain judge again: MLflow rebuilds it
    from its definition."""
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.genai.judges.instructions_judge import InstructionsJudge

    class CheckedClaimJudge(InstructionsJudge):
        def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None,
                     session: Any = None) -> Feedback:
            if isinstance(outputs, str) and not has_words(outputs):  # the one rule for an empty summary
                return Feedback(name=self.name, value="no", rationale="**No**: the summary makes no claim (defect: empty).",
                                source=AssessmentSource(source_type=AssessmentSourceType.CODE, source_id="mlflow_genai_metrics"))
            feedback = super().__call__(inputs=inputs, outputs=outputs, expectations=expectations, trace=trace, session=session)
            if feedback.error is not None:
                return feedback
            problem = answer_problem(feedback.value, feedback.rationale)
            if problem is None:
                feedback.value = feedback.value.strip().lower()
                return feedback
            return Feedback(name=feedback.name, error=AssessmentError(error_code="INVALID_JUDGE_ANSWER", error_message=problem),
                            rationale=feedback.rationale, source=feedback.source, metadata=feedback.metadata)

    return CheckedClaimJudge
