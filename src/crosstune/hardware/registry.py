"""Hardware descriptors: one JSON schema for CPUs and GPUs, built-in entries from public spec sheets.

A user brings new hardware with ``--hardware-spec FILE.json`` holding exactly the fields of
:data:`FIELDS` (plus an optional ``source`` citing where the numbers come from and ``notes``).

What the chip has and what the measured code could use are not always the same: code compiled for
``llvm`` without ``-mcpu`` runs generic x86-64 (SSE2, 16-byte vectors) on an AVX2 chip. The optional
``codegen_isa`` / ``codegen_vector_bytes`` fields say so (in a descriptor, or set at import with
``--codegen-isa``); the model's hardware vector then uses the vector width of the generated code.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path

from ..errors import CrosstuneError

FIELDS: tuple[str, ...] = (
    "name", "kind", "vendor", "arch", "compute_units", "clock_mhz", "peak_fp32_gflops",
    "mem_bandwidth_gbs", "l1_kb", "l2_kb", "l3_kb", "shared_mem_per_block_kb", "warp_size",
    "max_threads_per_block", "vector_bytes", "mem_gb",
)
OPTIONAL_FIELDS = ("source", "notes", "codegen_isa", "codegen_vector_bytes")
_OPTIONAL_STRINGS = ("source", "notes", "codegen_isa")
# Instruction sets the generated code may have been compiled for, and their vector register width.
CODEGEN_ISAS: dict[str, int] = {
    "x86-64": 16, "sse2": 16, "sse4.2": 16, "avx": 32, "avx2": 32, "avx512": 64,
    "armv7-neon": 16, "aarch64-neon": 16, "sve": 16, "scalar": 4,
}
NUMERIC_FIELDS = FIELDS[4:]
_STRING_FIELDS = ("name", "kind", "vendor", "arch")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def valid_name(name: str) -> bool:
    """A hardware name: letters, digits, '.', '_' and '-', starting with a letter or digit."""
    return bool(_NAME.match(name))


# Fields that must be > 0 (the rest must be >= 0; 0 means "does not apply").
_POSITIVE = {
    "cpu": ("compute_units", "clock_mhz", "peak_fp32_gflops", "mem_bandwidth_gbs", "l1_kb", "l2_kb", "vector_bytes"),
    "gpu": ("compute_units", "clock_mhz", "peak_fp32_gflops", "mem_bandwidth_gbs", "l2_kb",
            "shared_mem_per_block_kb", "warp_size", "max_threads_per_block", "mem_gb"),
}


@dataclass(frozen=True)
class HardwareSpec:
    name: str
    kind: str
    vendor: str
    arch: str
    compute_units: float
    clock_mhz: float
    peak_fp32_gflops: float
    mem_bandwidth_gbs: float
    l1_kb: float
    l2_kb: float
    l3_kb: float
    shared_mem_per_block_kb: float
    warp_size: float
    max_threads_per_block: float
    vector_bytes: float
    mem_gb: float
    source: str = ""
    notes: str = ""
    codegen_isa: str = ""  # "" = the code could use what the chip has
    codegen_vector_bytes: float = 0.0

    @property
    def code_vector_bytes(self) -> float:
        """Vector width the measured code could use: the codegen's where given, else the chip's."""
        return float(self.codegen_vector_bytes or self.vector_bytes)

    def to_json(self) -> dict:
        data = asdict(self)
        return {k: v for k, v in data.items() if k in FIELDS or v}

    def feature_vector(self) -> list[float]:
        """Model input: is-GPU flag and log2(1 + x) of every numeric field (the fields span six orders
        of magnitude, from warp size to L3 kilobytes)."""
        values = [self.code_vector_bytes if f == "vector_bytes" else float(getattr(self, f)) for f in NUMERIC_FIELDS]
        return [1.0 if self.kind == "gpu" else 0.0] + [math.log2(1.0 + v) for v in values]


FEATURE_NAMES = ("is_gpu",) + tuple(f"log2_1p_{f}" for f in NUMERIC_FIELDS)


def spec_from_dict(data: object, origin: str) -> HardwareSpec:
    """Validate a descriptor; every problem is a CrosstuneError naming ``origin`` and the field."""
    if not isinstance(data, dict):
        raise CrosstuneError(f"{origin}: a hardware spec must be a JSON object")
    unknown = sorted(set(data) - set(FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        raise CrosstuneError(f"{origin}: unknown field(s) {', '.join(unknown)}; the schema is: {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise CrosstuneError(f"{origin}: missing field(s) {', '.join(missing)}")
    for field in _STRING_FIELDS + _OPTIONAL_STRINGS:
        if field in data and not isinstance(data[field], str):
            raise CrosstuneError(f"{origin}: field {field} must be a string")
    if not valid_name(data["name"]):
        raise CrosstuneError(f"{origin}: field name {data['name']!r} must be letters, digits, '.', '_' or '-'")
    if data["kind"] not in ("cpu", "gpu"):
        raise CrosstuneError(f"{origin}: field kind must be \"cpu\" or \"gpu\", not {data['kind']!r}")
    for field in NUMERIC_FIELDS:
        value = data[field]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CrosstuneError(f"{origin}: field {field} must be a finite number, not {value!r}")
        if value < 0:
            raise CrosstuneError(f"{origin}: field {field} must not be negative ({value})")
    codegen_bytes = data.get("codegen_vector_bytes", 0)
    if isinstance(codegen_bytes, bool) or not isinstance(codegen_bytes, (int, float)) \
            or not math.isfinite(codegen_bytes) or codegen_bytes < 0:
        raise CrosstuneError(f"{origin}: field codegen_vector_bytes must be a number >= 0, not {codegen_bytes!r}")
    if data.get("codegen_isa") and not codegen_bytes:
        raise CrosstuneError(f"{origin}: field codegen_isa needs codegen_vector_bytes (the vector width of that ISA)")
    for field in _POSITIVE[data["kind"]]:
        if data[field] <= 0:
            raise CrosstuneError(f"{origin}: field {field} must be positive for a {data['kind']} (got {data[field]})")
    return HardwareSpec(**{k: data[k] for k in FIELDS + OPTIONAL_FIELDS if k in data})


def load_spec_file(path: str | Path) -> HardwareSpec:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise CrosstuneError(f"{path}: cannot read hardware spec ({err.strerror or err})") from None
    except json.JSONDecodeError as err:
        raise CrosstuneError(f"{path}: hardware spec is not valid JSON ({err})") from None
    return spec_from_dict(data, str(path))


def builtin_specs() -> dict[str, HardwareSpec]:
    """The built-in registry (TenSet's six platforms, V100, A100, H100, H200), by name."""
    specs = {}
    for entry in sorted(resources.files("crosstune.hardware").joinpath("specs").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            spec = spec_from_dict(json.loads(entry.read_text()), f"built-in {entry.name}")
            specs[spec.name] = spec
    return specs


def resolve(name: str, spec_file: str | Path | None = None) -> HardwareSpec:
    """The descriptor for ``name``: from ``spec_file`` if given (its name must match), else the
    built-in registry, the local machine (``local``) or one of its ISA/core configurations."""
    if spec_file is not None:
        spec = load_spec_file(spec_file)
        if spec.name != name:
            raise CrosstuneError(f"{spec_file}: spec is named {spec.name!r} but --hardware is {name!r}")
        return spec
    specs = builtin_specs()
    if name.lower() in specs:
        return specs[name.lower()]
    from .local import detect_local, local_configurations  # lazy: detection reads /proc and measures

    if name == "local":
        return detect_local()
    configs = local_configurations()
    if name in configs:
        return configs[name].spec
    known = sorted(specs) + ["local"] + sorted(configs)
    raise CrosstuneError(f"unknown hardware {name!r}; known: {', '.join(known)}; or give --hardware-spec FILE.json")


def with_codegen(spec: HardwareSpec, isa: str) -> HardwareSpec:
    """``spec`` for code compiled for ``isa`` (a name of :data:`CODEGEN_ISAS`), e.g. ``x86-64`` for
    ``llvm`` without ``-mcpu``. Its features then use that ISA's vector width."""
    key = isa.lower()
    if key not in CODEGEN_ISAS:
        raise CrosstuneError(f"unknown --codegen-isa {isa!r}; known: {', '.join(CODEGEN_ISAS)}")
    return replace(spec, codegen_isa=key, codegen_vector_bytes=float(CODEGEN_ISAS[key]))
