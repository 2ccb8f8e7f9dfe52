"""``pyard fptt``: the FPTT-K LSTM training reference (train, memory/ops accounting, bench, sweep)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sim.arg_types import int_list, integer, output_file, positive_real, real
from tb.fptt.accounting import LAYOUTS, THESIS_KS

MB = 1_000_000
MIB = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("fptt", help="FPTT-K LSTM training reference model (NumPy)")
    fsub = parser.add_subparsers(dest="fptt_command", required=True, metavar="SUBCOMMAND")
    _add_train(fsub)
    _add_sweep(fsub)
    _add_memory(fsub)
    _add_bench(fsub)
    from fptt_soc.cli import add_run

    add_run(fsub)


# -- options ---------------------------------------------------------------------------------


def _training_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="digits", help="data set (digits: scikit-learn's 8x8 digits)")
    p.add_argument("--stream", default="pixel", choices=("pixel", "row"), help="one pixel (T=64) or row (T=8) per step")
    p.add_argument("--hidden", type=integer(1), default=32, help="LSTM hidden size H (default 32)")
    p.add_argument("--epochs", type=integer(1), default=30, help="training epochs (default 30)")
    p.add_argument("--lr", type=positive_real, default=0.1, help="learning rate eta (default 0.1)")
    p.add_argument("--alpha", type=real(0.0), default=0.1, help="FPTT regulariser alpha (default 0.1)")
    p.add_argument("--batch", type=integer(1), default=16, help="sequences per batch B (default 16)")
    p.add_argument(
        "--seed", type=integer(0, 2**32 - 1), default=0, help="initialisation and shuffling seed (default 0)"
    )
    p.add_argument(
        "--trunc-h", type=integer(1), default=None, help="backward window in steps (default: whole partition)"
    )
    p.add_argument(
        "--trunc-s", type=integer(1), default=None, help="longest cell-state run in steps (default: no limit)"
    )
    p.add_argument("--ramp", action="store_true", help="weight partition losses by t/T (default: all 1)")


def _json_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        type=lambda text: text if text == "-" else str(output_file(text)),  # checked before any training
        metavar="FILE",
        help=f"write {what} as JSON ('-' or no FILE: stdout)",
    )


def _add_train(fsub: argparse._SubParsersAction) -> None:
    p = fsub.add_parser("train", help="train on a data set, print accuracy and loss per epoch")
    _training_options(p)
    p.add_argument("--K", type=integer(1), default=8, help="partition factor K (default 8, about sqrt(64))")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="arithmetic (default fp32)")
    _json_option(p, "the training curve")
    p.set_defaults(func=cmd_train)


def _add_sweep(fsub: argparse._SubParsersAction) -> None:
    p = fsub.add_parser("sweep", help="train for several K and precisions, print the accuracy table")
    _training_options(p)
    p.add_argument("--K", type=int_list(1), default=[1, 2, 4, 8, 16, 32, 64], help="comma-separated K values")
    p.add_argument(
        "--precision", type=lambda s: s.split(","), default=["fp32", "bf16"], help="comma-separated precisions"
    )
    _json_option(p, "all curves")
    p.set_defaults(func=cmd_sweep)


def _add_memory(fsub: argparse._SubParsersAction) -> None:
    p = fsub.add_parser("memory", help="memory footprint (and with --ops the work) of one FPTT-K pass per K")
    p.add_argument("--T", type=integer(1), default=784, help="sequence length (default 784, sequential MNIST)")
    p.add_argument("--hidden", type=integer(1), default=128, help="hidden size H (default 128)")
    p.add_argument("--batch", type=integer(1), default=4, help="batch B (default 4)")
    p.add_argument("--input", type=integer(1), default=1, help="input size I (default 1)")
    p.add_argument("--classes", type=integer(2), default=10, help="classes C (default 10)")
    p.add_argument("--K", type=int_list(1), default=None, help="comma-separated K values (default: the thesis' set)")
    p.add_argument(
        "--trunc-h", type=integer(1), default=None, help="backward window in steps (default: whole partition)"
    )
    p.add_argument(
        "--trunc-s", type=integer(1), default=None, help="longest cell-state run in steps (default: no limit)"
    )
    p.add_argument(
        "--layout", default="pyard", choices=LAYOUTS, help="state layout (pyard: this model; thesis: its C code)"
    )
    p.add_argument("--ops", action="store_true", help="print GEMM MACs and element-wise operations per K instead")
    _json_option(p, "the table")
    p.set_defaults(func=cmd_memory)


def _add_bench(fsub: argparse._SubParsersAction) -> None:
    p = fsub.add_parser("bench", help="seconds per training epoch of digits by pixel (fp32 and bf16)")
    p.add_argument("--hidden", type=integer(1), default=32)
    p.add_argument("--K", type=integer(1), default=8)
    p.add_argument("--batch", type=integer(1), default=16)
    _json_option(p, "the timings (always JSON)")
    p.set_defaults(func=cmd_bench)


# -- helpers ---------------------------------------------------------------------------------


@contextmanager
def _user_errors() -> Iterator[None]:
    """Library ValueErrors are user mistakes here: report them as one line, exit status 2."""
    from sim.cli import UsageError

    try:
        yield
    except ValueError as err:
        raise UsageError(str(err)) from None


def _emit_json(dest: str | None, payload: Any) -> None:
    if dest is None:
        return
    text = json.dumps(payload, indent=2)
    if dest == "-":
        print(text)
        return
    try:
        with open(dest, "w") as fh:
            fh.write(text + "\n")
    except OSError as err:
        from sim.cli import UsageError

        raise UsageError(f"cannot write {dest}: {err.strerror}") from None


def _progress_bar(label: str) -> Callable[[int, int, int], None]:
    """A bar per epoch on stderr (sim/progress.py: rich, off under --json / --quiet or without a
    terminal)."""
    from sim import progress

    state: dict[str, Any] = {}

    def draw(epoch: int, done: int, total: int) -> None:
        if state.get("epoch") != epoch:
            if "phase" in state:
                state["phase"].__exit__(None, None, None)
            state["phase"] = progress.phase(f"{label} epoch {epoch}", total, "batches")
            state["bar"], state["epoch"], state["done"] = state["phase"].__enter__(), epoch, 0
        state["bar"].advance(done - state["done"])
        state["done"] = done
        if done == total:
            state.pop("phase").__exit__(None, None, None)
            state.pop("epoch")

    return draw


def _config(args: argparse.Namespace, K: int, precision: str) -> Any:
    from tb.fptt.experiment import TrainConfig

    return TrainConfig(
        dataset=args.dataset,
        stream=args.stream,
        hidden=args.hidden,
        K=K,
        precision=precision,
        epochs=args.epochs,
        lr=args.lr,
        alpha=args.alpha,
        batch=args.batch,
        seed=args.seed,
        trunc_h=args.trunc_h,
        trunc_s=args.trunc_s,
        ramp=args.ramp,
    )


def _epoch_line(rec: dict[str, float]) -> str:
    return (
        f"epoch {rec['epoch']:3d}  train acc {rec['train_acc']:.4f}  test acc {rec['test_acc']:.4f}  "
        f"train loss {rec['train_loss']:.4f}  test loss {rec['test_loss']:.4f}  ({rec['seconds']:.1f} s)"
    )


# -- commands --------------------------------------------------------------------------------


def cmd_train(args: argparse.Namespace) -> int:
    from tb.fptt import experiment

    out = sys.stderr if args.json == "-" else sys.stdout
    with _user_errors():
        cfg = _config(args, args.K, args.precision)
        data = experiment.load_data(cfg)
        experiment.validate(cfg, data)
        print(
            f"FPTT-K training: {cfg.dataset} by {cfg.stream} (T={data.steps}, I={data.inputs}), "
            f"H={cfg.hidden}, K={cfg.K}, {cfg.precision}, B={cfg.batch}, lr={cfg.lr}, alpha={cfg.alpha}",
            file=out,
        )
        curve = experiment.run(
            cfg,
            data,
            on_epoch=lambda r: print(_epoch_line(r), file=out, flush=True),
            progress=_progress_bar(f"K={cfg.K} {cfg.precision}"),
        )
    _emit_json(args.json, {"config": experiment.config_dict(cfg), "curve": curve})
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from tb.fptt import experiment

    out = sys.stderr if args.json == "-" else sys.stdout
    runs = []
    with _user_errors():
        for prec in args.precision:
            if prec not in ("fp32", "bf16"):
                raise ValueError(f"precision must be fp32 or bf16, not {prec!r}")
        cfgs = [_config(args, k, p) for k in args.K for p in args.precision]
        data = experiment.load_data(cfgs[0])
        for cfg in cfgs:
            experiment.validate(cfg, data)
        for cfg in cfgs:
            curve = experiment.run(cfg, data, progress=_progress_bar(f"K={cfg.K} {cfg.precision}"))
            runs.append({"config": experiment.config_dict(cfg), "curve": curve})
    print(_sweep_table(runs, args), file=out)
    _emit_json(args.json, runs)
    return 0


def _sweep_table(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    rows = [
        "| K | precision | test acc (last) | test acc (best) | train acc | train loss | test loss | sequence loss |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        last = r["curve"][-1]
        best = max(c["test_acc"] for c in r["curve"])
        rows.append(
            f"| {r['config']['K']} | {r['config']['precision']} | {last['test_acc']:.3f} | {best:.3f} | "
            f"{last['train_acc']:.3f} | {last['train_loss']:.4f} | {last['test_loss']:.4f} | "
            f"{last['sequence_loss']:.4f} |"
        )
    return "\n".join(rows)


def cmd_memory(args: argparse.Namespace) -> int:
    from tb.fptt import accounting
    from tb.fptt.tensors import Dims

    ks = args.K or [k for k in THESIS_KS if k <= args.T]
    with _user_errors():
        dims = Dims(args.input, args.hidden, args.classes, args.batch)
        for name in ("trunc_h", "trunc_s"):
            if getattr(args, name) is not None and getattr(args, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be zero or positive")
        for k in ks:
            accounting.partition_bounds(args.T, k)
        if args.ops:
            table = {
                k: accounting.ops_summary(accounting.op_counts(args.T, dims, k, args.trunc_h, args.trunc_s)) for k in ks
            }
        else:
            table = {
                k: {
                    p: accounting.memory(args.T, dims, k, p, args.trunc_h, args.trunc_s, args.layout)
                    for p in ("fp32", "bf16")
                }
                for k in ks
            }
    if args.json is not None:
        _emit_json(args.json, _memory_json(table, args))
        if args.json == "-":
            return 0
    print(_ops_text(table) if args.ops else _memory_text(table, args))
    return 0


def _memory_json(table: dict[int, Any], args: argparse.Namespace) -> dict[str, Any]:
    head = {
        "T": args.T,
        "hidden": args.hidden,
        "batch": args.batch,
        "input": args.input,
        "classes": args.classes,
        "trunc_h": args.trunc_h,
        "trunc_s": args.trunc_s,
    }
    if args.ops:
        return {**head, "per_K": {str(k): v for k, v in table.items()}}
    per_k = {
        str(k): {
            p: {"params": m.params, "grads": m.grads, "states": m.states, "work": m.work, "total": m.total}
            for p, m in row.items()
        }
        for k, row in table.items()
    }
    return {**head, "layout": args.layout, "unit": "bytes", "per_K": per_k}


def _memory_text(table: dict[int, Any], args: argparse.Namespace) -> str:
    lines = [
        f"FPTT-K memory, T={args.T} I={args.input} H={args.hidden} C={args.classes} B={args.batch}, "
        f"layout {args.layout} (bytes; params = theta + theta_bar + lambda)",
        f"{'K':>5} {'prec':>5} {'params':>10} {'grads':>10} {'states':>11} {'work':>8} {'total':>11} "
        f"{'MB':>8} {'MiB':>8}",
    ]
    for k, row in table.items():
        for p, m in row.items():
            lines.append(
                f"{k:>5} {p:>5} {m.params:>10} {m.grads:>10} {m.states:>11} {m.work:>8} {m.total:>11} "
                f"{m.total / MB:>8.3f} {m.total / MIB:>8.3f}"
            )
    return "\n".join(lines)


def _ops_text(table: dict[int, Any]) -> str:
    lines = []
    for k, s in table.items():
        lines.append(
            f"K={k}: GEMM MACs {s['gemm_macs']:,}  element-wise {s['elementwise_total']:,} "
            f"({100 * s['elementwise_share']:.2f} % of all operations)"
        )
        for tag, g in s["gemm"].items():
            lines.append(f"    gemm {tag:<11} {g['shape_MxKxN']:>14} x {g['calls']:>5} calls = {g['macs']:>13,} MACs")
        kinds = "  ".join(f"{kind} {n:,}" for kind, n in s["elementwise"].items())
        lines.append(f"    element-wise: {kinds}  fptt-update {s['fptt_update']:,}")
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    from tb.fptt import experiment

    with _user_errors():
        result = experiment.bench(hidden=args.hidden, K=args.K, batch=args.batch)
    text = json.dumps(result, indent=2)
    if args.json not in (None, "-"):
        _emit_json(args.json, result)
    print(text)
    return 0
