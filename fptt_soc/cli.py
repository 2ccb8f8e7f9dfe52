"""``pyard fptt run``: FPTT-K training passes on the SoC, checked against the reference, with the
per-function cycle breakdown beside the thesis' Appendix C."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.arg_types import integer, output_file, positive_real, real

__all__ = ["THESIS_ROWS", "add_run", "thesis_cycles"]

THESIS_CSV = Path(__file__).resolve().parent / "data" / "thesis_appendix_c_cycles.csv"  # ../shared/data
# Our phases and the thesis' functions they do the work of (Table 4.2; docs/fptt.md, "On the SoC").
THESIS_ROWS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("fwd_gemm", "MatMul forward, σ / tanh of the gates in its read-out", ("MatMul-1", "Sigmoid")),
    ("fwd_act", "σ / tanh of the gates on the cores (--elementwise cores)", ()),
    ("bwd_dw", "MatMul dW (A transposed), bias gradients as its ones row", ("MatMul-2", "Mat2Vec")),
    ("bwd_dh", "MatMul dh (B transposed)", ("MatMul-3",)),
    ("fwd_cell", "cell forward: f·s + i·g, tanh(s), o·tanh(s)", ("tanh", "EWO-basic")),
    ("bwd_cell", "cell backward (ds, gate gradients)", ("EWO-combo",)),
    ("softmax", "softmax and the loss gradient", ("softmax",)),
    ("update", "FPTT update of θ, θ̄, λ", ("EWO-SGD(FPTT)",)),
    ("other", "data movement and waiting outside the phases", ("dataMovement",)),
)
DATASETS = ("digits", "synthetic")


def add_run(fsub: argparse._SubParsersAction) -> None:
    from sim.soc_args import add_soc_args

    p = fsub.add_parser("run", help="FPTT-K training passes on the SoC (firmware/fptt), checked with --check")
    add_soc_args(p)
    p.add_argument("--T", type=integer(1), default=64, help="sequence length (digits: 64 by pixel, 8 by row)")
    p.add_argument("--hidden", type=integer(1), default=32, help="LSTM hidden size H (a multiple of cols)")
    p.add_argument("--batch", type=integer(1), default=4, help="sequences per pass B (default 4)")
    p.add_argument("--K", type=integer(1), default=8, help="partition factor K (default 8)")
    p.add_argument("--inputs", type=integer(1), default=1, help="inputs per step I (synthetic data; default 1)")
    p.add_argument("--classes", type=integer(2), default=10, help="classes C (synthetic data; default 10)")
    p.add_argument("--dataset", default="digits", choices=DATASETS, help="digits (scikit-learn) or synthetic")
    p.add_argument("--passes", type=integer(1), default=1, help="training passes, one batch each (default 1)")
    p.add_argument("--lr", type=positive_real, default=0.1, help="learning rate eta (default 0.1)")
    p.add_argument("--alpha", type=real(0.0), default=0.1, help="FPTT regulariser alpha (default 0.1)")
    p.add_argument("--trunc-h", type=integer(0), default=None, help="backward window in steps (default: the part)")
    p.add_argument("--trunc-s", type=integer(0), default=None, help="0: no cell-state carry (default: carried)")
    p.add_argument("--ramp", action="store_true", help="weight partition losses by t/T")
    p.add_argument(
        "--cut-s-at-window",
        action="store_true",
        help="stop the cell-state gradient at the window's edge (default: Algorithm 3, on to the part's start)",
    )
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="initialisation and data seed")
    p.add_argument(
        "--elementwise",
        default="engine",
        metavar="{engine,cores}",
        help="where the element-wise steps run: the tile's vector engine (default) or the cores in integer C, "
        "the software-only baseline (the GEMMs stay on the tile)",
    )
    p.add_argument(
        "--resident-weights",
        action="store_true",
        help="keep the gate weights in the scratchpad for each part's forward steps where they fit "
        "(default: streamed by every gate GEMM, faster at small batches; docs/fptt.md)",
    )
    p.add_argument("--check", action="store_true", help="compare θ, θ̄, λ and logits after every part, bit for bit")
    p.add_argument("--max-cycles", type=integer(1), default=2_000_000_000, help="cycle budget per pass")
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        type=lambda text: text if text == "-" else str(output_file(text)),
        metavar="FILE",
        help="write the results as JSON ('-' or no FILE: stdout)",
    )
    p.set_defaults(func=cmd_run)


def _data(args: argparse.Namespace) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], int]:
    """(x (N, T, I), labels (N,), classes) for ``args.passes`` batches."""
    rng = np.random.default_rng(args.seed)
    need = args.passes * args.batch
    if args.dataset == "synthetic":
        x = rng.random((need, args.T, args.inputs), dtype=np.float32)
        return x, rng.integers(0, args.classes, need), args.classes
    from tb.fptt.data import load_digits_sequences

    streams = {64: "pixel", 8: "row"}
    if args.T not in streams:
        raise ValueError(f"--T = {args.T} is invalid for digits: allowed 64 (by pixel) or 8 (by row)")
    data = load_digits_sequences(streams[args.T])  # type: ignore[arg-type]
    if need > len(data.y_train):
        raise ValueError(f"--passes x --batch = {need} is more than the {len(data.y_train)} training sequences")
    idx = rng.permutation(len(data.y_train))[:need]
    return data.x_train[idx], data.y_train[idx], data.classes


def cmd_run(args: argparse.Namespace) -> int:
    from sim.cli import UsageError
    from sim.run import LoadError
    from sim.soc_args import soc_config_from_args
    from tb.fptt.arith import BF16
    from tb.fptt.model import init_params
    from tb.fptt.tensors import Dims, Hyper

    from . import check, host
    from .layout import FpttProblem, Layout, check_elementwise

    out = sys.stderr if args.json == "-" else sys.stdout
    try:
        cfg = soc_config_from_args(args)
        check_elementwise(args.elementwise, cfg.accel)
        x, y, classes = _data(args)
        dims = Dims(inputs=x.shape[2], hidden=args.hidden, classes=classes, batch=args.batch)
        hyper = Hyper(args.lr, args.alpha, args.K, args.trunc_h, args.trunc_s, args.ramp, args.cut_s_at_window)
        problem = FpttProblem(dims, args.T, hyper, args.resident_weights)
        Layout(cfg.accel, problem)  # refuses what the firmware cannot hold, before building anything
    except ValueError as err:
        raise UsageError(str(err)) from None
    state = check.initial_state(init_params(dims, np.random.default_rng(args.seed)).astype(BF16))
    print(
        f"FPTT-K on {cfg.name}: T={args.T} I={dims.inputs} H={dims.hidden} C={classes} B={dims.batch} "
        f"K={args.K}, {problem.params:,} parameters, {args.passes} pass(es), element-wise on the {args.elementwise}"
        f"{', checked' if args.check else ''}",
        file=out,
    )
    passes = []
    for k in range(args.passes):
        xb, yb = x[k * args.batch : (k + 1) * args.batch], y[k * args.batch : (k + 1) * args.batch]
        try:
            res = host.run(
                cfg, problem, state, xb, yb, snapshots=args.check, elementwise=args.elementwise,
                max_cycles=args.max_cycles,
            )  # fmt: skip
        except (LoadError, RuntimeError) as err:
            raise UsageError(str(err)) from None
        record: dict[str, Any] = {
            "pass": k,
            "cycles": res.cycles,
            "loss": res.losses[-1],
            "part_losses": res.losses,
            "phases": res.phases,
            "tile": res.run.counters,
            "mac_utilization": res.run.counters["macs"] / (res.cycles * cfg.accel.rows * cfg.accel.cols),
            "sim_seconds": res.run.sim_seconds,
        }
        if args.check:
            ref = check.reference_pass(cfg.accel, problem, state, xb, yb)
            bad = check.compare(ref, res)
            record["check"] = {"bit_exact": not bad, "mismatches": [str(m) for m in bad[:20]]}
        passes.append(record)
        _print_pass(record, cfg.accel.name, cfg.cores, args, out)
        state = res.state
        if args.check and bad:
            break
    payload = {"config": cfg.name, "elementwise": args.elementwise, "problem": _problem_json(problem), "passes": passes}
    if args.json is not None:
        text = json.dumps(payload, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 1 if any(p.get("check", {}).get("bit_exact") is False for p in passes) else 0


def thesis_cycles(accel: str, cores: int, K: int) -> dict[str, float] | None:
    """The thesis' Appendix C column for 4x4 / 8x8 with ``cores`` at ``K`` (its workload only)."""
    point = {"4x4-bf16": "4x4", "8x8-bf16": "8x8"}.get(accel)
    if point is None or not THESIS_CSV.is_file():
        return None
    with THESIS_CSV.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["design_point"] == f"{point}-{cores}" and int(r["K"]) == K]
    return {r["function"]: float(r["value"]) for r in rows} or None


def _print_pass(record: dict[str, Any], accel: str, cores: int, args: argparse.Namespace, out: Any) -> None:
    total = record["cycles"]
    thesis = None
    if (args.T, args.hidden, args.batch) == (784, 128, 4):
        thesis = thesis_cycles(accel, cores, args.K)
    print(f"pass {record['pass']}: {total:,} cycles, loss {record['loss']:.4f}, "
          f"MAC utilization {100 * record['mac_utilization']:.1f} %", file=out)  # fmt: skip
    head = f"  {'phase':<58} {'cycles':>13} {'share':>6}"
    print(head + (f"  {'thesis (same point, K)':>24}" if thesis else ""), file=out)
    for key, label, fns in THESIS_ROWS:
        cyc = record["phases"][key]
        line = f"  {label:<58} {cyc:>13,} {100 * cyc / total:>5.1f}%"
        if thesis and fns:
            line += f"  {sum(thesis.get(f, 0.0) for f in fns):>24,.0f}  ({' + '.join(fns)})"
        print(line, file=out)
    if thesis:
        t = thesis["total cycles"]
        print(f"  {'total':<58} {total:>13,} {'':>6}  {t:>24,.0f}  ({t / total:.1f}x)", file=out)
    if "check" in record:
        bad = record["check"]["mismatches"]
        verdict = "bit-exact" if record["check"]["bit_exact"] else "MISMATCH: " + "; ".join(bad)
        print(f"  check against the reference: {verdict}", file=out)


def _problem_json(problem: Any) -> dict[str, Any]:
    d, hp = problem.dims, problem.hyper
    return {
        "T": problem.steps, "inputs": d.inputs, "hidden": d.hidden, "classes": d.classes, "batch": d.batch,
        "K": hp.K, "eta": hp.eta, "alpha": hp.alpha, "trunc_h": hp.trunc_h, "trunc_s": hp.trunc_s,
        "ramp": hp.ramp, "cut_s_at_window": hp.cut_s_at_window, "params": problem.params,
    }  # fmt: skip
