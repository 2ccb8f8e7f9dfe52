"""``partition_for_pyard``: TVM's BYOC partition (FuseOpsByPattern with the pyard patterns,
MergeCompositeFunctions) and the paper's cost rule (§3.1.3): a merged region is offloaded only
where its MACs are worth the bytes it moves, ``macs >= min_macs_per_byte * transfer_bytes``;
a region that fails goes back into ``main`` for TVM's CPU path."""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from byoc.patterns import pyard_patterns
from rtl.config import AccelConfig

__all__ = ["DEFAULT_MACS_PER_BYTE", "Region", "op_counts", "partition_for_pyard", "regions_of"]

# One MAC per byte moved: below it the host link, not the array, bounds the region (a 4x4 tile
# does 16 MACs a cycle and its DMA moves 8 bytes), so a region with no MACs (element-wise only,
# the paper's CalcMAC(graph) > 0) or a thin GEMM (one row of activations against its weights)
# stays on the CPU.
DEFAULT_MACS_PER_BYTE = 1.0


@dataclass
class Region:
    """One merged region: its operators (composite names), MACs and the bytes it moves (inputs,
    weights and outputs in the tile's input type, as the runtime writes them every call)."""

    name: str
    ops: list[str] = field(default_factory=list)
    macs: int = 0
    transfer_bytes: int = 0
    offloaded: bool = True
    calls: int = 0  # call sites in main (structurally equal regions share one function)
    relax_ops: int = 0  # Relax operator calls inside the region


def _numel(expr: relax.Expr) -> int:
    """Elements of a tensor, or of every tensor of a tuple (a region with several outputs)."""
    if isinstance(expr, relax.Tuple):
        return sum(_numel(f) for f in expr.fields)
    n = 1
    for d in expr.ty.shape:
        n *= int(d)
    return n


def _bytes(expr: relax.Expr, element_bytes: int) -> int:
    """Bytes on the device: int8 tensors (QDQ) as they are, float tensors in the tile's input type."""
    if isinstance(expr, relax.Tuple):
        return sum(_bytes(f, element_bytes) for f in expr.fields)
    return _numel(expr) * (1 if str(expr.ty.dtype) == "int8" else element_bytes)


def op_counts(func: relax.Function) -> tuple[int, int]:
    """Relax operator calls in ``func``'s own bindings and the MACs of its matmuls and conv2ds
    (output elements times the reduction length)."""
    ops = macs = 0
    for block in func.body.blocks:
        for b in block.bindings:
            call = b.value
            if not isinstance(call, relax.Call) or not isinstance(call.op, tvm.ir.Op):
                continue
            ops += 1
            if call.op.name == "relax.matmul":
                macs += _numel(b.var) * int(call.args[0].ty.shape[-1])
            elif call.op.name == "relax.nn.conv2d":
                kshape = [int(d) for d in call.args[1].ty.shape]  # OIHW
                macs += _numel(b.var) * kshape[1] * kshape[2] * kshape[3]
    return ops, macs


def _call_sites(main: relax.Function) -> dict[str, int]:
    sites: dict[str, int] = {}
    for block in main.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.GlobalVar):
                sites[b.value.op.name_hint] = sites.get(b.value.op.name_hint, 0) + 1
    return sites


def regions_of(mod: tvm.IRModule, element_bytes: int) -> list[Region]:
    """The regions (functions with ``Codegen = "pyard"``) of a partitioned module; ``element_bytes``
    is the size of a float element on the tile (2 for bf16)."""
    out, sites = [], _call_sites(mod["main"])
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function) or not func.attrs or func.attrs.get("Codegen") != "pyard":
            continue
        region = Region(gv.name_hint)
        local: dict[relax.Var, relax.Function] = {}
        for block in func.body.blocks:
            for b in block.bindings:
                if isinstance(b.value, relax.Function):  # a composite, defined once, called once or more
                    local[b.var] = b.value
                elif isinstance(b.value, relax.Call) and b.value.op in local:
                    composite = local[b.value.op]
                    region.ops.append(str(composite.attrs["Composite"]).removeprefix("pyard."))
                    ops, macs = op_counts(composite)
                    region.relax_ops += ops
                    region.macs += macs
        region.transfer_bytes = sum(_bytes(p, element_bytes) for p in func.params) + _bytes(
            func.body.body, element_bytes
        )
        region.calls = sites.get(gv.name_hint, 0)
        out.append(region)
    return out


@mutator
class _Inline(PyExprMutator):
    """Puts the bodies of the rejected regions back in place of their calls."""

    def __init__(self, mod: tvm.IRModule, rejected: set[str]) -> None:
        super().__init__(mod)
        self.mod_, self.rejected = mod, rejected

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if isinstance(call.op, relax.GlobalVar) and call.op.name_hint in self.rejected:
            return self._inline(self.mod_[call.op], list(call.args))
        return call

    def _inline(self, func: relax.Function, args: list[relax.Expr]) -> relax.Expr:
        env: dict[relax.Var, relax.Expr] = dict(zip(func.params, args, strict=True))
        local: dict[relax.Var, relax.Function] = {}
        for block in func.body.blocks:
            for b in block.bindings:
                value = b.value
                if isinstance(value, relax.Function):
                    local[b.var] = value
                elif isinstance(value, relax.Call) and value.op in local:
                    env[b.var] = self._inline(local[value.op], [_subst(a, env) for a in value.args])
                else:
                    env[b.var] = self.builder_.emit(_subst(value, env))
        return _subst(func.body.body, env)


def _subst(expr: relax.Expr, env: dict[relax.Var, relax.Expr]) -> relax.Expr:
    if isinstance(expr, relax.Var):
        return env.get(expr, expr)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_subst(f, env) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_subst(expr.tuple_value, env), expr.index)
    if isinstance(expr, relax.Call):
        return relax.Call(expr.op, [_subst(a, env) for a in expr.args], expr.attrs, expr.ty_args)
    return expr


def partition_for_pyard(
    mod: tvm.IRModule, config: str | AccelConfig = "4x4-bf16", *, min_macs_per_byte: float = DEFAULT_MACS_PER_BYTE
) -> tuple[tvm.IRModule, list[Region]]:
    """Annotate, merge and cost-check the regions pyard runs; returns the module (regions as
    functions with ``Codegen = "pyard"``, ready for ``relax.transform.RunCodegen``) and every
    region considered, offloaded or not."""
    cfg = config if isinstance(config, AccelConfig) else AccelConfig.from_name(config)
    if min_macs_per_byte < 0:
        raise ValueError(f"min_macs_per_byte: must be >= 0, got {min_macs_per_byte}")
    # int8 tiles have no TANH (runtime/ops.py), so tanh stays on the CPU for them.
    patterns = [p for p in pyard_patterns() if cfg.dtype == "bf16" or p.name != "pyard.tanh"]
    mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=False)(mod)
    mod = relax.transform.MergeCompositeFunctions()(mod)
    regions = regions_of(mod, cfg.in_bits // 8)
    for region in regions:
        region.offloaded = region.macs >= min_macs_per_byte * region.transfer_bytes and (
            region.macs > 0 or min_macs_per_byte == 0
        )
    rejected = {r.name for r in regions if not r.offloaded}
    if rejected:
        main = _Inline(mod, rejected).visit_expr(mod["main"])
        kept = {gv: f for gv, f in mod.functions.items() if gv.name_hint not in rejected}
        mod = tvm.IRModule(kept, attrs=mod.attrs)
        mod["main"] = main
    return mod, regions
