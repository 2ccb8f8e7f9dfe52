"""The pyard codegen (``relax.ext.pyard``) and its run time.

``RunCodegen`` hands every region function to ``relax.ext.pyard`` (registered here from Python)
and replaces each call with ``R.call_dps_packed(<region symbol>, args)``. The codegen compiles a
region into a :class:`Program` (a list of runtime operators with their operands and attributes)
and returns one runtime module for all regions: C source (``runtime.CSourceModuleCreate``) with
a function per region symbol that embeds the region's program (JSON) and forwards the call to the
global function ``pyard.run_region`` (registered when this module is imported). ``tvm.compile``
imports that module into the executable, and ``export_library`` compiles it into the shared
library with TVM's CPU code, so the regions survive ``tvm.runtime.load_module`` in another
process (:func:`load`). ``pyard.run_region`` runs the program on the devices of the bound
:class:`runtime.Runtime` and writes the destination tensors. Everything else in the module is
compiled by TVM for the CPU (``tvm.compile(..., target="llvm")``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tvm
from tvm import relax

from byoc.partition import DEFAULT_MACS_PER_BYTE, Region, partition_for_pyard
from rtl.config import AccelConfig
from runtime import Runtime, ops

__all__ = ["ENTRY", "Program", "PyardExecutable", "Step", "build", "load", "region_source"]

ENTRY = "pyard.run_region"  # the global function every region's C stub calls
QUANTIZED = ("qdense", "qconv2d")  # int8 QDQ composites: the model's integers on the int8 tile


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> Program:
        data = json.loads(text)
        return Program(data["name"], data["params"], [Step(**step) for step in data["steps"]], data["results"])


@dataclass
class Stats:
    """Per-run counters the executable collects from its regions."""

    calls: int = 0
    seconds: float = 0.0
    per_region: dict[str, int] = field(default_factory=dict)


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
    bound = {b.var: b.value for block in composite.body.blocks for b in block.bindings}
    calls = [v for v in bound.values() if isinstance(v, relax.Call)]
    core = next((c for c in calls if c.op.name in ("relax.nn.conv2d", "relax.matmul")), None)
    if core is None:  # element-wise: its inputs as they are
        return step
    if core.op.name == "relax.nn.conv2d":
        step.stride, step.pad = int(core.attrs.strides[0]), int(core.attrs.padding[0])
    if kind in QUANTIZED:  # TVM shares equal constants among the parameters: find each by its role
        dqx, dqw = bound[core.args[0]], bound[core.args[1]]
        q = next(c for c in calls if c.op.name == "relax.quantize")
        step.inputs = [slot_of[e] for e in (dqx.args[0], dqw.args[0], dqx.args[1], dqw.args[1], q.args[1])]
    return step


@tvm.register_global_func("relax.ext.pyard")
def _codegen(functions: list[relax.Function], options: Any, constant_names: Any) -> list:
    programs = [_compile_region(func) for func in functions]
    if not programs:
        return []
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    return [create(region_source(programs), "c", [p.name for p in programs], [])]


# The C side of a region: TVM's packed-function ABI (tvm/ffi/c_api.h). Each exported
# ``__tvm_ffi_<symbol>`` prepends its program (a C string) to the call's arguments and calls the
# entry point, looked up once; a library loaded without byoc.codegen imported fails with a message.
# export_library may compile the file as C++: the exports keep C names.
_C_PRELUDE = """#include <stdlib.h>
#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
#define PYARD_EXPORT extern "C" TVM_FFI_DLL_EXPORT
#else
#define PYARD_EXPORT TVM_FFI_DLL_EXPORT
#endif

static int pyard_region(const char* program, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  static TVMFFIObjectHandle entry = NULL;
  if (entry == NULL) {
    TVMFFIByteArray name = {"%(entry)s", %(entry_len)d};
    if (TVMFFIFunctionGetGlobal(&name, &entry) != 0) return -1;
    if (entry == NULL) {
      TVMFFIErrorSetRaisedFromCStr("RuntimeError",
                                   "%(entry)s is not registered: import byoc.codegen to run pyard regions");
      return -1;
    }
  }
  TVMFFIAny* packed = (TVMFFIAny*)malloc(sizeof(TVMFFIAny) * (size_t)(num_args + 1));
  if (packed == NULL) {
    TVMFFIErrorSetRaisedFromCStr("MemoryError", "pyard region: no memory for the arguments");
    return -1;
  }
  packed[0].type_index = kTVMFFIRawStr;
  packed[0].zero_padding = 0;
  packed[0].v_c_str = program;
  for (int32_t i = 0; i < num_args; ++i) packed[i + 1] = args[i];
  int status = TVMFFIFunctionCall(entry, packed, num_args + 1, result);
  free(packed);
  return status;
}
"""


def region_source(programs: list[Program]) -> str:
    """C source of the regions' runtime module: each program as a byte array (no escaping to get
    wrong) and its exported packed function."""
    parts = [_C_PRELUDE % {"entry": ENTRY, "entry_len": len(ENTRY)}]
    for program in programs:
        data = ",".join(str(byte) for byte in (*program.to_json().encode(), 0))
        parts.append(
            f"static const char {program.name}_program[] = {{{data}}};\n"
            f"PYARD_EXPORT int __tvm_ffi_{program.name}(void* self, const TVMFFIAny* args, int32_t num_args,\n"
            f"                                    TVMFFIAny* result) {{\n"
            f"  return pyard_region({program.name}_program, args, num_args, result);\n}}\n"
        )
    return "\n".join(parts)


@tvm.register_global_func(ENTRY)
def _run_region(program_json: str, *tensors: Any) -> None:
    """A region's call from its C stub: ``tensors`` are its parameters, then its outputs."""
    runtime, stats = getattr(_bound, "runtime", None), getattr(_bound, "stats", None)
    program = Program.from_json(program_json)
    if runtime is None or stats is None:
        raise RuntimeError(f"pyard region {program.name}: run the model through its PyardExecutable")
    start = time.perf_counter()
    outs = run_program(runtime, program, [t.numpy() for t in tensors[: program.params]])
    for tensor, out in zip(tensors[program.params :], outs, strict=True):
        tensor.copyfrom(np.ascontiguousarray(out, str(tensor.dtype)))
    stats.calls += 1
    stats.seconds += time.perf_counter() - start
    stats.per_region[program.name] = stats.per_region.get(program.name, 0) + 1


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
    if kind in QUANTIZED:
        return _quantized(rt, step, *xs)
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


def _quantized(
    rt: Runtime, step: Step, xq: npt.NDArray, wq: npt.NDArray, sx: npt.NDArray, sw: npt.NDArray, sy: npt.NDArray
) -> npt.NDArray:
    """The int8 tile's GEMM or CONV2D on the model's integers (exact int32 accumulators; GEMM's K
    blocks summed in int64), requantized on the host as onnxruntime's QLinearMatMul / QLinearConv
    do: ``rint(float32(acc) * float32(float32(sx * sw) / sy))``, clipped to int8, with ``sw`` one
    scale or one per output channel. The runtime reads the accumulators at full width, so the
    read-out's own requantization is not used (docs/byoc.md)."""
    pool = rt.pool("int8")
    if step.kind == "qdense":
        acc = ops.gemm_partials(pool, xq.view(np.uint8), wq.view(np.uint8))
    else:  # NCHW / OIHW in Relax, NHWC / HWIO on the tile; the channel axis last for the scales
        x, w = xq.transpose(0, 2, 3, 1).view(np.uint8), wq.transpose(2, 3, 1, 0).view(np.uint8)
        acc = ops.conv2d_partials(pool, x, w, step.stride, step.pad)
    f32 = np.float32
    scale = (np.asarray(sx, f32) * np.asarray(sw, f32)) / np.asarray(sy, f32)
    out = np.clip(np.rint(acc.astype(f32) * scale.astype(f32)), -128, 127).astype(np.int8)
    return out if step.kind == "qdense" else out.transpose(0, 3, 1, 2)


def _bias_shape(bias: npt.NDArray, y: npt.NDArray) -> tuple[int, ...]:
    return (1, y.shape[1], 1, 1) if y.ndim == 4 else (1, y.shape[-1])


class PyardExecutable:
    """A model compiled by TVM with its pyard regions; call it with NumPy inputs."""

    def __init__(
        self, vm: relax.VirtualMachine, runtime: Runtime, regions: list[Region], executable: Any = None
    ) -> None:
        self.vm, self.runtime, self.regions, self.executable = vm, runtime, regions, executable
        self.stats = Stats()

    def export_library(self, path: str | Path) -> None:
        """The compiled model as one shared library: TVM's CPU code and the regions' C module
        (their programs inside); :func:`load` runs it again."""
        if self.executable is None:
            raise ValueError("path: this executable was loaded from a library, export that library instead")
        self.executable.export_library(str(path))

    def __call__(self, *inputs: npt.NDArray) -> npt.NDArray:
        _bound.runtime, _bound.stats = self.runtime, self.stats
        try:
            out = self.vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x, np.float32)) for x in inputs])
        finally:
            _bound.runtime = _bound.stats = None
        return out.numpy()


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
    executable = tvm.compile(relax.transform.RunCodegen()(mod), target="llvm")
    return PyardExecutable(relax.VirtualMachine(executable, tvm.cpu()), runtime, regions, executable)


def load(path: str | Path, runtime: Runtime) -> PyardExecutable:
    """A library saved with ``PyardExecutable.export_library`` (or TVM's ``export_library`` of the
    executable), in this or another process: its regions run on ``runtime``'s devices."""
    library = tvm.runtime.load_module(str(path))
    return PyardExecutable(relax.VirtualMachine(library, tvm.cpu()), runtime, [])
