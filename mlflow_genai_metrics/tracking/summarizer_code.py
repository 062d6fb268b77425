"""The code MLflow runs to load a logged ``SummarizerModel`` (models from code: nothing is pickled). The model is
rebuilt from the settings it was logged with, its ``model_config``. MLflow executes this file; nothing imports it."""

from mlflow.models import ModelConfig, set_model

from mlflow_genai_metrics.tracking.model import SummarizerModel

set_model(SummarizerModel(**ModelConfig().to_dict()))
