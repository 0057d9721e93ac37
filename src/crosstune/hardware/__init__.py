"""Hardware descriptors: the built-in registry, user spec files and this machine."""

from .registry import FEATURE_NAMES, FIELDS, HardwareSpec, builtin_specs, load_spec_file, resolve

__all__ = ["FEATURE_NAMES", "FIELDS", "HardwareSpec", "builtin_specs", "load_spec_file", "resolve"]
