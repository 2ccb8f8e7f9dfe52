"""``pyard bench``: benchmarks that print JSON (speed is measured here, never in timed tests)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from sim.arg_types import integer
from sim.config_args import add_config_args, config_from_args
from tb import operands
from tb.tile_cases import conv_case, gemm_case

# Main-memory read latency of the benchmarks' memory model, in cycles.
LATENCY = integer(4, 100_000)  # the memory model answers after at least 4 cycles


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (JSON output)")
    kinds = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    from sim.firmware_bench import register_multicore
    from sim.sim_speed import register_sim_speed

    register_sim_speed(kinds)
    register_multicore(kinds)
    from byoc.bench import register as register_byoc
    from fptt_soc.bench import register as register_fptt
    from runtime.bench import register as register_runtime

    register_fptt(kinds)
    register_runtime(kinds)
    register_byoc(kinds)
    mesh = kinds.add_parser("mesh", help="mesh timing for one weight tile, Verilog generation and build time")
    add_config_args(mesh)
    mesh.add_argument("--fresh", action="store_true", help="build in a temporary directory to time a cold build")
    mesh.add_argument("--json", action="store_true", help="print only the JSON result")
    mesh.set_defaults(func=bench_mesh)

    gemm = kinds.add_parser("gemm", help="one GEMM command on the tile: cycles end to end, utilization, counters")
    add_config_args(gemm)
    for dim in ("m", "k", "n"):
        gemm.add_argument(f"--{dim}", type=integer(1, 65535), default=256)
    gemm.add_argument("--latency", type=LATENCY, default=32, help="main-memory read latency in cycles (default 32)")
    gemm.add_argument("--trans-a", action="store_true")
    gemm.add_argument("--trans-b", action="store_true")
    gemm.add_argument("--out", choices=OUT_WIDTHS, default="full", help=OUT_HELP)
    gemm.add_argument("--json", action="store_true", help="print only the JSON result")
    gemm.set_defaults(func=bench_gemm)

    conv = kinds.add_parser("conv", help="one CONV2D command on the tile: cycles end to end, utilization, counters")
    add_config_args(conv)
    for name, default in CONV_DEFAULTS.items():
        conv.add_argument(f"--{name}", type=int, default=default)
    conv.add_argument("--latency", type=LATENCY, default=32, help="main-memory read latency in cycles (default 32)")
    conv.add_argument("--out", choices=OUT_WIDTHS, default="full", help=OUT_HELP)
    conv.add_argument("--json", action="store_true", help="print only the JSON result")
    conv.set_defaults(func=bench_conv)

    from rtl.vector.ops import VecOp
    from tb.vector_cases import MEMORIES

    vec = kinds.add_parser("vector", help="one VEC command on the tile: elements per cycle of the vector engine")
    add_config_args(vec)
    # REQUANT reads its B as two accumulator rows of per-column parameters: not a stream of operand
    # rows as this benchmark lays them out (it runs at one row per beat like any op).
    benched = [op.name for op in VecOp if op != VecOp.REQUANT]
    ops = ", ".join(name.lower() for name in benched)
    vec.add_argument("--op", type=str.upper, choices=[*benched, "FPTT_UPDATE"], default="ADD",
                     metavar="OP", help=f"the operation: {ops}, or fptt_update (the FPTT update program, "
                     "streamed; bf16 tiles) (default add)")  # fmt: skip
    vec.add_argument("--n", type=integer(1, 1 << 24), default=4096, help="elements (whole rows; default 4096)")
    vec.add_argument("--memory", choices=MEMORIES, default="sp", help="where A, B and D are (default sp)")
    stream_help = "stream A and B from main memory and D back, in double-buffered chunks (bus rate)"
    vec.add_argument("--stream", action="store_true", help=stream_help)
    vec.add_argument("--chunk", type=integer(1, 65535), default=64, help="scratchpad rows per streamed chunk")
    vec.add_argument("--latency", type=LATENCY, default=32, help="main-memory read latency in cycles (default 32)")
    vec.add_argument("--json", action="store_true", help="print only the JSON result")
    vec.set_defaults(func=bench_vector)


# The loop commands' output width field (docs/isa.md, GEMM word 0 [20:19]): its codes by name.
OUT_WIDTHS = {"narrow": 0, "full": 1}
OUT_NAMES = {code: name for name, code in OUT_WIDTHS.items()}
OUT_HELP = "C as stored: full (int32 / fp32 accumulators, default) or narrow (the input type: int8 / bf16)"
# The Conv2D target: 1×28×28×32 → 32 channels, 3×3, stride 1, padding 1.
CONV_DEFAULTS = {"batch": 1, "h": 28, "w": 28, "cin": 32, "cout": 32, "kh": 3, "kw": 3, "stride": 1, "pad": 1}


def bench_mesh(args: argparse.Namespace) -> int:
    from sim.build import build, run_cocotb
    from sim.verilator import hierarchical_args

    cfg = config_from_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        b = build("mesh", cfg, root=Path(tmp) if args.fresh else None)
        result_path = Path(tmp) / "result.json"
        run_cocotb(b, "tb.mesh_tb", testcase="mesh_one_tile", env={"PYARD_RESULT": str(result_path)}, name="bench")
        timing = json.loads(result_path.read_text())
    result = {
        "bench": "mesh",
        "config": cfg.name,
        "rows": cfg.rows,
        "cols": cfg.cols,
        "pes": cfg.rows * cfg.cols,
        "pe_stages": cfg.pe_stages,
        "verilog_generation_s": round(b.generate_seconds, 2),
        "verilator_build_s": round(b.verilate_seconds, 2),  # Verilation and C++ compile
        "verilator_hierarchical": bool(hierarchical_args(cfg.rows * cfg.cols)),
        "build_was_cached": b.cached,
        **timing,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def run_loop_case(cfg, bench: str, case, latency: int, max_cycles: int) -> dict[str, Any]:
    """Run one loop-command case on the C++ tile simulator (checked bit-exact); its figures."""
    from tilesim.build import build_tile_sim
    from tilesim.run import memory_bytes, run_case

    sim = build_tile_sim(cfg, memory_bytes(case), latency)  # built (or found) first: not in the timing
    run = run_case(cfg, case, latency=latency, max_cycles=max_cycles)
    return {
        "bench": bench,
        "config": cfg.name,
        "dma_bits": cfg.dma_bits,
        "read_latency": latency,
        "cycles": run.cycles,
        "macs": case.macs,
        "utilization": round(case.macs / (cfg.rows * cfg.cols * run.cycles), 4),
        **run.counters,
        "sim_seconds": round(run.seconds, 2),
        "sim_cycles_per_second": round(run.cycles_per_second),
        "simulator_build_was_cached": sim.cached,
    }


def _memory_mib(sizes: dict[str, int], command: str) -> int:
    """The simulated memory for these operands; refuses (one line) operands it cannot hold."""
    from sim.cli import UsageError

    mib = operands.mem_mib(sizes)
    if mib > operands.MAX_MEM_MIB:
        total = sum(sizes.values()) / (1 << 20)
        raise UsageError(
            f"the {command}'s operands take {total:.0f} MiB: the simulated memory holds at most "
            f"{operands.MAX_MEM_MIB} MiB (the tile's 32-bit addresses); choose smaller sizes"
        )
    return mib


def bench_gemm(args: argparse.Namespace) -> int:
    case = {"m": args.m, "k": args.k, "n": args.n, "trans_a": int(args.trans_a), "trans_b": int(args.trans_b)}
    case["out"] = OUT_WIDTHS[args.out]
    print(json.dumps(gemm_bench(config_from_args(args), case, args.latency), indent=None if args.json else 2))
    return 0


def gemm_bench(cfg, case: dict[str, int], latency: int = 32) -> dict[str, Any]:
    """One GEMM command (``case``: m, k, n, trans_a, trans_b) on the tile simulator, checked exactly;
    refuses (UsageError, one line) sizes out of range or operands the memory cannot hold."""
    from sim.cli import UsageError

    case = {"trans_a": 0, "trans_b": 0, "out": OUT_WIDTHS["full"]} | case
    for dim in ("m", "k", "n"):
        if not 1 <= case[dim] <= 65535:
            raise UsageError(f"--{dim} = {case[dim]} is invalid: allowed an integer from 1 to 65535")
    _memory_mib(operands.gemm_sizes(cfg, case | {"dense": 1}), "GEMM")
    max_cycles = 40 * case["m"] * case["k"] * case["n"] // (cfg.rows * cfg.cols) + 100_000
    run = run_loop_case(cfg, "gemm", gemm_case(cfg, case | {"dense": 1}, seed=7), latency, max_cycles)
    return run | {"out": OUT_NAMES[case["out"]]}


def bench_conv(args: argparse.Namespace) -> int:
    case = {name: getattr(args, name) for name in CONV_DEFAULTS} | {"out": OUT_WIDTHS[args.out]}
    print(json.dumps(conv_bench(config_from_args(args), case, args.latency), indent=None if args.json else 2))
    return 0


def conv_bench(cfg, case: dict[str, int], latency: int = 32) -> dict[str, Any]:
    """One CONV2D command (``case``: the CONV_DEFAULTS fields, missing ones at their default) on the
    tile simulator, checked exactly; refuses (UsageError, one line) fields out of range."""
    from rtl.conv_model import out_size
    from rtl.im2col import KERNEL_MAX
    from sim.cli import UsageError

    limits = {"kh": KERNEL_MAX, "kw": KERNEL_MAX, "stride": 255, "pad": 255}  # the CONV2D fields' ranges
    case = CONV_DEFAULTS | {"out": OUT_WIDTHS["full"]} | case
    for name in CONV_DEFAULTS:
        value = case[name]
        low, high = (0 if name == "pad" else 1), limits.get(name, 65535)
        if not low <= value <= high:
            raise UsageError(f"--{name} = {value} is invalid: allowed an integer from {low} to {high}")
    oh, ow = (out_size(case[d], case[k], case["stride"], case["pad"]) for d, k in (("h", "kh"), ("w", "kw")))
    if oh < 1 or ow < 1:
        raise UsageError(f"the kernel {case['kh']}x{case['kw']} does not fit the padded {case['h']}x{case['w']} input")
    macs = case["batch"] * oh * ow * case["kh"] * case["kw"] * case["cin"] * case["cout"]
    _memory_mib(operands.conv_sizes(cfg, case), "CONV2D")
    max_cycles = 40 * macs // (cfg.rows * cfg.cols) + 100_000
    run = run_loop_case(cfg, "conv", conv_case(cfg, case, seed=11), latency, max_cycles)
    return run | {"out": OUT_NAMES[case["out"]]}


def bench_vector(args: argparse.Namespace) -> int:
    """The vector engine's elements per cycle: VEC_ELEMS / VEC_CYCLES of one command, whose operands
    were loaded first and whose result is stored and checked exactly against the model."""
    from rtl.vector.ops import FLOAT_OPS, INT_OPS, VecOp
    from sim.cli import UsageError
    from tb.vector_cases import operand_rows, vector_case, vector_rows
    from tilesim.build import build_tile_sim
    from tilesim.run import memory_bytes, run_case

    cfg = config_from_args(args)
    if not cfg.vector:
        raise UsageError(f"vector = False is invalid: allowed true (bench vector needs the engine; {cfg.name})")
    if args.op == "FPTT_UPDATE":
        return _bench_fptt_update(cfg, args)
    op = VecOp[args.op]
    if op not in (FLOAT_OPS if cfg.dtype == "bf16" else INT_OPS):
        raise UsageError(f"--op {args.op.lower()} is not defined on {cfg.dtype} tiles")
    if args.stream:
        return _bench_vector_stream(cfg, op, args)
    rows, _ = vector_rows(cfg, args.n, args.memory)
    capacity = cfg.sp_rows if args.memory == "sp" else cfg.acc_rows
    if operand_rows(cfg, args.memory, rows, 3)[-1] + rows > capacity or rows > 65535:
        raise UsageError(
            f"--n {args.n} needs 3 x {rows} rows for A, B and D: the {args.memory} of {cfg.name} holds "
            f"{capacity} (and a command at most 65535); choose a smaller --n"
        )
    case = vector_case(cfg, op, args.n, args.memory, seed=5)
    sim = build_tile_sim(cfg, memory_bytes(case), args.latency)
    run = run_case(cfg, case, latency=args.latency, max_cycles=40 * rows * cfg.dim + 100_000)
    elements, cycles = run.counters["vec_elems"], run.counters["vec_cycles"]
    per_cycle = elements / cycles if cycles else 0.0
    result = {
        "bench": "vector",
        "config": cfg.name,
        "op": op.name.lower(),
        "memory": args.memory,
        "lanes": cfg.lanes,
        "elements": elements,
        "vec_cycles": cycles,
        "elements_per_cycle": round(per_cycle, 3),
        "fraction_of_lanes": round(per_cycle / cfg.lanes, 4),
        "target_fraction": 0.9,
        "total_cycles": run.cycles,
        "sim_seconds": round(run.seconds, 2),
        "simulator_build_was_cached": sim.cached,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def _bench_vector_stream(cfg, op, args: argparse.Namespace) -> int:
    """Elements per cycle and AXI read / write channel use of a VEC streamed from main memory."""
    from sim.cli import UsageError
    from tb.vector_cases import stream_case, vector_rows
    from tilesim.build import build_tile_sim
    from tilesim.run import memory_bytes, run_case

    if args.memory != "sp":
        raise UsageError("--stream works on the scratchpad: leave --memory at sp")
    if 6 * args.chunk > cfg.sp_rows:
        raise UsageError(f"--chunk {args.chunk}: six chunks must fit the {cfg.sp_rows} scratchpad rows of {cfg.name}")
    rows, _ = vector_rows(cfg, args.n, "sp")
    case = stream_case(cfg, op, args.n, args.chunk, seed=5)
    _memory_mib({"operands": case.mem_bytes}, "VEC stream")
    sim = build_tile_sim(cfg, memory_bytes(case), args.latency)
    run = run_case(cfg, case, latency=args.latency, max_cycles=40 * rows * cfg.dim + 100_000)
    beat = cfg.dma_bits // 8
    c = run.counters
    result = {
        "bench": "vector-stream",
        "config": cfg.name,
        "op": op.name.lower(),
        "lanes": cfg.lanes,
        "dma_bits": cfg.dma_bits,
        "read_latency": args.latency,
        "chunk_rows": args.chunk,
        "elements": c["vec_elems"],
        "cycles": run.cycles,
        "elements_per_cycle": round(c["vec_elems"] / run.cycles, 3),
        "read_bus_utilization": round(c["dma_rd_bytes"] / (beat * run.cycles), 4),
        "write_bus_utilization": round(c["dma_wr_bytes"] / (beat * run.cycles), 4),
        "target_bus_utilization": 0.9,
        "vec_cycles": c["vec_cycles"],
        "sim_seconds": round(run.seconds, 2),
        "simulator_build_was_cached": sim.cached,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def _bench_fptt_update(cfg, args: argparse.Namespace) -> int:
    """The FPTT update streamed from main memory: parameters per cycle and the AXI read channel's
    use (four tensors in, three out), checked exactly against the 13-command program through the
    engine model. One VEC UPDATE per chunk on tiles with the update unit, else the program."""
    from sim.cli import UsageError
    from tb.vector_cases import update_case, update_regions, vector_rows
    from tilesim.build import build_tile_sim
    from tilesim.run import memory_bytes, run_case

    if cfg.dtype != "bf16":
        raise UsageError(f"--op fptt_update runs on bf16 tiles, not {cfg.name}")
    fused = cfg.update_lanes > 0
    if update_regions(cfg, args.chunk, fused) is None:
        need = "16 (UPDATE: 4 buffers of 4 tensors)" if fused else "18 (the program: 3 buffers of 6 tensors)"
        raise UsageError(
            f"--chunk {args.chunk}: {need} chunks must fit the {cfg.sp_rows} scratchpad rows of {cfg.name}"
        )
    rows, _ = vector_rows(cfg, args.n, "sp")
    case = update_case(cfg, args.n, args.chunk, seed=5, fused=fused)
    _memory_mib({"operands": case.mem_bytes}, "FPTT update")
    sim = build_tile_sim(cfg, memory_bytes(case), args.latency)
    run = run_case(cfg, case, latency=args.latency, max_cycles=200 * rows * cfg.dim + 100_000)
    c, beat = run.counters, cfg.dma_bits // 8
    params = rows * cfg.dim
    result = {
        "bench": "vector-fptt-update",
        "config": cfg.name,
        "command": "UPDATE" if fused else "program (13 VEC per chunk)",
        "lanes": cfg.lanes,
        "update_lanes": cfg.update_lanes,
        "dma_bits": cfg.dma_bits,
        "read_latency": args.latency,
        "chunk_rows": args.chunk,
        "parameters": params,
        "cycles": run.cycles,
        "parameters_per_cycle": round(params / run.cycles, 3),
        "read_bus_utilization": round(c["dma_rd_bytes"] / (beat * run.cycles), 4),
        "write_bus_utilization": round(c["dma_wr_bytes"] / (beat * run.cycles), 4),
        "target_bus_utilization": 0.9,
        "vec_elements": c["vec_elems"],
        "vec_cycles": c["vec_cycles"],
        "vec_elements_per_cycle": round(c["vec_elems"] / c["vec_cycles"], 3) if c["vec_cycles"] else 0.0,
        "sim_seconds": round(run.seconds, 2),
        "simulator_build_was_cached": sim.cached,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
