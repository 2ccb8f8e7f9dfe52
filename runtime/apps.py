"""GPTPU's applications (its Table 3), scaled to simulation, each a few lines on the runtime API,
with a float64 reference and GPTPU's error measures (its Table 4: MAPE, RMSE)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from math import erf, sqrt

import numpy as np
import numpy.typing as npt

from runtime.api import Runtime

__all__ = ["APPS", "DIGIT_APPS", "AppResult", "run_app"]

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class AppResult:
    app: str
    size: str
    digits: int | None  # GEMM operand digits (None: the app has no GEMM)
    mape: float  # mean |got − want| / |want|, in percent (elements with want ≠ 0)
    rmse: float  # root mean square of (got − want) / want, in percent
    cycles_total: int  # device cycles summed over the devices
    cycles_max: int  # the busiest device's cycles: the run's length on devices working in parallel
    device_cycles: list[int]  # each device's cycles
    bytes_written: list[int]  # each device's bytes written by the host into its memory
    bytes_read: list[int]  # each device's bytes read back by the host


def errors(got: Array, want: Array) -> tuple[float, float]:
    """MAPE and RMSE of the relative error, in percent, over the elements with want ≠ 0."""
    nz = want != 0
    relative = (got[nz] - want[nz]) / want[nz]
    return float(np.mean(np.abs(relative))) * 100, float(np.sqrt(np.mean(relative**2))) * 100


# -- GEMM ---------------------------------------------------------------------------------------


def gemm(rt: Runtime, rng: np.random.Generator, n: int, digits: int = 1) -> tuple[Array, Array]:
    a, b = rng.uniform(0, 1, (n, n)), rng.uniform(0, 1, (n, n))
    return rt.gemm(a, b, digits=digits), a @ b


# -- BlackScholes: the normal CDF as a polynomial, evaluated by FullyConnected ------------------

CND_RANGE = 4.0  # |x| beyond this: CND is 0 or 1 to 3e-5; the polynomial works on t = x / 4
CND_DEGREE = 15  # max |error| 6.4e-5 on [-4, 4] (degree 9: 4.5e-3, a price MAPE of 1.34 % alone)
# CND(x) − ½ is odd, so only T_0 and the odd T_k (all within ±1) carry it: degree 15 takes 9
# columns. In the Chebyshev basis the coefficients stay below 1 and the terms do not cancel
# (monomial coefficients alternate in sign and grow), so the operands' rounding stays small.
CND_TERMS = [0, *range(1, CND_DEGREE + 1, 2)]
_T = np.linspace(-1, 1, 2001)
CND_POLY = np.polynomial.chebyshev.chebfit(_T, [0.5 * (1 + erf(CND_RANGE * t / sqrt(2))) for t in _T], CND_DEGREE)[
    CND_TERMS
]


def blackscholes(rt: Runtime, rng: np.random.Generator, n: int, digits: int = 2) -> tuple[Array, Array]:
    """European calls. The CND of d1 and d2 is one ``fully_connected`` of their Chebyshev basis
    (the tensor GPTPU builds: one row per input) with the coefficients, its operands in two digits
    by default: one int8 digit resolves d only to 4/254 ≈ 0.016, which moves the CND by up to
    0.006, and cheap options magnify that (docs/runtime.md)."""
    s, k = rng.uniform(80, 120, n), rng.uniform(80, 120, n)
    t, v, r = rng.uniform(0.25, 2, n), rng.uniform(0.2, 0.5, n), 0.02
    d1 = (np.log(s / k) + (r + v * v / 2) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    x = np.clip(np.concatenate([d1, d2]), -CND_RANGE, CND_RANGE) / CND_RANGE
    basis = np.polynomial.chebyshev.chebvander(x, CND_DEGREE)[:, CND_TERMS]
    cnd = rt.fully_connected(basis, CND_POLY[:, None], digits=digits)[:, 0]
    got = s * cnd[:n] - k * np.exp(-r * t) * cnd[n:]
    cnd64 = np.vectorize(lambda z: 0.5 * (1 + erf(z / sqrt(2))))
    return got, s * cnd64(d1) - k * np.exp(-r * t) * cnd64(d2)


# -- HotSpot3D: the 7-point stencil and the power as one conv2D per step, the layers as channels --


def hotspot_kernel(layers: int, cc: float = 0.375, cn: float = 0.125, cz: float = 0.0625) -> Array:
    """HWIO weights: in-plane neighbours (cn) and the centre (cc) within a layer, the layers
    above and below (cz) through the channel dimension; the weights sum to 1 in the interior.
    The defaults are exact in bf16 (0.4, 0.12, 0.06 round to a sum of 1.001: a drift of 0.1 % per
    step that would be the method's error, not the device's)."""
    w = np.zeros((3, 3, layers, layers))
    for z in range(layers):
        missing = (z == 0) + (z == layers - 1)  # a border layer keeps its own heat instead
        w[1, 1, z, z] = cc + cz * missing
        for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
            w[dy, dx, z, z] = cn
        for zz in (z - 1, z + 1):
            if 0 <= zz < layers:
                w[1, 1, zz, z] = cz
    return w


def hotspot3d(rt: Runtime, rng: np.random.Generator, n: int, layers: int = 4, steps: int = 4) -> tuple[Array, Array]:
    temp = rng.uniform(320, 340, (1, n, n, layers))
    power = rng.uniform(0, 0.5, (1, n, n, layers))
    w = hotspot_kernel(layers)
    # The power enters as more input channels with weight 1 at the centre: added in the
    # accumulators, not by a separate add of two int8 / bf16 tensors.
    w_power = np.concatenate([w, np.zeros_like(w)], axis=2)
    w_power[1, 1, layers:, :] = np.eye(layers)
    edge = ((0, 0), (1, 1), (1, 1), (0, 0))  # the chip's border: its own temperature
    got, want = temp, temp
    for _ in range(steps):
        got = rt.conv2d(np.concatenate([np.pad(got, edge, mode="edge"), np.pad(power, edge)], axis=3), w_power)
        want = _conv_ref(np.pad(want, edge, mode="edge"), w) + power
    return got, want


def _conv_ref(x: Array, w: Array) -> Array:
    kh, kw, _, _ = w.shape
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += x[:, i : i + oh, j : j + ow, :] @ w[i, j]
    return out


# -- PageRank: power iteration with the link matrix -----------------------------------------------


def pagerank(
    rt: Runtime, rng: np.random.Generator, n: int, steps: int = 10, d: float = 0.85, digits: int = 1
) -> tuple[Array, Array]:
    links = rng.random((n, n)) < 8 / n
    np.fill_diagonal(links, False)
    links[links.sum(axis=1) == 0, 0] = True  # no dangling pages
    m = (links / links.sum(axis=1, keepdims=True)).T  # column-stochastic
    got = want = np.full((n, 1), 1 / n)
    for _ in range(steps):
        got = d * rt.gemm(m, got, digits=digits) + (1 - d) / n
        want = d * (m @ want) + (1 - d) / n
    return got, want


# The apps whose GEMMs take ``digits`` (HotSpot3D's conv2D has one digit only).
DIGIT_APPS = ("blackscholes", "gemm", "pagerank")
APPS: dict[str, tuple[Callable[..., tuple[Array, Array]], int]] = {
    "gemm": (gemm, 128),
    "blackscholes": (blackscholes, 2048),
    "hotspot3d": (hotspot3d, 32),
    "pagerank": (pagerank, 256),
}


def run_app(
    rt: Runtime,
    app: str,
    size: int | None = None,
    seed: int = 0,
    precision: str | None = None,
    digits: int | None = None,
) -> AppResult:
    """Run ``app`` on ``rt``'s devices; errors against float64 and the device cycles it took.
    ``digits`` overrides the app's GEMM operand digits (DIGIT_APPS only; None: the app's own)."""
    fn, default = APPS[app]
    size = size or default
    if digits is not None and app not in DIGIT_APPS:
        raise ValueError(f"digits: only {', '.join(DIGIT_APPS)} take it, not {app}")
    options = {} if digits is None else {"digits": digits}
    before = _counts(rt)
    got, want = fn(_Precision(rt, precision), np.random.default_rng(seed), size, **options)
    after = _counts(rt)
    # Devices started during the run count from zero.
    spent = [
        tuple(a - b for a, b in zip(x, y, strict=True)) for x, y in zip(after, _pad(before, len(after)), strict=True)
    ]
    cycles, written, read = ([s[i] for s in spent] for i in range(3))
    mape, rmse = errors(np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel())
    used = digits if digits is not None else _default_digits(fn)
    return AppResult(
        app, str(size), used, round(mape, 4), round(rmse, 4), sum(cycles), max(cycles, default=0), cycles, written, read
    )


def _default_digits(fn: Callable[..., object]) -> int | None:
    parameter = inspect.signature(fn).parameters.get("digits")
    return None if parameter is None else int(parameter.default)


def _counts(rt: Runtime) -> list[tuple[int, int, int]]:
    """Each device's cycles, bytes written and bytes read so far."""
    cycles, moved = rt.device_cycles(), rt.device_bytes()
    return [(c, *b) for p in cycles for c, b in zip(cycles[p], moved[p], strict=True)]


def _pad(counts: list[tuple[int, int, int]], n: int) -> list[tuple[int, int, int]]:
    return counts + [(0, 0, 0)] * (n - len(counts))


class _Precision:
    """``rt`` with every operator called at one precision."""

    def __init__(self, rt: Runtime, precision: str | None) -> None:
        self._rt, self._precision = rt, precision

    def __getattr__(self, name: str) -> Callable[..., object]:
        method = getattr(self._rt, name)
        return lambda *args, **kwargs: method(*args, precision=self._precision, **kwargs)
