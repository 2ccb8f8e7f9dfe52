"""The operators pyard runs, as Relax dataflow patterns (``relax.dpl``) registered under ``pyard.``
with TVM's pattern registry, the way TVM's own external codegens (cublas, cutlass, dnnl) do.

Later patterns have priority, so fused forms (conv2d + bias + ReLU) win over their parts. Each
pattern has a check: shapes and attributes the runtime's operators take, everything else stays on
TVM's CPU path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import tvm
import tvm.tirx
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from tvm.relax.dpl import DFPattern, is_op, wildcard
from tvm.relax.transform import FusionPattern, PatternCheckContext

__all__ = ["ELEMENTWISE", "pyard_patterns"]

# Relax op -> the runtime's element-wise operator (the vector engine's VEC ops, runtime/ops.py).
ELEMENTWISE = {"relax.add": "add", "relax.subtract": "sub", "relax.multiply": "mul", "relax.nn.relu": "relu",
               "relax.tanh": "tanh"}  # fmt: skip
MAX_KERNEL = 7  # CONV2D's largest kernel edge (docs/isa.md)
_registered: list[FusionPattern] = []


def _tensor(expr: relax.Expr) -> relax.TensorType | None:
    ty = expr.ty
    return ty if isinstance(ty, relax.TensorType) and ty.dtype == "float32" else None


def _static(expr: relax.Expr) -> bool:
    """A float32 tensor of known shape (the runtime takes NumPy arrays of fixed shapes)."""
    ty = _tensor(expr)
    return ty is not None and ty.shape is not None and all(isinstance(d, tvm.tirx.IntImm) for d in ty.shape)


def _check_dense(ctx: PatternCheckContext) -> bool:
    x, w = ctx.annotated_expr["x"], ctx.annotated_expr["w"]
    return all(_static(e) and len(e.ty.shape) == 2 for e in (x, w))


def _check_conv(ctx: PatternCheckContext) -> bool:
    conv = ctx.annotated_expr["conv"]
    attrs = conv.attrs
    pads = [int(p) for p in attrs.padding]
    strides = [int(s) for s in attrs.strides]
    kernel = [int(d) for d in conv.args[1].ty.shape]
    return (
        _static(conv.args[0])
        and _static(conv.args[1])
        and attrs.data_layout == "NCHW"
        and attrs.kernel_layout == "OIHW"
        and int(attrs.groups) == 1
        and all(int(d) == 1 for d in attrs.dilation)
        and len(set(pads)) == 1  # the runtime pads every edge alike
        and len(set(strides)) == 1
        and max(kernel[2:]) <= MAX_KERNEL
    )


def _check_bias(ctx: PatternCheckContext) -> bool:
    """A bias the host can broadcast: one value per output column (dense) or channel (conv2d)."""
    bias, root = ctx.annotated_expr["bias"], ctx.annotated_expr["core"]
    if not _static(bias):
        return False
    shape, out = [int(d) for d in bias.ty.shape], [int(d) for d in root.ty.shape]
    if "conv" in ctx.annotated_expr:
        return shape in ([1, out[1], 1, 1], [out[1], 1, 1])
    return shape in ([out[-1]], [1, out[-1]])


def _check_elementwise(ctx: PatternCheckContext) -> bool:
    """Same-shape operands only (the vector engine does not broadcast)."""
    root = ctx.annotated_expr["root"]
    shapes = [tuple(int(d) for d in a.ty.shape) for a in root.args if _static(a)]
    return len(shapes) == len(root.args) and len(set(shapes)) == 1


def _all(*checks: Callable[[PatternCheckContext], bool]) -> Callable[[PatternCheckContext], bool]:
    return lambda ctx: all(check(ctx) for check in checks)


def _core(kind: str) -> tuple[DFPattern, dict[str, DFPattern]]:
    x, w = wildcard(), wildcard()
    if kind == "conv2d":
        core = is_op("relax.nn.conv2d")(x, w)
        return core, {"x": x, "w": w, "conv": core, "core": core}
    core = is_op("relax.matmul")(x, w)
    return core, {"x": x, "w": w, "core": core}


def _compute(kind: str, bias: bool, relu: bool) -> FusionPattern:
    root, ann = _core(kind)
    checks = [_check_conv if kind == "conv2d" else _check_dense]
    name = kind
    if bias:
        ann["bias"] = wildcard()
        root = is_op("relax.add")(root, ann["bias"])
        checks.append(_check_bias)
        name += "_bias"
    if relu:
        root = is_op("relax.nn.relu")(root)
        name += "_relu"
    ann["root"] = root
    return FusionPattern(f"pyard.{name}", root, ann, _all(*checks))


def _elementwise(op: str, name: str) -> FusionPattern:
    args = [wildcard() for _ in range(1 if name in ("relu", "tanh") else 2)]
    root = is_op(op)(*args)
    return FusionPattern(f"pyard.{name}", root, {"root": root}, _check_elementwise)


def _constant(expr: relax.Expr) -> npt.NDArray | None:
    """The value of a constant (a QDQ scale or zero point), else None."""
    return expr.value.numpy() if isinstance(expr, tvm.ir.expr.Constant) else None


def _scalar(expr: relax.Expr) -> float | None:
    """The value of a scalar constant, else None."""
    value = _constant(expr)
    return float(value) if value is not None and value.ndim == 0 else None


def _per_channel(dq: relax.Call, channels: int) -> bool:
    """A weight dequantize with one scale per output channel (OIHW axis 0) and zero points 0."""
    scale, zero = _constant(dq.args[1]), _constant(dq.args[2])
    return (
        scale is not None
        and zero is not None
        and scale.shape == (channels,)
        and int(dq.attrs.axis) in (0, -4)
        and not np.any(zero)
    )


def _check_quantized(ctx: PatternCheckContext) -> bool:
    """Per-tensor activation scales, zero points 0 (the tile's int8 is symmetric), int8 operands
    and result; conv2d's weights may instead have a scale per output channel."""
    dqx, dqw, root = (ctx.annotated_expr[k] for k in ("dqx", "dqw", "root"))
    conv = ctx.annotated_expr.get("conv")
    if any(_scalar(c.args[1]) is None or _scalar(c.args[2]) != 0 for c in (dqx, root)):
        return False
    per_tensor = _scalar(dqw.args[1]) is not None and _scalar(dqw.args[2]) == 0
    if not (per_tensor or (conv is not None and _per_channel(dqw, int(dqw.args[0].ty.shape[0])))):
        return False
    rank = 2 if conv is None else 4
    ints = (dqx.args[0], dqw.args[0], root)
    return all(str(e.ty.dtype) == "int8" and len(e.ty.shape) == rank for e in ints) and (
        conv is None or _check_conv(ctx)
    )


def _quantized(kind: str) -> FusionPattern:
    """``quantize(core(dequantize(xq), dequantize(wq)))``: an ONNX QDQ MatMul (``qdense``) or Conv
    without bias (``qconv2d``)."""
    dqx = is_op("relax.dequantize")(wildcard(), wildcard(), wildcard())
    dqw = is_op("relax.dequantize")(wildcard(), wildcard(), wildcard())
    core = is_op("relax.nn.conv2d" if kind == "conv2d" else "relax.matmul")(dqx, dqw)
    root = is_op("relax.quantize")(core, wildcard(), wildcard())
    ann = {"dqx": dqx, "dqw": dqw, "root": root} | ({"conv": core} if kind == "conv2d" else {})
    return FusionPattern(f"pyard.q{kind}", root, ann, _check_quantized)


def pyard_patterns() -> list[FusionPattern]:
    """The patterns, registered once with TVM's registry; highest priority first (as TVM returns them)."""
    if not _registered:
        table = [_elementwise(op, name) for op, name in ELEMENTWISE.items()]
        table += [_compute(kind, bias, relu) for kind in ("dense", "conv2d") for bias in (False, True)
                  for relu in (False, True)]  # fmt: skip
        table += [_quantized("dense"), _quantized("conv2d")]
        register_patterns(table)
        _registered.extend(table)
    return list(get_patterns_with_prefix("pyard."))
