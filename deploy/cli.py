"""``pyard deploy``: an int8 .tflite / .onnx model compiled into firmware and run on the SoC (docs/deploy.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deploy.model import DeployError, Model
from soc.config import SocConfig

DEFAULT_MAX_CYCLES = 2_000_000_000


def register(sub: argparse._SubParsersAction) -> None:
    from sim.arg_types import integer
    from sim.soc_args import add_soc_args

    p = sub.add_parser("deploy", help="run an int8 .tflite/.onnx model on the SoC's harts and tiles")
    add_soc_args(p)
    p.add_argument("model", type=Path, help="an int8 model: .tflite (LiteRT) or .onnx (QLinear operators)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", type=Path, default=None, help=".npy: one input, or N of them stacked (N, ...)")
    src.add_argument("--random", type=integer(1, 4096), default=None, help="N seeded random inputs (default 1)")
    p.add_argument("--harts", type=integer(1, 64), default=None, help="harts running inferences (default: --cores)")
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="seed of --random (default 0)")
    p.add_argument("--check", action="store_true", help="compare with LiteRT BUILTIN_REF / onnxruntime bit for bit")
    p.add_argument("--max-cycles", type=integer(1, 2**63 - 1), default=DEFAULT_MAX_CYCLES, help="cycle budget")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=deploy_cmd)


def deploy_cmd(args: argparse.Namespace) -> int:
    from sim.cli import UsageError
    from sim.soc_args import soc_config_from_args

    cfg = soc_config_from_args(args)
    if cfg.accel.dtype != "int8" or cfg.accel.acc_dtype != "int32":
        allowed = "allowed an int8 tile with int32 accumulators (e.g. 4x4-int8)"
        raise UsageError(f"config = {cfg.name} is invalid: {allowed}")
    try:
        from deploy.model import load_model

        model = load_model(args.model)
        inputs = _inputs(model, args)
        harts = args.harts or cfg.cores
        if harts > cfg.cores:
            raise UsageError(f"--harts = {harts} is invalid: allowed 1 to --cores ({cfg.cores})")
        result = run_on_soc(model, cfg, inputs, args.max_cycles, harts)
        if args.check:
            from deploy.check import reference_outputs

            result["check"] = _compare(result.pop("outputs"), reference_outputs(args.model, inputs))
        else:
            result.pop("outputs")
    except DeployError as err:
        raise UsageError(str(err)) from None
    _report(result, args.json)
    return 0 if result["ok"] and result.get("check", {}).get("bit_exact", True) else 1


def _inputs(model: Model, args: argparse.Namespace) -> list[npt.NDArray]:
    info = model.tensors[model.inputs[0]]
    dtype = np.float32 if info.dtype == "float32" else np.int8
    shape = (info.shape[0], info.shape[3], info.shape[1], info.shape[2]) if model.input_nchw else info.shape
    if args.input is not None:
        try:
            data = np.load(args.input, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise DeployError(f"--input = {str(args.input)!r} is invalid: allowed a .npy file ({err})") from None
        if data.size % info.size:
            raise DeployError(f"--input: {data.shape} is invalid: allowed {shape} or (N, *{shape})")
        return [x.astype(dtype).reshape(shape) for x in data.reshape(-1, info.size)]
    rng = np.random.default_rng(args.seed)
    n = args.random or 1
    if dtype == np.float32:
        return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(n)]
    return [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(n)]


def run_on_soc(model: Model, cfg: SocConfig, inputs: list[npt.NDArray], max_cycles: int, harts: int) -> dict:
    """Builds the executor for ``harts`` harts, runs ``inputs`` on the SoC (inference i on hart
    i mod harts), returns the outputs and the cycles."""
    from deploy.firmware import FW_SOURCE, host_inputs, host_output, make_blob, plan
    from sim.firmware import build_firmware
    from sim.run import run_elf
    from sim.toolchain import load_elf
    from soc.memmap import MEM_BASE

    p = plan(model)
    elf = build_firmware(cfg, [FW_SOURCE], defines={"PYARD_NHARTS_ACTIVE": harts})
    base = load_elf(elf).symbols["__mem_free_start"]
    blob = make_blob(model, p, host_inputs(model, p, inputs), harts)
    free = MEM_BASE + cfg.mem_bytes - base
    if len(blob.data) > free:
        raise DeployError(f"model: {len(blob.data)} bytes with its arenas: allowed up to {free} (--mem-mib)")
    hd = blob.header
    tail = hd["outputs"]
    dumps = {"tail": (base + tail, hd["total_bytes"] - tail)}  # outputs and cycle counters
    res = run_elf(cfg, elf, max_cycles, loads={base: blob.data}, dumps=dumps)
    raw = res.dumps["tail"]
    n, out_b = hd["n_infer"], hd["out_bytes"]
    outs = [np.frombuffer(raw, np.int8, out_b, i * out_b) for i in range(n)]
    cyc = np.frombuffer(raw, "<u4", n, hd["infer_cycles"] - tail)
    per_layer = np.frombuffer(raw, "<u4", hd["n_layers"], hd["layer_cycles"] - tail)
    in_tile = np.frombuffer(raw, "<u4", hd["n_layers"], hd["tile_cycles"] - tail)
    takes = np.frombuffer(raw, "<u4", cfg.tiles, hd["tile_takes"] - tail)
    hart0 = len(range(0, n, harts))  # the per-layer cycles are hart 0's inferences' sums
    layers = [
        {"layer": i, "op": op, "where": "tile+hart" if op in ("CONV_2D", "FULLY_CONNECTED") else "hart",
         "cycles": int(c) // hart0, "tile_call_cycles": int(t) // hart0}
        for i, (op, c, t) in enumerate(zip(p.names, per_layer, in_tile, strict=True))
    ]  # fmt: skip
    return {
        "model": model.name, "config": cfg.name, "cores": cfg.cores, "harts": harts, "tiles": cfg.tiles,
        "inferences": n,
        "ok": res.exit_code == 0, "exit_code": res.exit_code, "console": res.console.strip(),
        "cycles_per_inference": int(np.mean(cyc)), "cycles_per_inference_min": int(cyc.min()),
        "run_cycles": res.cycles, "tile_layers": [int(k) for k in takes], "layers": layers,
        "outputs": [host_output(model, p, y) for y in outs],
    }  # fmt: skip


def _compare(got: list[npt.NDArray], want: list[npt.NDArray]) -> dict:
    pairs = zip(got, want, strict=True)
    diff = [int(np.count_nonzero(np.asarray(g).reshape(-1) != np.asarray(w).reshape(-1))) for g, w in pairs]
    bad = sum(d > 0 for d in diff)
    return {"bit_exact": not any(diff), "mismatched_inferences": bad, "mismatched_values": sum(diff)}


def _report(r: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(r, indent=2))
        return
    print(r["console"], file=sys.stderr)
    where = f"{r['model']} on {r['config']} ({r['harts']} of {r['cores']} cores, {r['tiles']} tiles)"
    print(f"{where}: {r['inferences']} inferences, {r['cycles_per_inference']} cycles per inference")
    for layer in r["layers"]:
        tile = f"({layer['tile_call_cycles']} in tile calls)" if layer["tile_call_cycles"] else ""
        print(f"  layer {layer['layer']:2d} {layer['op']:<18} {layer['where']:<9} {layer['cycles']:>10} cycles {tile}")
    if "check" in r:
        c = r["check"]
        verdict = "bit-exact" if c["bit_exact"] else f"MISMATCH in {c['mismatched_inferences']} inferences"
        print(f"check against the reference: {verdict}")
