"""Multi-TPU segmentation on pyard (docs/segment.md): the synthetic models and their reference, the
whole-layer placement, the split strategies, and Verilator runs of the pipeline firmware.

Default-suite cost: no new SoC build. The runs use the 1x1-int8, 2-core, 2-tile SoC that
tests/test_soc_tiles.py builds (the segmentation does not depend on the tile's size); the slow tests
use `pyard segment`'s own 4x4-int8 SoC with four harts and four tiles.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from rtl.config import ConfigError, load_config
from segment.api import profile, run_segmented, segment_soc
from segment.firmware import execute, pipeline
from segment.model import ModelSpec, build_model, inputs, reference
from segment.placement import STREAMED, capacity, place, sp_rows_of
from segment.strategies import equal, exhaustive, profiled, splits, stage_costs
from segment.wolt import WoltJob, run_wolt
from sim.cli import main as pyard
from soc.config import SocConfig

SHARED = SocConfig(accel=load_config("1x1-int8").replace(sp_kib=16, acc_kib=16), cores=2, tiles=2)
# n = 64 on the 1x1 tile: 13,824 weight bytes against about 12 KB of resident room per tile, so one
# tile must stream a hidden layer and two tiles hold everything.
SPEC = ModelSpec("fc", 64, inputs=16, outputs=8)
BATCH = 6


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [("model", {"kind": "rnn"}), ("size", {"size": 3}), ("size", {"kind": "conv", "size": 300}), ("rows", {"rows": 0})],
)
def test_bad_model_fields_are_refused_by_name(field: str, kwargs: dict) -> None:
    with pytest.raises(ConfigError, match=rf"^{field} = .* is invalid: allowed"):
        ModelSpec(**kwargs)


def test_reference_is_integer_matmul_then_round_half_even_shift_relu_and_saturation() -> None:
    acc = SHARED.accel
    x = inputs(SPEC, 3)
    model = build_model(SPEC, acc, x)
    outs = reference(model, acc, x)
    h = x.astype(np.int64)
    for w, s, out in zip(model.weights, model.shifts, outs, strict=True):
        exact = h @ w.astype(np.int64)
        want = np.clip(np.maximum(np.round(exact / 2.0**s), 0), -128, 127)  # np.round: half to even
        np.testing.assert_array_equal(out, want)
        h = want.astype(np.int64)
    assert np.count_nonzero(outs[-1]) > outs[-1].size // 4  # the shifts keep the signal alive


def test_conv_reference_equals_a_direct_convolution() -> None:
    spec = ModelSpec("conv", 4, inputs=3, hw=5)
    acc = SHARED.accel
    x = inputs(spec, 2)
    model = build_model(spec, acc, x)
    first = reference(model, acc, x)[0].reshape(2, 5, 5, 4)
    img = np.pad(x.reshape(2, 5, 5, 3).astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    w = model.weights[0].astype(np.int64)
    exact = sum(np.einsum("nhwc,cf->nhwf", img[:, i : i + 5, j : j + 5], w[i, j]) for i in range(3) for j in range(3))
    want = np.clip(np.maximum(np.round(exact / 2.0 ** model.shifts[0]), 0), -128, 127)
    np.testing.assert_array_equal(first, want)


def test_placement_keeps_whole_layers_in_order_while_they_fit() -> None:
    acc = SHARED.accel
    layers = SPEC.layers()
    first, end = capacity(acc, layers)
    assert first >= acc.sp_layout.a_base + acc.sp_layout.slots and end == acc.sp_layout.a_base + acc.sp_layout.a_rows
    p = place(acc, layers)
    need = [sp_rows_of(acc, lay) for lay in layers]
    assert sum(need) > end - first  # the model overflows one tile ...
    assert p.rows[3] == STREAMED and p.rows[4] != STREAMED  # ... the 4th layer streams, the small last fits
    placed = [(r, r + n) for r, n in zip(p.rows, need, strict=True) if r != STREAMED]
    assert all(b <= c for (_, b), (c, _) in itertools.pairwise(placed)) and placed[-1][1] <= end
    assert sum(p.resident_bytes()) + sum(p.streamed_bytes()) == sum(lay.weight_bytes for lay in layers)
    conv = ModelSpec("conv", 8).layers()  # a convolution's B: (3·3·C_in) × f, one row per K row and N tile
    assert [sp_rows_of(acc, lay) for lay in conv] == [8 * 9 * 32, *[8 * 9 * 8] * 4]
    assert all(r != STREAMED for r in place(acc, conv).rows)  # 16 KiB holds these convolutions
    # On the 8 KiB scratchpad one f × f layer of the conv model fits above its A, two do not: a
    # segment that would stream a convolution (whose A then uses the whole region) keeps nothing.
    big = segment_soc().accel, ModelSpec("conv", 16).layers()
    assert place(big[0], big[1][1:2]).rows != (STREAMED,) and place(big[0], big[1][1:3]).rows == (STREAMED,) * 2
    assert all(r == STREAMED for r in place(acc, layers, stream_all=True).rows)


def test_strategies_on_a_known_cost() -> None:
    cost_of = [1.0, 9.0, 9.0, 1.0, 1.0]  # layer cycles; a segment costs their sum

    def cost(a: int, b: int) -> float:
        return sum(cost_of[a:b])

    assert equal(5, 2) == (0, 3, 5) and equal(5, 3) == (0, 2, 4, 5) and equal(5, 1) == (0, 5)
    assert len(splits(5, 2)) == 4 and len(splits(5, 3)) == 6 and len(splits(5, 4)) == 4  # C(4, s-1)
    assert profiled(5, 2, cost, 0.1) == (0, 2, 5)  # 19 | 2 -> 10 | 11

    # exhaustive takes a whole split's time; here the slowest segment's cost plays it
    def slowest(bounds: tuple[int, ...]) -> float:
        return max(stage_costs(bounds, cost))

    assert exhaustive(5, 2, slowest, (0, 3, 5)) == (0, 2, 5)
    assert slowest(exhaustive(5, 3, slowest, (0, 1, 2, 5))) == 10  # from 1 | 9 | 11
    assert exhaustive(5, 3, slowest, (0, 2, 4, 5)) == (0, 2, 4, 5)  # 10 | 10 | 1: a tie keeps the start
    assert profiled(5, 2, cost, 1.0) == equal(5, 2)  # a threshold of 100 % accepts the first split


@pytest.mark.parametrize(
    "argv",
    [["run", "--tiles", "5"], ["run", "--strategy", "best"], ["run", "--size", "2"], ["curve", "--model", "rnn"]],
)
def test_cli_refuses_bad_arguments_in_one_line(argv: list[str], capsys) -> None:
    assert pyard(["segment", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyard: error: segment") and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def measured() -> dict[str, dict]:
    """The three strategies on 2 tiles, sharing one profiling run (the model is the same)."""
    x = inputs(SPEC, BATCH)
    prof = profile(SHARED, build_model(SPEC, SHARED.accel, x))
    return {s: run_segmented(SHARED, SPEC, 2, s, BATCH, prof=prof) for s in ("equal", "profiled", "exhaustive")}


def test_two_tile_pipeline_is_bit_exact_and_reads_what_the_placement_says(measured: dict[str, dict]) -> None:
    """run_segmented raises on any output byte that differs from the reference; here also: every
    stage's tile read, during the inferences, exactly its layers' inputs and streamed weights."""
    layers = SPEC.layers()
    for r in measured.values():
        assert r["bit_exact"] and r["bounds"][0] == 0 and r["bounds"][-1] == 5
        for st in r["stages"]:
            a, b = st["layers"]
            want = BATCH * (sum(lay.in_bytes for lay in layers[a:b]) + st["streamed_bytes"])
            assert st["dma_read_bytes"] == want
        assert sum(s["resident_bytes"] + s["streamed_bytes"] for s in r["stages"]) == r["weights_bytes"]
    assert all(s["streamed_bytes"] == 0 for s in measured["exhaustive"]["stages"])  # two tiles hold it all


def test_strategy_ordering_on_measured_cycles(measured: dict[str, dict]) -> None:
    """exhaustive runs every split as the pipeline and keeps the fastest, or the profiled split
    when that runs faster alone: never slower than profiled."""
    per = {s: r["cycles_per_inference"] for s, r in measured.items()}
    assert per["exhaustive"] <= per["profiled"] <= per["equal"], per
    times = measured["exhaustive"]["split_cycles_per_inference"]
    assert sorted(times) == sorted("-".join(map(str, b)) for b in splits(5, 2))
    fastest = min(times, key=times.__getitem__)
    chosen, prof_split = ("-".join(map(str, measured[s]["bounds"])) for s in ("exhaustive", "profiled"))
    assert chosen in (fastest, prof_split) and times[fastest] < 0.99 * min(times[k] for k in times if k != fastest)


def test_batch_of_one_on_one_tile_streams_what_does_not_fit() -> None:
    r = run_segmented(SHARED, SPEC, 1, "equal", 1)
    (st,) = r["stages"]
    assert (
        st["streamed_bytes"] == SPEC.size**2
        and st["dma_read_bytes"] == sum(lay.in_bytes for lay in SPEC.layers()) + st["streamed_bytes"]
    )


def test_conv_pipeline_with_resident_weights_is_bit_exact_and_reads_no_resident_weight() -> None:
    """CONV2D with resident weights (flag [21]): the two-stage pipeline's output equals the unsplit
    NumPy model byte for byte, and each stage's tile reads, during the inferences, at least the
    resident weights' bytes (once an inference) less than the same split with every weight streamed."""
    spec, batch, bounds = ModelSpec("conv", 4, inputs=3, hw=5), 3, (0, 2, 5)
    acc = SHARED.accel
    x = inputs(spec, batch)
    model = build_model(spec, acc, x)
    runs = [pipeline(acc, model, bounds, batch, check=True), pipeline(acc, model, bounds, batch, stream=True)]
    assert all(r != STREAMED for r in runs[0].res_rows(5)) and all(r == STREAMED for r in runs[1].res_rows(5))
    (resident, streamed), got = execute(SHARED, model, runs, x)
    np.testing.assert_array_equal(got, reference(model, acc, x)[-1])
    for r_st, s_st, placed in zip(resident.stages, streamed.stages, runs[0].placements, strict=True):
        assert sum(placed.resident_bytes()) == sum(lay.weight_bytes for lay in placed.layers) > 0
        assert r_st.error == s_st.error == 0
        assert s_st.dma_read - r_st.dma_read >= batch * sum(placed.resident_bytes()), (r_st, s_st)


def test_wolt_applications_gain_from_a_second_tile_under_either_policy() -> None:
    """Two GEMM-bound applications (no CPU work): a second tile nearly halves the time with the
    resource manager's round robin and with static binding; every result equals NumPy's (run_wolt
    checks each application's C)."""
    job = WoltJob(iters=3, cpu_iters=0, m=8, k=16, n=8)
    for static in (False, True):
        one, two = (run_wolt(SHARED, 2, tiles, static, job) for tiles in (1, 2))
        assert one["jobs"] == two["jobs"] == 6
        assert two["cycles"] < 0.75 * one["cycles"], (one, two)


@pytest.mark.slow
def test_waiting_applications_take_the_tile_in_turn() -> None:
    """Three applications on one tile, under either policy (the case of docs/segment.md): the
    waiting harts are served first come, first served (the resource manager's ticket queue,
    static binding's ticket lock), so the three take turns and each one's last job ends within
    two job periods of the others'. With locks the harts raced for, two applications alternated
    while the third starved and then ran its jobs alone."""
    job = WoltJob(iters=12)
    for static in (False, True):
        r = run_wolt(segment_soc(), 3, 1, static, job)
        period = (r["hart0_cpu_cycles"] + r["hart0_gemm_cycles"]) / job.iters
        finish = r["finish_cycles"]
        assert len(finish) == 3 and max(finish) - min(finish) <= 2 * period, r


# At PYARD_SCALE=small (the CI) 3 tiles only: 4 tiles' pipeline is the conv test's below.
FC_TILES = [3] if os.environ.get("PYARD_SCALE") == "small" else [3, 4]


@pytest.mark.slow
@pytest.mark.parametrize("tiles", FC_TILES)
def test_full_scale_fc_pipeline_at_batch_50(tiles: int) -> None:
    cfg = segment_soc()
    spec = ModelSpec("fc", 64)
    x = inputs(spec, 50)
    prof = profile(cfg, build_model(spec, cfg.accel, x))
    per = {
        s: run_segmented(cfg, spec, tiles, s, 50, prof=prof)["cycles_per_inference"]
        for s in ("equal", "profiled", "exhaustive")
    }
    assert per["exhaustive"] <= per["profiled"] <= per["equal"], per


@pytest.mark.slow
def test_conv_strategies_keep_their_order_on_three_tiles() -> None:
    """The split that the per-segment profile favours for the conv model on 3 tiles streams in
    every stage and is slower as a pipeline (docs/segment.md); measuring each split as the
    pipeline, exhaustive keeps the profiled one or a faster one."""
    cfg, spec = segment_soc(), ModelSpec("conv", 16)
    x = inputs(spec, 4)
    prof = profile(cfg, build_model(spec, cfg.accel, x))
    per = {
        s: run_segmented(cfg, spec, 3, s, 4, prof=prof)["cycles_per_inference"]
        for s in ("equal", "profiled", "exhaustive")
    }
    assert per["exhaustive"] <= per["profiled"] <= per["equal"], per


@pytest.mark.slow
def test_conv_pipeline_on_four_tiles_is_bit_exact_with_resident_weights() -> None:
    """The equal split [0,2) [2,3) [3,4) [4,5): each one-layer f × f stage keeps its 2,304 weight
    bytes resident (docs/segment.md), the first stage streams; the output is the reference's."""
    r = run_segmented(segment_soc(), ModelSpec("conv", 16), 4, "equal", 4)
    assert r["bit_exact"] and [s["resident_bytes"] for s in r["stages"]] == [0, 2304, 2304, 2304]
    assert [s["streamed_bytes"] for s in r["stages"]] == [4608 + 2304, 0, 0, 0]
    # A resident stage's tile reads its input only (once per kernel position): far below a streamed one.
    assert all(s["dma_read_bytes"] * 5 < r["stages"][0]["dma_read_bytes"] for s in r["stages"][1:])
