"""Segment a synthetic model over 1–4 tiles, run it as a pipeline and check it (``pyard segment``).

The SoC is ``segment_soc()``: 4x4-int8 tiles with an 8 KiB scratchpad (6 KiB A region: the
"on-chip memory" the synthetic models outgrow), four harts and four tiles, so one simulator build
serves every tile count (a run with s stages uses harts and tiles 0 to s-1; the others stay idle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rtl.config import AccelConfig, ConfigError, check_choice, check_int, load_config
from segment.firmware import RunReport, execute, pipeline
from segment.model import Model, ModelSpec, build_model, inputs, reference
from segment.placement import STREAMED, place
from segment.strategies import STRATEGIES, equal, exhaustive, profiled, splits
from soc.config import SocConfig

__all__ = ["PROFILE_BATCH", "Profile", "curve_point", "profile", "run_segmented", "segment_soc"]

PROFILE_BATCH = 2  # inferences per profiling run (its cycles are divided by them)
MAX_TILES = 4


def segment_soc(mem_latency: int = 32) -> SocConfig:
    """The segmentation SoC; ``mem_latency`` (cycles to the first read beat) slows main memory down
    towards the Edge TPU's host memory behind PCIe: with 64 bursts in flight, a latency of L cycles
    lets a tile stream at most 64 / L bursts a cycle."""
    accel = load_config("4x4-int8").replace(sp_kib=8, acc_kib=16)
    return SocConfig(accel=accel, cores=MAX_TILES, tiles=MAX_TILES, mem_latency=mem_latency)


@dataclass
class Profile:
    """Cycles per inference measured on one tile: every segment ``[a, b)`` with its own placement
    (``segment``), and every layer with its weights streamed (``streamed``)."""

    segment: dict[tuple[int, int], float]
    streamed: list[float]

    def layer_estimate(self, model: Model, acc: AccelConfig, a: int, b: int) -> float:
        """The profiled strategy's estimate of ``[a, b)``: its layers' own cycles, resident or
        streamed as the segment's placement puts them."""
        rows = place(acc, model.layers[a:b]).rows
        return sum(
            self.streamed[a + i] if r == STREAMED else self.segment[(a + i, a + i + 1)] for i, r in enumerate(rows)
        )


def profile(cfg: SocConfig, model: Model) -> Profile:
    """One firmware run of every segment alone, and of every layer streamed, on tile 0."""
    n = len(model.layers)
    segs = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    runs = [pipeline(cfg.accel, model, (a, b), PROFILE_BATCH) for a, b in segs]
    runs += [pipeline(cfg.accel, model, (i, i + 1), PROFILE_BATCH, stream=True) for i in range(n)]
    x = inputs(model.spec, PROFILE_BATCH)
    reports, _ = execute(cfg, model, runs, x)
    seg = {s: r.per_inference for s, r in zip(segs, reports, strict=False)}
    return Profile(seg, [r.per_inference for r in reports[len(segs) :]])


def choose(
    strategy: str, model: Model, cfg: SocConfig, tiles: int, prof: Profile | None, threshold: float, x
) -> tuple[list[tuple[int, ...]], dict[tuple[int, ...], float]]:
    """The splits to run, the first preferred, and for ``exhaustive`` every split's measured cycles
    per inference. exhaustive's runs share one firmware run, where a pipeline's figure differs from
    its run alone by a few cycles an inference; so where it prefers a split other than the profiled
    one, both are run alone and the faster kept (exhaustive is never slower than profiled)."""
    n = len(model.layers)
    if strategy == "equal" or tiles == 1:
        return [equal(n, tiles)], {}
    assert prof is not None
    acc = cfg.accel
    split = profiled(n, tiles, lambda a, b: prof.layer_estimate(model, acc, a, b), threshold)
    if strategy == "profiled":
        return [split], {}
    times = split_times(cfg, model, splits(n, tiles), x)
    best = exhaustive(n, tiles, times.__getitem__, split)
    return ([best, split] if best != split else [best]), times


def split_times(cfg: SocConfig, model: Model, candidates: list[tuple[int, ...]], x) -> dict[tuple[int, ...], float]:
    """Each split run as the checked pipeline over ``x``, all in one firmware run: its cycles per
    inference."""
    runs = [pipeline(cfg.accel, model, b, x.shape[0], check=True) for b in candidates]
    reports, _ = execute(cfg, model, runs, x)
    return {tuple(r.run.bounds): r.per_inference for r in reports}


def check_args(tiles: int, strategy: str, batch: int, threshold: float) -> None:
    check_int("tiles", tiles, 1, MAX_TILES)
    check_choice("strategy", strategy, STRATEGIES)
    check_int("batch", batch, 1, 256)
    if not 0 <= threshold <= 1:
        raise ConfigError("threshold", threshold, "a number from 0 to 1")


def run_segmented(
    cfg: SocConfig,
    spec: ModelSpec,
    tiles: int,
    strategy: str,
    batch: int,
    threshold: float = 0.1,
    prof: Profile | None = None,
) -> dict[str, Any]:
    """Choose the split, run the pipeline on ``batch`` inputs, check the outputs against the NumPy
    reference bit for bit (a mismatch raises), and report it."""
    check_args(tiles, strategy, batch, threshold)
    if tiles > min(cfg.tiles, cfg.cores):
        raise ConfigError("tiles", tiles, f"1 to {min(cfg.tiles, cfg.cores)} on the {cfg.name} SoC")
    acc = cfg.accel
    x = inputs(spec, batch)
    model = build_model(spec, acc, x)
    want = reference(model, acc, x)[-1]
    n = len(model.layers)
    if tiles > n:
        raise ConfigError("tiles", tiles, f"at most the model's {n} layers")
    if prof is None and strategy != "equal" and tiles > 1:
        prof = profile(cfg, model)
    finalists, times = choose(strategy, model, cfg, tiles, prof, threshold, x)
    report = None
    for bounds in finalists:  # each alone, checked; the first unless a later one is strictly faster
        (run,), got = execute(cfg, model, [pipeline(acc, model, bounds, batch, check=True)], x)
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            raise RuntimeError(f"pipeline output differs from the reference in {bad} of {want.size} bytes")
        if report is None or run.per_inference < report.per_inference:
            report = run
    assert report is not None
    out = _report(model, strategy, report, prof, tiles)
    if times:
        out["split_cycles_per_inference"] = {"-".join(map(str, b)): c for b, c in times.items()}
    return out


def _report(model: Model, strategy: str, report: RunReport, prof: Profile | None, tiles: int) -> dict[str, Any]:
    run = report.run
    stages = []
    for s, (st, placed) in enumerate(zip(report.stages, run.placements, strict=True)):
        stages.append(
            {
                "stage": s,
                "layers": [st.first, st.end],
                "resident_bytes": sum(placed.resident_bytes()),
                "streamed_bytes": sum(placed.streamed_bytes()),
                "per_layer": [
                    {"layer": st.first + i, "resident_bytes": r, "streamed_bytes": t}
                    for i, (r, t) in enumerate(zip(placed.resident_bytes(), placed.streamed_bytes(), strict=True))
                ],
                "busy_cycles": st.busy,
                "wait_cycles": st.wait,
                "load_cycles": st.load,
                "dma_read_bytes": st.dma_read,
            }
        )
    out: dict[str, Any] = {
        "model": model.spec.kind,
        "size": model.spec.size,
        "weights_bytes": sum(lay.weight_bytes for lay in model.layers),
        "macs_per_inference": sum(lay.macs for lay in model.layers),
        "tiles": tiles,
        "strategy": strategy,
        "batch": run.batch,
        "bounds": list(run.bounds),
        "cycles": report.cycles,
        "cycles_per_inference": report.per_inference,
        "bit_exact": True,
        "stages": stages,
    }
    if prof is not None:
        out["profile"] = {
            "segment_cycles": {f"{a}-{b}": c for (a, b), c in prof.segment.items()},
            "layer_streamed_cycles": prof.streamed,
            "splits_considered": len(splits(len(model.layers), tiles)),
        }
    return out


def curve_point(cfg: SocConfig, spec: ModelSpec, batch: int) -> dict[str, Any]:
    """One point of the stepped latency curve: the whole model on one tile."""
    r = run_segmented(cfg, spec, 1, "equal", batch)
    st = r["stages"][0]
    return {
        "size": spec.size,
        "weights_bytes": r["weights_bytes"],
        "resident_bytes": st["resident_bytes"],
        "streamed_bytes": st["streamed_bytes"],
        "macs_per_inference": r["macs_per_inference"],
        "cycles_per_inference": r["cycles_per_inference"],
    }
