"""Training runs on a data set: the configuration, the per-epoch curve, the timing benchmark."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from .arith import Arith, Precision
from .data import SequenceData, Stream, load_digits_sequences
from .model import init_params, init_state, partition_bounds
from .tensors import Dims, Hyper
from .train import evaluate, train_epoch


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults: see docs/fptt.md ("CLI defaults") for why."""

    dataset: str = "digits"
    stream: Stream = "pixel"
    hidden: int = 32
    K: int = 8
    precision: Precision = "fp32"
    epochs: int = 30
    lr: float = 0.1
    alpha: float = 0.1
    batch: int = 16
    seed: int = 0
    split_seed: int = 0
    trunc_h: int | None = None
    trunc_s: int | None = None
    ramp: bool = False
    cut_s_at_window: bool = False

    def hyper(self) -> Hyper:
        return Hyper(self.lr, self.alpha, self.K, self.trunc_h, self.trunc_s, self.ramp, self.cut_s_at_window)


def load_data(cfg: TrainConfig) -> SequenceData:
    if cfg.dataset != "digits":
        raise ValueError(f"dataset must be digits (the one bundled with scikit-learn), not {cfg.dataset!r}")
    return load_digits_sequences(cfg.stream, split_seed=cfg.split_seed)


def validate(cfg: TrainConfig, data: SequenceData) -> None:
    """Refuse a bad configuration before any work, with one line naming the option."""
    cfg.hyper()
    partition_bounds(data.steps, cfg.K)
    Dims(data.inputs, cfg.hidden, data.classes, cfg.batch)
    if cfg.epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {cfg.epochs}")
    if cfg.batch > len(data.y_train):
        raise ValueError(f"batch {cfg.batch} is larger than the training set ({len(data.y_train)} samples)")


def run(
    cfg: TrainConfig,
    data: SequenceData | None = None,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> list[dict[str, float]]:
    """Train and evaluate after every epoch; returns one record per epoch."""
    data = data or load_data(cfg)
    validate(cfg, data)
    ar = Arith(cfg.precision)
    rng = np.random.default_rng(cfg.seed)
    dims = Dims(data.inputs, cfg.hidden, data.classes, cfg.batch)
    state = init_state(init_params(dims, rng), ar.storage)
    hp = cfg.hyper()
    curve = []
    for epoch in range(1, cfg.epochs + 1):
        start = time.perf_counter()
        tick = None if progress is None else (lambda k, n, e=epoch: progress(e, k, n))
        state, seq_loss = train_epoch(state, data.x_train, data.y_train, hp, cfg.batch, rng, ar, tick)
        seconds = time.perf_counter() - start
        train_acc, train_loss = evaluate(state.theta, data.x_train, data.y_train, ar)
        test_acc, test_loss = evaluate(state.theta, data.x_test, data.y_test, ar)
        rec = {
            "epoch": epoch,
            "train_acc": train_acc,
            "test_acc": test_acc,
            "train_loss": train_loss,
            "test_loss": test_loss,
            "sequence_loss": seq_loss,
            "seconds": seconds,
        }
        curve.append(rec)
        if on_epoch is not None:
            on_epoch(rec)
    return curve


def config_dict(cfg: TrainConfig) -> dict[str, object]:
    return asdict(cfg)


def bench(hidden: int = 32, K: int = 8, batch: int = 16, seed: int = 0) -> dict[str, object]:
    """Wall-clock seconds of one training epoch of digits by pixel, fp32 and bf16."""
    data = load_digits_sequences("pixel")
    out: dict[str, object] = {"dataset": "digits", "stream": "pixel", "hidden": hidden, "K": K, "batch": batch}
    for prec in ("fp32", "bf16"):
        cfg = TrainConfig(hidden=hidden, K=K, batch=batch, precision=prec, epochs=1, seed=seed)
        validate(cfg, data)
        ar = Arith(prec)
        rng = np.random.default_rng(seed)
        state = init_state(init_params(Dims(data.inputs, hidden, data.classes, batch), rng), ar.storage)
        start = time.perf_counter()
        train_epoch(state, data.x_train, data.y_train, cfg.hyper(), batch, rng, ar)
        out[f"epoch_seconds_{prec}"] = time.perf_counter() - start
    out["target_seconds"] = 60.0
    return out
