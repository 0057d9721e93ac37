"""Operator descriptions: what the workload of a task computes, parsed from its key.

A workload key is TVM's JSON list naming the compute function and its shape arguments, either named
(``["conv2d_layer", 128, 1008, 42, 42, 168, 1, 1, 1, 0]``) or, as in TenSet, a hash of the compute DAG
followed by the tensor shapes (``["d7b65649a4dd54becea0a52aabbc5af5", 1, 1000, 1, 1000]``). Named keys
give an operator kind and a FLOP estimate; hashed keys give only their shape arguments.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import orjson

OP_KINDS: tuple[str, ...] = (
    "unknown", "conv2d", "depthwise_conv2d", "conv2d_transpose", "conv3d", "matmul", "batch_matmul",
    "dense", "pool", "reduction", "elementwise", "softmax", "norm", "sparse", "fused",
)
OP_KIND_ID = {name: i for i, name in enumerate(OP_KINDS)}

# Strings in workload keys (padding modes, pool types, dtypes) as small stable codes.
_STRING_CODES = {"SAME": 1.0, "VALID": 2.0, "avg": 1.0, "max": 2.0, "float32": 32.0, "float16": 16.0,
                 "int8": 8.0, "true": 1.0, "false": 0.0}

_HASH_KEY = re.compile(r"^[0-9a-f]{32}$")


class WorkloadKeyError(ValueError):
    """A workload key that is not a JSON list starting with a name or hash."""


@dataclass(frozen=True, slots=True)
class Operator:
    """What a task computes. ``args`` are the numeric shape arguments of the key, flattened."""

    name: str
    kind: str
    args: tuple[float, ...]
    flops: float  # NaN where the operator is unknown

    @property
    def kind_id(self) -> int:
        return OP_KIND_ID.get(self.kind, 0)


def task_id_of(workload_key: str) -> str:
    """Stable id of a workload (independent of hardware), 16 hex digits."""
    return hashlib.blake2b(workload_key.encode(), digest_size=8).hexdigest()


def _flatten(values: list) -> list[float]:
    out: list[float] = []
    for value in values:
        if isinstance(value, bool):
            out.append(float(value))
        elif isinstance(value, (int, float)):
            out.append(float(value))
        elif isinstance(value, list):
            out.extend(_flatten(value))
        elif isinstance(value, str):
            out.append(_STRING_CODES.get(value, 0.0))
        # None and other values carry no shape information
    return out


def _out_size(size: int, kernel: int, stride: int, padding: object) -> int:
    if padding == "SAME":
        return -(-size // stride)
    if padding == "VALID":
        return (size - kernel) // stride + 1
    pad = padding[0] if isinstance(padding, list) else padding
    return (size + 2 * int(pad) - kernel) // stride + 1


def _prod(values) -> float:
    result = 1.0
    for v in values:
        result *= float(v)
    return result


def _named_flops(name: str, a: list) -> tuple[str, float]:
    """Operator kind and FLOP estimate for the named workloads of TVM's tutorials and the TenSet/Roller
    scripts. Unknown layouts give NaN rather than a wrong number."""
    try:
        if name == "conv2d_layer":
            if isinstance(a[7], list):  # TVM tutorial: N, H, W, CO, CI, KH, KW, stride[2], padding[2]
                n, h, w, co, ci, kh, kw, stride, pad = a[:9]
                oh, ow = _out_size(h, kh, stride[0], pad), _out_size(w, kw, stride[1], pad)
            else:  # TenSet/Roller scripts: N, CI, H, W, CO, KH, KW, stride, padding
                n, ci, h, w, co, kh, kw, stride, pad = a[:9]
                oh, ow = _out_size(h, kh, stride, pad), _out_size(w, kw, stride, pad)
            return "conv2d", 2.0 * n * co * oh * ow * ci * kh * kw
        if name == "depthwise_conv2d_layer":
            n, c, h, w, kh, kw, stride, pad = a[:8]
            return "depthwise_conv2d", 2.0 * n * c * _out_size(h, kh, stride, pad) * _out_size(w, kw, stride, pad) * kh * kw
        if name in ("matmul_layer", "matmul", "matmul_add", "dense_layer"):
            m, k, n = a[:3]
            return ("dense" if name == "dense_layer" else "matmul"), 2.0 * m * k * n
        if name in ("batch_matmul_layer", "batch_matmul"):
            b, m, k, n = a[:4]
            return "batch_matmul", 2.0 * b * m * k * n
        if name == "pool_layer":
            _, n, c, h, w, kh, kw, stride, pad = a[:9]
            return "pool", float(n * c * _out_size(h, kh, stride, pad) * _out_size(w, kw, stride, pad) * kh * kw)
        if name == "reduction_layer":
            return "reduction", _prod(a[0])
        if name in ("relu_layer", "add_layer", "elementwise_layer"):
            return "elementwise", _prod(a[:4])
        if name == "sparse_dense":
            return "sparse", math.nan
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        return _guess_kind(name), math.nan
    return _guess_kind(name), math.nan


def _guess_kind(name: str) -> str:
    lowered = name.lower()
    for needle, kind in (("depthwise", "depthwise_conv2d"), ("conv2d_transpose", "conv2d_transpose"),
                         ("conv3d", "conv3d"), ("conv", "conv2d"), ("batch_matmul", "batch_matmul"),
                         ("matmul", "matmul"), ("dense", "dense"), ("pool", "pool"), ("softmax", "softmax"),
                         ("norm", "norm"), ("sparse", "sparse"), ("reduc", "reduction"), ("sum", "reduction"),
                         ("mean", "reduction"), ("relu", "elementwise"), ("add", "elementwise")):
        if needle in lowered:
            return kind
    return "unknown"


def parse_workload_key(workload_key: str) -> Operator:
    """Parse an Ansor workload key (a JSON string). Raises WorkloadKeyError when it does not parse."""
    try:
        value = orjson.loads(workload_key)
    except orjson.JSONDecodeError as err:
        raise WorkloadKeyError(f"workload key is not JSON: {err}") from None
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise WorkloadKeyError("workload key is not a list starting with a name or hash")
    name, args = value[0], value[1:]
    numeric = tuple(_flatten(args))
    if _HASH_KEY.match(name):
        return Operator(name=name, kind="unknown", args=numeric, flops=math.nan)
    kind, flops = _named_flops(name, args)
    return Operator(name=name, kind=kind, args=numeric, flops=flops)


# Which block names the operator of a fused function: the heaviest kind present wins.
_ANCHOR_PRIORITY = ("conv2d_transpose", "conv3d", "depthwise_conv2d", "conv2d", "batch_matmul", "matmul", "dense",
                    "sparse", "softmax", "norm", "pool", "reduction", "elementwise", "unknown")


def operator_from_shapes(block_names: list[str], shapes: list[list[int]]) -> Operator:
    """Operator of a MetaSchedule workload from its SBlock names and its parameter shapes (inputs
    first, output last, as TVM orders a PrimFunc's buffers)."""
    named = [b for b in block_names if b != "root"]
    anchor = min(named, key=lambda b: _ANCHOR_PRIORITY.index(_guess_kind(b)), default="unknown")
    kind = _guess_kind(anchor)
    if kind == "conv2d" and len(shapes) >= 3 and len(shapes[1]) == 4 and shapes[1][1] == 1 and shapes[0][1] == shapes[1][0] > 1:
        kind = "depthwise_conv2d"  # weight (C, 1, KH, KW) over C input channels: one filter per channel
    if kind == "unknown" and any(b.startswith("T_") for b in block_names):
        kind = "elementwise"
    if sum(1 for b in block_names if b != "root") > 2 and kind in ("elementwise", "unknown"):
        kind = "fused"
    args = tuple(float(d) for shape in shapes for d in shape)
    flops = math.nan
    if shapes:
        out = _prod(shapes[-1])
        if kind in ("conv2d", "depthwise_conv2d", "conv2d_transpose", "conv3d") and len(shapes) >= 3:
            flops = 2.0 * out * _prod(shapes[1][1:])
        elif kind in ("matmul", "dense", "batch_matmul") and len(shapes) >= 3:
            flops = 2.0 * out * float(shapes[0][-1])
        elif kind in ("reduction", "pool", "softmax", "norm"):
            flops = _prod(shapes[0])
        else:
            flops = out
    return Operator(name=anchor, kind=kind, args=args, flops=flops)


# ---------------------------------------------------------------------------------------------------
# AutoTVM templates: (template name, template args) as in an AutoTVM log's "input"
# ---------------------------------------------------------------------------------------------------

def _tensor_shape(arg: object) -> list[int] | None:
    """``["TENSOR", shape, dtype]`` -> shape (AutoTVM's serialisation of a placeholder)."""
    if isinstance(arg, list) and len(arg) == 3 and arg[0] == "TENSOR" and isinstance(arg[1], list) \
            and all(isinstance(d, int) and not isinstance(d, bool) for d in arg[1]):
        return arg[1]
    return None


def _pair(value: object) -> tuple[int, int]:
    if isinstance(value, list):
        return (int(value[0]), int(value[-1])) if len(value) in (1, 2) else (int(value[0]), int(value[1]))
    return int(value), int(value)


def _padding(value: object) -> tuple[int, int, int, int]:
    """TVM's padding forms: int, [h, w] or [top, left, bottom, right] -> (top, left, bottom, right)."""
    if isinstance(value, list):
        if len(value) == 4:
            return tuple(int(v) for v in value)  # type: ignore[return-value]
        if len(value) == 2:
            return int(value[0]), int(value[1]), int(value[0]), int(value[1])
        if len(value) == 1:
            value = value[0]
    p = int(value)
    return p, p, p, p


def _conv_out(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int) -> int:
    return (size + pad_before + pad_after - ((kernel - 1) * dilation + 1)) // stride + 1


def _autotvm_conv(name: str, args: list, depthwise: bool) -> tuple[tuple[float, ...], float]:
    data, kernel = _tensor_shape(args[0]), _tensor_shape(args[1])
    if data is None or kernel is None or len(data) != 4 or len(kernel) != 4:
        raise ValueError("conv2d arguments are not 4-D tensors")
    nhwc = "nhwc" in name.lower() or "NHWC" in [a for a in args[5:] if isinstance(a, str)]
    if nhwc:  # data NHWC, kernel HWIO (HWOI for depthwise: H, W, C, multiplier)
        n, h, w, ci = data
        kh, kw, k2, k3 = kernel
        co = k2 * k3 if depthwise else k3
    else:  # data NCHW, kernel OIHW (depthwise: C, multiplier, KH, KW)
        n, ci, h, w = data
        k0, k1, kh, kw = kernel
        co = k0 * k1 if depthwise else k0
    sh, sw = _pair(args[2])
    pt, pl, pb, pr = _padding(args[3])
    dh, dw = _pair(args[4]) if len(args) > 4 and isinstance(args[4], (int, list)) else (1, 1)
    oh, ow = _conv_out(h, kh, sh, pt, pb, dh), _conv_out(w, kw, sw, pl, pr, dw)
    per_output = kh * kw * (1 if depthwise else ci)
    flops = 2.0 * n * co * oh * ow * per_output
    return (n, ci, h, w, co, kh, kw, sh, sw, pt + pb, pl + pr, dh, dw), flops


def _autotvm_matmul(name: str, args: list) -> tuple[str, tuple[float, ...], float]:
    a, b = _tensor_shape(args[0]), _tensor_shape(args[1])
    if a is None or b is None:
        raise ValueError("matmul arguments are not tensors")
    if "batch_matmul" in name:
        if len(a) != 3 or len(b) != 3:
            raise ValueError("batch_matmul arguments are not 3-D")
        # (x, y, out_shape, out_dtype[, transpose_a, transpose_b]); before the flags existed y was [B, N, K]
        transpose_a = bool(args[4]) if len(args) > 5 else False
        transpose_b = bool(args[5]) if len(args) > 5 else True
        batch = max(a[0], b[0])
        m, k = (a[2], a[1]) if transpose_a else (a[1], a[2])
        n = b[1] if transpose_b else b[2]
        return "batch_matmul", (batch, m, k, n), 2.0 * batch * m * k * n
    if len(a) != 2 or len(b) != 2:
        raise ValueError("dense arguments are not 2-D")
    m, k = a
    n = b[0]  # dense weight is [N, K]
    return "dense", (m, k, n), 2.0 * m * k * n


def operator_from_autotvm(template: str, args: list) -> Operator:
    """Operator of an AutoTVM task from its template name (``conv2d_NCHWc.x86``) and arguments.

    conv2d (direct, spatial-pack, NCHWc, winograd) and depthwise conv2d give
    (N, CI, H, W, CO, KH, KW, SH, SW, pad_h, pad_w, DH, DW) and their FLOPs (winograd counts the direct
    convolution's, so the same layer compares across templates); dense gives (M, K, N); batch_matmul
    (B, M, K, N). Other templates get their kind guessed from the name, the tensor shapes as args and
    FLOPs NaN."""
    lowered = template.lower()
    try:
        if "conv2d" in lowered and "transpose" not in lowered and len(args) >= 4:
            depthwise = "depthwise" in lowered
            shape, flops = _autotvm_conv(lowered, args, depthwise)
            return Operator(template, "depthwise_conv2d" if depthwise else "conv2d", tuple(map(float, shape)), flops)
        if ("dense" in lowered or "matmul" in lowered) and len(args) >= 2:
            kind, shape, flops = _autotvm_matmul(lowered, args)
            return Operator(template, kind, tuple(map(float, shape)), flops)
    except (TypeError, ValueError, IndexError):
        pass  # an unexpected layout: fall back to the plain shapes rather than a wrong FLOP count
    shapes = [d for arg in args for d in (_tensor_shape(arg) or [])]
    return Operator(template, _guess_kind(template), tuple(map(float, shapes)), math.nan)
