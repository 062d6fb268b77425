"""``python -m mlflow_genai_metrics.cli``."""

import sys

from . import main

sys.exit(main())
