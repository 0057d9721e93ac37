"""Cost models behind one interface (:class:`CostModel`), listed in one registry (``registry.py``)."""

from .base import CostModel, FitOptions
from .registry import (MODEL_KINDS, REGISTRY, architecture_settings, create_model, load_model, model_class,
                       models_help, training_options)

__all__ = ["MODEL_KINDS", "REGISTRY", "CostModel", "FitOptions", "architecture_settings", "create_model",
           "load_model", "model_class", "models_help", "training_options"]
