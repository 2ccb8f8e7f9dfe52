"""The FPTT update unit (rtl/vector/update_unit.py) against its model (rtl/vector/update_model.py),
the model against the 13-command program and tb/fptt's bf16 reference, and the single-rounding
bf16 adder against the lanes' fp32 add followed by the bf16 narrowing."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st

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
BF16 = st.integers(0, 0xFFFF)
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


def _unit(theta, theta_bar, lam, grad, eta, alpha, kappa, on_lanes: bool = False):
    n = len(theta)
    scalars = {k: np.full(n, v) for k, v in (("eta", eta), ("alpha", alpha), ("kappa", kappa))}
    got = evaluate(
        _OnLaneAdders() if on_lanes else UpdateUnit(),
        {"theta": theta, "theta_bar": theta_bar, "lam": lam, "grad": grad, **scalars},
        ("theta_o", "theta_bar_o", "lam_o"),
        latency=UpdateUnit.LATENCY,
    )
    return tuple(got[k].astype(np.uint16) for k in ("theta_o", "theta_bar_o", "lam_o"))


def _check(theta, theta_bar, lam, grad, eta, alpha, kappa):
    """The unit with its own bf16 adders and multipliers and with all of them on lanes' fp32 units."""
    want = update(theta, theta_bar, lam, grad, eta, alpha, kappa)
    for on_lanes in (False, True):
        got = _unit(theta, theta_bar, lam, grad, eta, alpha, kappa, on_lanes)
        for name, w, g in zip(("theta", "theta_bar", "lam"), want, got, strict=True):
            bad = np.flatnonzero(w != g)
            assert not bad.size, f"{name}[{bad[0]}] (lanes {on_lanes}): want {w[bad[0]]:#06x}, got {g[bad[0]]:#06x}"


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


def test_edges():
    """Every edge value in every operand position, with α = 0.5, α = 0 (κ = 0) and NaN/Inf scalars."""
    e = np.array(BF16_EDGES, dtype=np.uint16)
    n = len(e)
    shifted = [np.roll(e, k) for k in range(4)]
    for eta, alpha, kappa in ((0x3D4D, 0x3F00, 0x3F80), (0x3D4D, 0x0000, 0x0000), (0x7F80, 0x7FC0, 0xFF80)):
        batch = []
        for perm in itertools.permutations(range(4)):
            cols = [np.tile(shifted[p], n) for p in perm]
            cols[perm.index(0)] = np.repeat(e, n)  # one operand walks every value against all others
            batch.append(cols)
        _check(*(np.concatenate(c) for c in zip(*batch, strict=True)), eta, alpha, kappa)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(BF16, BF16, BF16, BF16), min_size=1, max_size=64), BF16, BF16, BF16)
def test_hypothesis(values, eta, alpha, kappa):
    theta, theta_bar, lam, grad = (np.array(c, dtype=np.uint16) for c in zip(*values, strict=True))
    _check(theta, theta_bar, lam, grad, eta, alpha, kappa)


def test_subnormal_results_flush():
    """Differences that cancel below 2^-126 are ±0 in both; θ = θ̄ gives R' = −λ exactly."""
    theta = np.array([0x0100, 0x0081, 0x3F80], dtype=np.uint16)
    theta_bar = np.array([0x00FF, 0x0080, 0x3F80], dtype=np.uint16)
    lam = np.array([0x0080, 0x8080, 0x0000], dtype=np.uint16)
    grad = np.array([0x0000, 0x0080, 0x8000], dtype=np.uint16)
    _check(theta, theta_bar, lam, grad, 0x3F80, 0x3F00, 0x3F80)
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
