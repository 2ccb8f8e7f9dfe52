"""GEMM and CONV2D loop commands as self-contained cases: operands laid out in memory, the command
words, where the result lands and the exact result the NumPy model gives.

Both the cocotb testbench (tb/tile_tb.py) and the C++ tile simulator (tilesim/, ``pyard bench
gemm|conv``) run these cases, so they check the same thing the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rtl.config import AccelConfig
from rtl.conv_model import im2col, out_size
from rtl.gemm_loop_model import conv_k_tiles, loop_result, resident_b_fits
from tb import operands, stimulus
from tb.operands import element_types

__all__ = [
    "LoopCase",
    "check_exact",
    "conv_case",
    "conv_words",
    "gemm_case",
    "gemm_words",
    "padded",
    "resident_b_row",
    "unit_scale",
]


def unit_scale(cfg: AccelConfig) -> int:
    """The identity read-out scale: a shift of 0 for int32 accumulators, 1.0 (fp32) for floats."""
    return 0 if cfg.acc_dtype == "int32" else 0x3F800000


@dataclass
class LoopCase:
    label: str
    words: list[int]  # the command
    writes: list[tuple[int, bytes]] = field(default_factory=list)  # (address, bytes) to load first
    out_addr: int = 0
    out_shape: tuple[int, int] = (0, 0)
    out_dtype: type = np.uint32
    out_stride: int = 0  # elements between output rows
    want: np.ndarray | None = None
    macs: int = 0
    mem_bytes: int = 0  # bytes of memory the operands need (from address 0)
    stream: list[list[int]] = field(default_factory=list)  # the commands pushed, if not only ``words``

    @property
    def commands(self) -> list[list[int]]:
        return self.stream or [self.words]

    @property
    def out_bytes(self) -> int:
        rows, cols = self.out_shape
        return ((rows - 1) * self.out_stride + cols) * np.dtype(self.out_dtype).itemsize

    @property
    def touched_bytes(self) -> int:
        """Bytes of main memory from address 0 a run reads or writes: the operands and the output."""
        return max(self.mem_bytes, self.out_addr + self.out_bytes)

    def result(self, raw: bytes) -> np.ndarray:
        """The output array from the ``out_bytes`` bytes read at ``out_addr``."""
        rows, cols = self.out_shape
        size = np.dtype(self.out_dtype).itemsize
        flat = np.frombuffer(raw + bytes(size * (rows * self.out_stride) - len(raw)), dtype=self.out_dtype)
        return flat.reshape(rows, self.out_stride)[:, :cols]

    def image(self) -> bytes:
        """Main memory from address 0 with the operands in place."""
        mem = bytearray(self.mem_bytes)
        for addr, raw in self.writes:
            mem[addr : addr + len(raw)] = raw
        return bytes(mem)


def padded(array: np.ndarray, stride: int) -> np.ndarray:
    out = np.zeros((array.shape[0], stride), array.dtype)
    out[:, : array.shape[1]] = array
    return out


def gemm_words(case: dict, addr: dict, ld: dict) -> list[int]:
    flags = case["trans_a"] << 12 | case["trans_b"] << 13 | case["bias"] << 14 | case["acc_c"] << 16
    flags |= case["act"] << 17 | case["out"] << 19 | case.get("sp_b", 0) << 21
    return [
        0x10 | flags, case["m"], case["k"], case["n"],
        addr["A"], ld["A"], addr["B"], ld["B"], addr["C"], ld["C"], addr["D"], ld["D"], case["scale"],
    ]  # fmt: skip


def _b_dims(case: dict) -> tuple[int, int]:
    """K and N of a loop command's B: a GEMM's, or a CONV2D's weights as (kh·kw·C_in) × C_out."""
    if "k" in case:
        return case["k"], case["n"]
    return case["kh"] * case["kw"] * case["cin"], case["cout"]


def resident_b_row(cfg: AccelConfig, case: dict) -> int:
    """First scratchpad row of a resident B (flag [21]) as ``case["sp_b_at"]`` places it: "top"
    ends it at the A region's last row, "low" starts it at the lowest row allowed, "past" one
    row above "top" (refused)."""
    layout = cfg.sp_layout
    k, n = _b_dims(case)
    span = (-(-n // cfg.cols) - 1) * case["sp_b_stride"] + k
    top = layout.a_base + layout.a_rows - span
    return {"top": top, "low": layout.a_base + layout.slots, "past": top + 1}[case["sp_b_at"]]


def _resident_loads(cfg: AccelConfig, case: dict, addr: int, ld_bytes: int, row: int) -> list[list[int]]:
    """LOADs of B (K × N in memory) into its resident layout: N tile j's K rows from row + j·stride."""
    esize = cfg.in_bits // 8
    k, n = _b_dims(case)
    out = []
    for j, n0 in enumerate(range(0, n, cfg.cols)):
        elems = min(cfg.cols, n - n0)
        out.append([0x01, addr + n0 * esize, ld_bytes, k | elems << 16, row + j * case["sp_b_stride"]])
    return out


def gemm_case(cfg: AccelConfig, case: dict, seed: int) -> LoopCase:
    """One GEMM command (docs/isa.md) on random operands; rows padded unless ``dense``. With
    ``sp_b`` (and ``sp_b_at``, ``sp_b_stride``), B is first LOADed into the scratchpad and the
    GEMM reads it there (flag [21])."""
    case = {"trans_a": 0, "trans_b": 0, "bias": 0, "acc_c": 0, "act": 0, "out": 1, "scale": unit_scale(cfg)} | case
    m, k, n = case["m"], case["k"], case["n"]
    rng = np.random.default_rng(seed)
    a = stimulus.inputs(cfg, rng, (m, k), special=0.0)
    b = stimulus.inputs(cfg, rng, (k, n), special=0.0)
    in_t, acc_t, out_t = element_types(cfg, case["out"])
    ld = operands.gemm_strides(case)
    sizes = operands.gemm_sizes(cfg, case)
    addr, used = operands.place(sizes)
    writes = [
        (addr["A"], padded(a.T if case["trans_a"] else a, ld["A"]).astype(in_t).tobytes()),
        (addr["B"], padded(b.T if case["trans_b"] else b, ld["B"]).astype(in_t).tobytes()),
    ]
    init = None
    if case["acc_c"]:
        init = stimulus.accumulators(cfg, rng, (m, n))
        writes.append((addr["C"], padded(init, ld["C"]).astype(acc_t).tobytes()))
    elif case["bias"]:
        init = stimulus.accumulators(cfg, rng, (m if case["bias"] == 1 else 1, n))
        writes.append((addr["D"], padded(init, ld["D"]).astype(acc_t).tobytes()))
    byte = {"A": in_t, "B": in_t, "C": out_t, "D": acc_t}
    ld_bytes = {key: ld[key] * np.dtype(byte[key]).itemsize for key in ld}
    if case["bias"] == 2:
        ld_bytes["D"] = 0
    want = loop_result(cfg, a, b, init, case["scale"], case["act"], case["out"]).astype(out_t)
    stream = []
    if case.get("sp_b"):
        row = resident_b_row(cfg, case)
        assert resident_b_fits(cfg, row, k, n, case["sp_b_stride"]), f"resident B at row {row} is refused"
        stream = [*_resident_loads(cfg, case, addr["B"], ld_bytes["B"], row)]
        addr = addr | {"B": row}
        ld_bytes = ld_bytes | {"B": case["sp_b_stride"]}
    words = gemm_words(case, addr, ld_bytes)
    return LoopCase(
        f"GEMM {case}", words, writes, addr["C"], (m, n), out_t, ld["C"], want, m * k * n, used,
        [*stream, words] if stream else [],
    )  # fmt: skip


def conv_words(case: dict, addr: dict) -> list[int]:
    """The CONV2D command; with ``sp_b`` the weights are resident from row ``addr["w"]``, their N
    tiles ``sp_b_stride`` rows apart (flag [21], word 10)."""
    flags = case["bias"] << 14 | case["act"] << 17 | case["out"] << 19 | case.get("sp_b", 0) << 21
    return [
        0x11 | flags,
        case["batch"] | case["cin"] << 16,
        case["h"] | case["w"] << 16,
        case["cout"] | case["kh"] << 16 | case["kw"] << 24,
        case["stride"] | case["pad"] << 8,
        addr["in"], addr["w"], addr["out"], addr["bias"], case["scale"],
        *([case["sp_b_stride"]] if case.get("sp_b") else []),
    ]  # fmt: skip


def conv_case(cfg: AccelConfig, case: dict, seed: int) -> LoopCase:
    """One CONV2D command (NHWC input, HWIO weights) against im2col and the loop's model. With
    ``sp_b`` (and ``sp_b_at``, ``sp_b_stride``) the weights are first LOADed into the scratchpad
    as the resident (kh·kw·C_in) × C_out B and the CONV2D reads them there (flag [21])."""
    case = {"stride": 1, "pad": 0, "bias": 0, "act": 0, "out": 1, "scale": unit_scale(cfg)} | case
    batch, h, w, cin, cout = (case[key] for key in ("batch", "h", "w", "cin", "cout"))
    kh, kw, stride, pad = case["kh"], case["kw"], case["stride"], case["pad"]
    rng = np.random.default_rng(seed)
    x = stimulus.inputs(cfg, rng, (batch, h, w, cin), special=0.0)
    weights = stimulus.inputs(cfg, rng, (kh, kw, cin, cout), special=0.0)
    _, acc_t, out_t = element_types(cfg, case["out"])
    oh, ow = out_size(h, kh, stride, pad), out_size(w, kw, stride, pad)
    addr, used = operands.place(operands.conv_sizes(cfg, case))
    writes = [(addr["in"], x.tobytes()), (addr["w"], weights.tobytes())]
    bias = stimulus.accumulators(cfg, rng, (1, cout)) if case["bias"] else None
    if bias is not None:
        writes.append((addr["bias"], bias.astype(acc_t).tobytes()))
    a = im2col(x, kh, kw, stride, pad)
    k_tiles = conv_k_tiles(cfg, kh, kw, cin)
    want = loop_result(cfg, a, weights.reshape(-1, cout), bias, case["scale"], case["act"], case["out"], k_tiles)
    stream = []
    if case.get("sp_b"):
        row = resident_b_row(cfg, case)
        assert resident_b_fits(cfg, row, *_b_dims(case), case["sp_b_stride"]), f"resident B at row {row} is refused"
        stream = _resident_loads(cfg, case, addr["w"], cout * weights.itemsize, row)
        addr = addr | {"w": row}
    words = conv_words(case, addr)
    return LoopCase(
        f"CONV2D {case}", words, writes, addr["out"], (batch * oh * ow, cout), out_t, cout,
        want.astype(out_t), a.shape[0] * a.shape[1] * cout, used, [*stream, words] if stream else [],
    )  # fmt: skip


def check_exact(label: str, got: np.ndarray, want: np.ndarray, context: str) -> None:
    """Every element of ``got`` equals ``want``; else which rows and columns differ, and the first."""
    bad = np.argwhere(got != want)
    if bad.size:
        first = tuple(bad[0])
        rows, cols = sorted({int(r) for r in bad[:, 0]}), sorted({int(c) for c in bad[:, 1]})
        raise AssertionError(
            f"{label}: {len(bad)} of {got.size} wrong in rows {rows[:20]}, columns {cols}, "
            f"first {got[first]:#x} != {want[first]:#x}; {context}"
        )
