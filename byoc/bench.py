"""``pyard bench byoc``: one model (byoc/models.py) through TVM's ONNX frontend and the pyard BYOC
backend, checked against onnxruntime, reported like the BYOC paper's Table 1: operators and MACs
offloaded, regions, device cycles, host time and the host <-> device bytes."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from rtl.config import AccelConfig
from runtime.link import DEFAULT_CLOCK_MHZ, DEFAULT_LINK, add_link_args, transfer_report
from sim.arg_types import integer, real
from sim.config_args import add_config_args, config_from_args

__all__ = ["BF16_BOUND", "register", "run_model"]

# The bf16 error bound: max |pyard - onnxruntime| <= BF16_BOUND * max |onnxruntime|. Each operator
# rounds its operands to bf16 (relative error 2^-9) and element-wise results again; over the
# models' 3-13 layers that compounds to a few 2^-9, so 2^-6 leaves a margin of ~3x over the
# largest error measured (docs/byoc.md).
BF16_BOUND = 2.0**-6
MODEL_NAMES = ["cnn", "lstm", "mlp", "qcnn", "qmlp", "split"]  # byoc/models.py (not imported here: onnx is optional)
# int8 QDQ models: the tile's integer GEMM and onnxruntime's requantization, so exactly equal.
QUANTIZED = {"qcnn", "qmlp"}
DEFAULT_CONFIG = "4x4-bf16"  # the models are fp32: they run in bf16


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("byoc", help="an ONNX model on TVM with pyard regions: offload table, error vs onnxruntime")
    add_config_args(p)
    p.add_argument("--model", choices=MODEL_NAMES, default="mlp", help="the model (default mlp)")
    p.add_argument("--devices", type=integer(1, 8), default=1, help="simulated devices (default 1)")
    p.add_argument(
        "--min-macs-per-byte",
        type=real(0.0),
        default=None,
        help="the cost rule: offload a region only if MACs >= this x its transfer bytes (default 1)",
    )
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="weights and input seed")
    add_link_args(p)
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=bench_byoc)


def run_model(
    name: str,
    config: Any = "4x4-bf16",
    devices: int = 1,
    min_macs_per_byte: float | None = None,
    seed: int = 0,
    link: str = DEFAULT_LINK,
    clock_mhz: float = DEFAULT_CLOCK_MHZ,
) -> dict[str, Any]:
    """Compile and run model ``name``; its offload table row, its error against onnxruntime and the
    host link's time for the bytes its regions moved (runtime/link.py)."""
    import onnxruntime as ort
    from tvm.relax.frontend.onnx import from_onnx

    from byoc.codegen import build
    from byoc.models import make_model
    from byoc.partition import DEFAULT_MACS_PER_BYTE, op_counts
    from runtime import Runtime

    model, x = make_model(name, seed)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod = from_onnx(model, keep_params_in_input=False)
    ops_total, macs_total = op_counts(mod["main"])
    threshold = DEFAULT_MACS_PER_BYTE if min_macs_per_byte is None else min_macs_per_byte
    cfg = config if isinstance(config, AccelConfig) else AccelConfig.from_name(config)
    # Both tile types: float regions run on the config's, QDQ ones on int8 (pools start on first use).
    other = cfg.replace(dtype="int8" if cfg.dtype == "bf16" else "bf16")
    with Runtime((cfg, other), devices=devices) as rt:
        exe = build(mod, rt, min_macs_per_byte=threshold)
        start = time.perf_counter()
        got = exe(x)
        wall = time.perf_counter() - start
        devs = [d for pool in rt._pools.values() for d in pool.devices]
        cycles = [d.cycles for d in devs]
        used = sorted(rt.device_cycles())
        written, read = [d.bytes_written for d in devs], [d.bytes_read for d in devs]
    on = [r for r in exe.regions if r.offloaded]
    err = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
    bound = 0.0 if name in QUANTIZED else BF16_BOUND
    return {
        "bench": "byoc", "model": name, "config": cfg.name, "devices": devices, "min_macs_per_byte": threshold,
        "relax_ops": ops_total, "ops_offloaded": sum(r.relax_ops * r.calls for r in on),
        "macs": macs_total, "macs_offloaded": sum(r.macs * r.calls for r in on),
        "regions": len(on), "region_calls": sum(r.calls for r in on),
        "regions_kept_on_cpu": len(exe.regions) - len(on),
        "tile_types": used, "device_cycles": cycles, "cycles_total": sum(cycles),
        "host_seconds": round(wall - exe.stats.seconds, 4), "pyard_seconds": round(exe.stats.seconds, 3),
        "transfer_bytes": sum(written) + sum(read), "region_bytes": sum(r.transfer_bytes * r.calls for r in on),
        "max_err_rel": err, "bound": bound, "within_bound": err <= bound,
        **transfer_report(cycles, written, read, link, clock_mhz),
        "regions_detail": [{"ops": r.ops, "macs": r.macs, "transfer_bytes": r.transfer_bytes, "calls": r.calls,
                            "offloaded": r.offloaded} for r in exe.regions],
    }  # fmt: skip


def bench_byoc(args: argparse.Namespace) -> int:
    base = None if args.config else AccelConfig.from_name(DEFAULT_CONFIG)
    cfg = config_from_args(args, base)
    out = run_model(args.model, cfg, args.devices, args.min_macs_per_byte, args.seed, args.link, args.clock_mhz)
    print(json.dumps(out, indent=None if args.json else 2))
    return 0
