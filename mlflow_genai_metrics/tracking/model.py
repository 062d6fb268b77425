"""``SummarizerModel``: an OpenAI-compatible candidate model as an ``mlflow.pyfunc`` model, so a candidate can be
logged, evaluated, gated and registered like any other model. It stores the model name, base URL and prompt,
never an API key (the key comes from ``OPENAI_API_KEY`` where the model runs). It is logged as code
(``summarizer_code.py`` with its settings as the ``model_config``), not pickled.

Logged inside a run, the model is that run's *input*, the model it evaluates (as ``mlflow.genai.evaluate(model_id=)``
links one), not its output: the experiment's Evaluation runs page leaves out every run that outputs a model (MLflow
takes those for training runs), and the runs one gates on are exactly those that log their candidate."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import LoggedModelInput, Run
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, Schema

from .._version import __version__
from ..generate import DEFAULT_SUMMARY_PROMPT, summarize
from ..judge import redact_url
from .errors import is_bad_input

CODE_FILE = Path(__file__).with_name("summarizer_code.py")  # what MLflow runs to rebuild the model
_SETTINGS = ("model", "base_url", "prompt", "input_col", "max_tokens", "temperature", "max_concurrency", "max_retries")


def pinned_requirements() -> list[str]:
    """This package's own dependencies (not its extras), each pinned to the version installed here: what the code
    logged beside a model needs to load and give the same summaries wherever the model is served."""
    from importlib.metadata import requires, version

    from packaging.requirements import Requirement

    needed = [Requirement(line) for line in requires("mlflow_genai_metrics") or []]
    return [f"{r.name}=={version(r.name)}" for r in needed if r.marker is None or r.marker.evaluate({"extra": ""})]


class SummariesFailed(RuntimeError):
    """The candidate model failed on some rows (its endpoint's errors, each row named): no summary is made up."""


class SummarizerModel(mlflow.pyfunc.PythonModel):
    """Summarize the ``input_col`` column (or a list of texts) with ``model`` at ``base_url``.

    >>> info = SummarizerModel("gpt-4o-mini").log(name="summarizer")
    >>> mlflow.pyfunc.load_model(info.model_uri).predict(pd.DataFrame({"text": [article]}))
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        input_col: str = "text",
        max_tokens: int | None = 512,
        temperature: float = 0.0,
        max_concurrency: int = 8,
        max_retries: int = 6,
    ):
        if base_url is not None and redact_url(base_url) != base_url:
            # The model's settings are written into the logged MLflow model: a credential there would be on disk.
            raise ValueError(
                f"the base URL {redact_url(base_url)} carries credentials, which would be stored in the logged model; "
                "pass the key through OPENAI_API_KEY at serving time instead"
            )
        self.model = model
        self.base_url = base_url
        self.prompt = prompt
        self.input_col = input_col
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries

    def settings(self) -> dict[str, Any]:
        """The arguments this model was built with: logged as its ``model_config``, from which MLflow rebuilds it."""
        return {name: getattr(self, name) for name in _SETTINGS}

    def _texts(self, model_input: Any) -> list[str]:
        # A dict of columns ({"text": [...]}, or one row's {"text": "..."}) or a list of row dicts is a table: read
        # as a list, a dict gave its keys, and the model summarized the word "text".
        if isinstance(model_input, dict):
            scalar = all(isinstance(v, str) or not hasattr(v, "__len__") for v in model_input.values())
            model_input = pd.DataFrame([model_input] if scalar else model_input)
        elif isinstance(model_input, list) and model_input and all(isinstance(r, dict) for r in model_input):
            model_input = pd.DataFrame(model_input)
        if isinstance(model_input, pd.DataFrame):
            if self.input_col not in model_input.columns:
                raise ValueError(f"the input has no column {self.input_col!r}; it has {list(model_input.columns)}")
            return list(model_input[self.input_col])
        if isinstance(model_input, pd.Series):
            return list(model_input)
        if isinstance(model_input, str):
            return [model_input]
        return list(model_input)

    # A DataFrame hint is one MLflow infers no schema from and converts nothing for: the input column stays free.
    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> list[str]:
        """The summaries of ``model_input``'s ``input_col`` (a Series, a list of texts or one text work too)."""
        generated = summarize(
            self._texts(model_input),
            model=self.model,
            base_url=self.base_url,
            prompt=self.prompt,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            max_concurrency=self.max_concurrency,
            max_retries=self.max_retries,
        )
        failed = generated[generated["error"] != ""]
        if len(failed):
            # No placeholder text: an empty summary would be scored as a real (empty) summary.
            details = "; ".join(f"row {i}: {e}" for i, e in failed["error"].head(5).items())
            raise SummariesFailed(f"{self.model} failed to summarize {len(failed)} of {len(generated)} rows ({details}); rerun to retry them (the rest are cached)")
        return list(generated["summary"])

    def log(self, name: str = "summarizer", **log_model_options: Any) -> Any:
        """``mlflow.pyfunc.log_model`` with this package shipped beside the model, so it loads anywhere. The model
        is logged as code (``summarizer_code.py``) with its settings as the ``model_config``: nothing is pickled.

        Inside a run, the LoggedModel is made in the run's experiment with the run as its source and its settings
        as its params, and linked to the run as its model input (MLflow's ``log_model`` would make it the run's
        output and its settings the run's params, and the run would be missing from the Evaluation runs page).
        Either way the returned ``ModelInfo``'s ``model_uri`` (``models:/<model_id>``) is what to evaluate and
        register, and its ``model_id`` what to pass to ``evaluate_summaries(..., model_id=)``.
        """
        options: dict[str, Any] = {
            "model_config": self.settings(),
            # Said, not inferred (MLflow infers none from a DataFrame hint, and warns): one summary per row out. No
            # input schema, so inputs keep their other columns (ids, categories) with no "extra inputs" warning.
            "signature": ModelSignature(inputs=None, outputs=Schema([ColSpec("string")])),
            # The input's shape without a row: MLflow's serving check predicts on it, which must call no endpoint.
            "input_example": pd.DataFrame({self.input_col: pd.Series([], dtype=str)}),
            "code_paths": [str(Path(__file__).resolve().parents[1])],  # the package folder
            "pip_requirements": pinned_requirements(),
            # The package travels as code, not as a requirement (no index need serve it): its version is recorded.
            "metadata": {"mlflow_genai_metrics_version": __version__},
        }
        options.update(log_model_options)
        run = mlflow.active_run()
        if run is None:
            return mlflow.pyfunc.log_model(name=name, python_model=str(CODE_FILE), **options)
        params = {key: str(value) for key, value in self.settings().items() if value is not None} | (options.pop("params", None) or {})
        model = mlflow.initialize_logged_model(name=name, source_run_id=run.info.run_id, experiment_id=run.info.experiment_id, params=params,
                                               tags=options.pop("tags", None), model_type=options.pop("model_type", None))
        # log_model outputs the model from the calling thread's active run, if any; a thread of its own has none
        # (MLflow's active runs are per thread), so there it fills in and finalizes the model made above.
        with ThreadPoolExecutor(max_workers=1) as thread:
            info = thread.submit(mlflow.pyfunc.log_model, name=name, python_model=str(CODE_FILE), model_id=model.model_id, **options).result()
        mlflow.MlflowClient().log_inputs(run.info.run_id, models=[LoggedModelInput(model_id=model.model_id)])
        return info


# The URI forms MLflow resolves (a typo in them is a bad input, said before any rule is evaluated).
_MODEL_URI_FORMS = {
    "models:": (re.compile(r"^models:/[^/@]+(?:/[^/@]+|@[^/@]+)?$"), "models:/<name>/<version>, models:/<name>@<alias> or models:/<model id>"),
    "runs:": (re.compile(r"^runs:/[^/]+(?:/.*)?$"), "runs:/<run id>/<artifact path>"),
}


def check_model_uri(model_uri: str) -> mlflow.models.model.ModelInfo:
    """Raise ``ValueError`` unless ``model_uri`` names a model MLflow can load (its ``MLmodel`` file is read):
    a malformed ``models:/`` or ``runs:/`` URI, an unknown run, logged model, registered model, version or alias.
    Checked before registering, since ``mlflow.register_model`` creates the registered model before it fails."""
    for scheme, (form, forms) in _MODEL_URI_FORMS.items():
        if model_uri.startswith(scheme) and not form.match(model_uri):
            raise ValueError(f"malformed model URI {model_uri!r}: write {forms}")
    try:
        return mlflow.models.get_model_info(model_uri)
    except MlflowException as error:
        if not is_bad_input(error):
            raise
        raise ValueError(f"model URI {model_uri!r} names no model: {error.message}") from None


def check_evaluated_model(model_uri: str, run: Run) -> None:
    """``check_model_uri``, and ``ValueError`` unless the model is the one ``run`` evaluated: logged in that run, or
    linked to it as the model its evaluation evaluated (MLflow's ``model_id``, as ``evaluate_summaries(model_id=...)``
    and ``mgm evaluate --model`` link it). A CI job mixing two candidates up registered a model never evaluated on the
    strength of another's run."""
    info = check_model_uri(model_uri)
    linked = {model.model_id for model in [*(run.inputs.model_inputs or []), *(run.outputs.model_outputs or [])]}
    source_run = info.run_id or (mlflow.MlflowClient().get_logged_model(info.model_id).source_run_id if info.model_id else None)
    if source_run == run.info.run_id or (info.model_id is not None and info.model_id in linked):
        return
    source = f"logged in run {source_run}" if source_run else "logged outside any run"
    raise ValueError(f"model URI {model_uri!r} is not the model run {run.info.run_id} evaluated ({source}, and the run "
                     f"links {', '.join(sorted(linked)) or 'no logged model'}): gate the run that evaluated it, or log the "
                     "model in the evaluation run (SummarizerModel(...).log inside it, or evaluate_summaries(model_id=...))")
