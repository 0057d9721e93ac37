"""crosstune: cost models for tensor-program auto-tuning that transfer to unseen hardware."""

__version__ = "0.1.0"
