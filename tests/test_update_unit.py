"""The FPTT update unit (rtl/vector/update_unit.py) against its model (rtl/vector/update_model.py),
the model against the 13-command program and tb/fptt's bf16 reference, and the single-rounding
bf16 adder against the lanes' fp32 add followed by the bf16 narrowing."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import Bf16Add, Fp32Mul, FpAdd
from rtl.fp_model import fp_add, round_bf16
from rtl.vector import engine_model
from rtl.vector.programs import Loc, UpdateChunk, bf16_scalar, fptt_update
from rtl.vector.update_model import update
from rtl.vector.update_unit import ADDS, MULS, UpdateUnit
from tb.comb_eval import evaluate

# ±0, ±Inf, NaN (signalling, negative), subnormals, the smallest and largest normals, 1 and its
# neighbours, values whose sums or differences cancel to below 2^-126, overflow or tie.
BF16_EDGES = [
    0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFF81, 0x0001, 0x807F, 0x0080, 0x8080, 0x0081, 0x0100,
    0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F81, 0x3F7F, 0x4B80, 0x3380, 0x3B80, 0x3F00, 0x7F00, 0x00FF,
]  # fmt: skip
CFG = AccelConfig(4, 4, "bf16")


class _OnLaneAdders(wiring.Component):
    """The unit with every addition and every product with a scalar on an fp32 adder and multiplier
    outside it, as the engine's lanes lend theirs."""

    def __init__(self) -> None:
        self.unit = UpdateUnit(lane_adds=ADDS, lane_muls=MULS)
        names = ("theta", "theta_bar", "lam", "grad", "eta", "alpha", "kappa")
        ports = {n: In(16) for n in names} | {n: Out(16) for n in ("theta_o", "theta_bar_o", "lam_o")}
        super().__init__(ports)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.unit = unit = self.unit
        for name in ("theta", "theta_bar", "lam", "grad", "eta", "alpha", "kappa"):
            m.d.comb += getattr(unit, name).eq(getattr(self, name))
        for name in ("theta_o", "theta_bar_o", "lam_o"):
            m.d.comb += getattr(self, name).eq(getattr(unit, name))
        for i in range(ADDS):
            add = m.submodules[f"lane_add{i}"] = FpAdd(23)
            m.d.comb += [add.acc.eq(unit.lane_acc[i]), add.x.eq(unit.lane_x[i]), unit.lane_sum[i].eq(add.o)]
        for i in range(MULS):
            mul = m.submodules[f"lane_mul{i}"] = Fp32Mul()
            m.d.comb += [mul.a.eq(unit.lane_a[i]), mul.b.eq(unit.lane_b[i]), unit.lane_p[i].eq(mul.p)]
        return m


Operands = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
Scalars = tuple[int, int, int]  # η, α, κ
PORTS = ("theta", "theta_bar", "lam", "grad", "eta", "alpha", "kappa")


def _unit(groups: list[tuple[Operands, Scalars]], on_lanes: bool) -> list[tuple[np.ndarray, ...]]:
    """The unit's (θ', θ̄', λ') for each group of operand vectors, in one simulator run.

    The scalars are constant during a command and the unit may take them at a later stage than the
    operands, so each group is followed by ``LATENCY`` copies of its last vector, whose outputs are
    dropped, before the next group's scalars arrive."""
    pad = UpdateUnit.LATENCY
    columns: dict[str, list[np.ndarray]] = {name: [] for name in PORTS}
    for operands, scalars in groups:
        n = len(operands[0])
        values = [*operands, *(np.full(n, s) for s in scalars)]
        for name, v in zip(PORTS, values, strict=True):
            columns[name].append(np.concatenate([v, np.full(pad, v[-1])]))
    got = evaluate(
        _OnLaneAdders() if on_lanes else UpdateUnit(),
        {name: np.concatenate(parts) for name, parts in columns.items()},
        ("theta_o", "theta_bar_o", "lam_o"),
        latency=UpdateUnit.LATENCY,
    )
    results, start = [], 0
    for operands, _ in groups:
        n = len(operands[0])
        results.append(tuple(got[k][start : start + n].astype(np.uint16) for k in ("theta_o", "theta_bar_o", "lam_o")))
        start += n + pad
    return results


def _check(groups: list[tuple[Operands, Scalars]]) -> None:
    """The unit with its own bf16 adders and multipliers and with all of them on lanes' fp32 units."""
    wants = [update(*operands, *scalars) for operands, scalars in groups]
    for on_lanes in (False, True):
        for g, (want, got) in enumerate(zip(wants, _unit(groups, on_lanes), strict=True)):
            for name, w, v in zip(("theta", "theta_bar", "lam"), want, got, strict=True):
                bad = np.flatnonzero(w != v)
                assert not bad.size, (
                    f"{name}[{bad[0]}] of group {g} (lanes {on_lanes}): want {w[bad[0]]:#06x}, got {v[bad[0]]:#06x}"
                )


def test_bf16_add_matches_fp32_add_then_narrowing():
    """Every pair of edge values and 20,000 random pairs: one rounding to bf16 = the lanes' two."""
    rng = np.random.default_rng(1)
    pairs = np.array(list(itertools.product(BF16_EDGES, repeat=2)), dtype=np.uint16)
    rand = rng.integers(0, 0x10000, size=(20000, 2), dtype=np.uint16)
    # Exponent gaps near 15-17, where the fp32 rounding would first matter.
    near = rand.copy()
    near[:, 1] = (near[:, 0] & 0x807F) | ((((near[:, 0] >> 7) & 0xFF) - rng.integers(14, 19, 20000)) & 0xFF) << 7
    a, b = np.concatenate([pairs, rand, near]).T
    want = round_bf16(fp_add(a.astype(np.uint32) << 16, b.astype(np.uint32) << 16))
    assert np.array_equal(fp_add(a, b.astype(np.uint32) << 16, 7), want)  # the model's own claim
    got = evaluate(Bf16Add(), {"a": a, "b": b}, ("o",))["o"].astype(np.uint16)
    bad = np.flatnonzero(got != want)
    assert not bad.size, f"{a[bad[0]]:#06x} + {b[bad[0]]:#06x}: want {want[bad[0]]:#06x}, got {got[bad[0]]:#06x}"


# α = 0.5, α = 0 (κ = 0) and NaN/Inf scalars.
SCALAR_SETS = [(0x3D4D, 0x3F00, 0x3F80), (0x3D4D, 0x0000, 0x0000), (0x7F80, 0x7FC0, 0xFF80)]


@pytest.mark.slow  # over two minutes
def test_edges():
    """Every edge value in every operand position against every edge value in each other position,
    for each scalar set: one operand walks the edges while the others cycle through them."""
    e = np.array(BF16_EDGES, dtype=np.uint16)
    n = len(e)
    walks = []
    for walker in range(4):
        cols = [np.tile(np.roll(e, k), n) for k in range(1, 4)]
        cols.insert(walker, np.repeat(e, n))
        walks.append(cols)
    operands = [np.concatenate(c) for c in zip(*walks, strict=True)]
    _check([(tuple(operands), scalars) for scalars in SCALAR_SETS])


def test_random_operands_and_scalars():
    """Eight random scalar sets, each with 200 random operand vectors; a third of all values are edges."""
    rng = np.random.default_rng(12)
    edges, groups = np.array(BF16_EDGES, dtype=np.uint16), []
    for _ in range(8):
        values = rng.integers(0, 0x10000, size=(4, 200), dtype=np.uint16)
        scalars = rng.integers(0, 0x10000, size=3, dtype=np.uint16)
        values = np.where(rng.random(values.shape) < 1 / 3, rng.choice(edges, size=values.shape), values)
        scalars = np.where(rng.random(3) < 1 / 3, rng.choice(edges, size=3), scalars)
        groups.append((tuple(values), tuple(map(int, scalars))))
    _check(groups)


def test_subnormal_results_flush():
    """Differences that cancel below 2^-126 are ±0 in both; θ = θ̄ gives R' = −λ exactly."""
    theta = np.array([0x0100, 0x0081, 0x3F80], dtype=np.uint16)
    theta_bar = np.array([0x00FF, 0x0080, 0x3F80], dtype=np.uint16)
    lam = np.array([0x0080, 0x8080, 0x0000], dtype=np.uint16)
    grad = np.array([0x0000, 0x0080, 0x8000], dtype=np.uint16)
    _check([((theta, theta_bar, lam, grad), (0x3F80, 0x3F00, 0x3F80))])
    th = update(theta, theta_bar, lam, grad, 0x3F80, 0x3F00, 0x3F80)[0]
    # θ − θ̄ = 2^-133 flushes, so R' = −λ = 2^-126, g + R' = 2^-125 and θ' = 2^-126·(1 + 2^-7) − 2^-125,
    # below 2^-126: −0.
    assert th[1] == 0x8000


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.0])
def test_model_is_the_program_and_the_reference(alpha):
    """The model against the 13 commands through the engine model (which tests/test_vector_programs.py
    checks against tb/fptt's bf16 ``fptt_update``)."""
    rng = np.random.default_rng(3)
    n = 256
    vals = {k: (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            for k in ("theta", "theta_bar", "lam", "grad")}  # fmt: skip
    eta, a = bf16_scalar(0.05), bf16_scalar(alpha)
    kappa = 0 if alpha == 0 else bf16_scalar(1.0 / (2.0 * alpha))
    got = update(*vals.values(), eta >> 16, a >> 16, kappa >> 16)
    rows = n // CFG.dim
    names = ("theta", "theta_bar", "lam", "grad", "reg", "tmp")
    sp = np.zeros((len(names) * rows, CFG.dim), dtype=np.uint64)
    for k, name in enumerate(names[:4]):
        sp[k * rows : (k + 1) * rows] = vals[name].reshape(rows, CFG.dim)
    chunk = UpdateChunk(**{name: Loc(k * rows) for k, name in enumerate(names)})
    for c in fptt_update(rows, CFG.dim, chunk, eta, a):
        engine_model.run(CFG, c, sp, np.zeros((1, CFG.cols), dtype=np.uint64))
    for k, g in enumerate(got):
        assert np.array_equal(sp[k * rows : (k + 1) * rows].ravel().astype(np.uint16), g)
