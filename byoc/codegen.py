"""The pyard codegen (``relax.ext.pyard``) and its run time.

``RunCodegen`` hands every region function to ``relax.ext.pyard`` (registered here from Python)
and replaces each call with ``R.call_dps_packed(<region symbol>, args)``. The codegen compiles a
region into a :class:`Program` (a list of runtime operators with their operands and attributes)
and registers a PackedFunc under the region's symbol; it returns no runtime module, so the Relax
VM finds the symbol in TVM's global function table when it runs. The PackedFunc runs the program
on the devices of the bound :class:`runtime.Runtime` and writes the destination tensor. Everything
else in the module is compiled by TVM for the CPU (``tvm.compile(..., target="llvm")``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import tvm
from tvm import relax

from byoc.partition import DEFAULT_MACS_PER_BYTE, Region, partition_for_pyard
from rtl.config import AccelConfig
from runtime import Runtime, ops

__all__ = ["Program", "PyardExecutable", "Step", "build"]


@dataclass
class Step:
    """One composite: the runtime operators of ``kind`` on ``inputs`` (slots) into ``out``."""

    kind: str  # composite name without "pyard.", e.g. "conv2d_bias_relu", "add"
    inputs: list[int]
    out: int
    stride: int = 1
    pad: int = 0


@dataclass
class Program:
    """A region compiled for pyard: slots 0..n-1 are its parameters, ``results`` the output slots
    (several where the region's result is a tuple)."""

    name: str
    params: int
    steps: list[Step]
    results: list[int]


@dataclass
class Stats:
    """Per-run counters the executable collects from its regions."""

    calls: int = 0
    seconds: float = 0.0
    per_region: dict[str, int] = field(default_factory=dict)


_PROGRAMS: dict[str, Program] = {}
_builds = 0  # builds so far: each build's region symbols are its own
_bound = threading.local()  # the Runtime regions run on, set by PyardExecutable.__call__


def _compile_region(func: relax.Function) -> Program:
    """The region's bindings in order: local composite definitions, then calls to them."""
    slot: dict[relax.Var, int] = {p: i for i, p in enumerate(func.params)}
    local: dict[relax.Var, relax.Function] = {}
    steps: list[Step] = []
    for block in func.body.blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Function):
                local[b.var] = value
                continue
            if not (isinstance(value, relax.Call) and value.op in local):
                raise NotImplementedError(f"pyard codegen: unexpected binding in a region: {value}")
            slot[b.var] = len(slot)
            steps.append(_step(local[value.op], [slot[a] for a in value.args], slot[b.var]))
    result = func.body.body
    outputs = list(result.fields) if isinstance(result, relax.Tuple) else [result]
    return Program(str(func.attrs["global_symbol"]), len(func.params), steps, [slot[v] for v in outputs])


def _step(composite: relax.Function, inputs: list[int], out: int) -> Step:
    """The composite's call as a step; ``inputs`` are the slots of its arguments, in the order of
    its parameters (for float composites the order of the pattern: x, w[, bias] or a[, b])."""
    kind = str(composite.attrs["Composite"]).removeprefix("pyard.")
    slot_of = dict(zip(composite.params, inputs, strict=True))
    step = Step(kind, inputs, out)
    calls = [b.value for block in composite.body.blocks for b in block.bindings if isinstance(b.value, relax.Call)]
    for call in calls:
        if call.op.name == "relax.nn.conv2d":
            step.stride, step.pad = int(call.attrs.strides[0]), int(call.attrs.padding[0])
    if kind == "qdense":  # TVM shares equal constants among the parameters: find each by its role
        dqx, dqw, q = (c for c in calls if c.op.name != "relax.matmul")
        step.inputs = [slot_of[e] for e in (dqx.args[0], dqw.args[0], dqx.args[1], dqw.args[1], q.args[1])]
    return step


@tvm.register_global_func("relax.ext.pyard")
def _codegen(functions: list[relax.Function], options: Any, constant_names: Any) -> list:
    for func in functions:
        program = _compile_region(func)
        _PROGRAMS[program.name] = program
        tvm.register_global_func(program.name, _packed(program), override=True)
    return []  # no runtime module: the regions' symbols are global functions


def _packed(program: Program) -> Any:
    def run(*tensors: Any) -> None:
        runtime, stats = getattr(_bound, "runtime", None), getattr(_bound, "stats", None)
        if runtime is None or stats is None:
            raise RuntimeError(f"pyard region {program.name}: run the model through its PyardExecutable")
        start = time.perf_counter()
        outs = run_program(runtime, program, [t.numpy() for t in tensors[: program.params]])
        for tensor, out in zip(tensors[program.params :], outs, strict=True):
            tensor.copyfrom(np.ascontiguousarray(out, str(tensor.dtype)))
        stats.calls += 1
        stats.seconds += time.perf_counter() - start
        stats.per_region[program.name] = stats.per_region.get(program.name, 0) + 1

    return run


def run_program(rt: Runtime, program: Program, args: list[npt.NDArray]) -> list[npt.NDArray]:
    """Each step on the runtime's devices; the host only changes layouts and broadcasts biases."""
    values: dict[int, npt.NDArray] = dict(enumerate(args))
    for step in program.steps:
        values[step.out] = _run_step(rt, step, [values[i] for i in step.inputs])
    return [values[i] for i in program.results]


def _run_step(rt: Runtime, step: Step, xs: list[npt.NDArray]) -> npt.NDArray:
    kind = step.kind
    if kind in ("add", "sub", "mul", "relu", "tanh"):
        return getattr(rt, kind)(*xs)
    if kind == "qdense":
        return _qdense(rt, *xs)
    if kind.startswith("dense"):
        y = rt.gemm(xs[0], xs[1])
    else:  # conv2d: NCHW / OIHW in Relax, NHWC / HWIO on the tile
        nhwc = rt.conv2d(xs[0].transpose(0, 2, 3, 1), xs[1].transpose(2, 3, 1, 0), stride=step.stride, pad=step.pad)
        y = nhwc.transpose(0, 3, 1, 2)
    if "_bias" in kind:  # the vector engine has no broadcast: the host repeats the bias
        y = rt.add(y, np.broadcast_to(xs[2].reshape(_bias_shape(xs[2], y)), y.shape))
    if kind.endswith("_relu"):
        y = rt.relu(y)
    return y


def _qdense(
    rt: Runtime, xq: npt.NDArray, wq: npt.NDArray, sx: npt.NDArray, sw: npt.NDArray, sy: npt.NDArray
) -> npt.NDArray:
    """The int8 tile's GEMM on the model's integers (exact int32 accumulators, summed over K blocks
    in int64), requantized on the host as onnxruntime's QLinearMatMul does: ``rint(float32(acc) *
    float32(sx * sw / sy))``, clipped to int8. The runtime reads the accumulators at full width, so
    the read-out's own requantization is not used (docs/byoc.md)."""
    acc = ops.gemm_partials(rt.pool("int8"), xq.view(np.uint8), wq.view(np.uint8))
    f32 = np.float32
    scale = f32(f32(sx) * f32(sw)) / f32(sy)
    return np.clip(np.rint(acc.astype(f32) * scale), -128, 127).astype(np.int8)


def _bias_shape(bias: npt.NDArray, y: npt.NDArray) -> tuple[int, ...]:
    return (1, y.shape[1], 1, 1) if y.ndim == 4 else (1, y.shape[-1])


class PyardExecutable:
    """A model compiled by TVM with its pyard regions; call it with NumPy inputs."""

    def __init__(self, vm: relax.VirtualMachine, runtime: Runtime, regions: list[Region]) -> None:
        self.vm, self.runtime, self.regions = vm, runtime, regions
        self.stats = Stats()

    def __call__(self, *inputs: npt.NDArray) -> npt.NDArray:
        _bound.runtime, _bound.stats = self.runtime, self.stats
        try:
            out = self.vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x, np.float32)) for x in inputs])
        finally:
            _bound.runtime = _bound.stats = None
        return out.numpy()


def _unique_symbols(mod: tvm.IRModule) -> tvm.IRModule:
    """Region symbols unique to this build: they name global functions, and two models (or two
    builds of one) may have regions TVM names alike."""
    global _builds
    _builds += 1
    out = mod
    for index, (gv, func) in enumerate(mod.functions.items()):
        if isinstance(func, relax.Function) and func.attrs and func.attrs.get("Codegen") == "pyard":
            out[gv] = func.with_attr("global_symbol", f"pyard_b{_builds}_r{index}")
    return out


def build(
    mod: tvm.IRModule,
    runtime: Runtime,
    *,
    config: str | AccelConfig | None = None,
    min_macs_per_byte: float = DEFAULT_MACS_PER_BYTE,
) -> PyardExecutable:
    """Partition ``mod`` for pyard, run the codegen, compile the rest for the CPU."""
    cfg = config or runtime.configs[runtime.default_precision]
    mod, regions = partition_for_pyard(mod, cfg, min_macs_per_byte=min_macs_per_byte)
    mod = relax.transform.RunCodegen()(_unique_symbols(mod))
    executable = tvm.compile(mod, target="llvm")
    return PyardExecutable(relax.VirtualMachine(executable, tvm.cpu()), runtime, regions)
