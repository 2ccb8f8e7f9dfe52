"""``pyard bench gemm/conv`` and the tile testbench lay operands out from their sizes
(tb/operands.py): no two operands overlap whatever the shapes, the memory holds them all, and a
command whose operands no testbench memory can hold is refused with one line."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.config import AccelConfig
from rtl.conv_model import out_size
from sim.cli import main
from tb import operands

CONFIGS = [AccelConfig.from_name(n) for n in ("4x4-int8", "4x4-bf16")] + [
    AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16")
]


def footprints_gemm(cfg: AccelConfig, case: dict) -> dict[str, int]:
    """Bytes from each operand's address to its last element, from the command's own strides."""
    in_b, acc_b = cfg.in_bits // 8, cfg.acc_bits // 8
    out_b = acc_b if case["out"] == 1 else in_b
    ld = operands.gemm_strides(case)
    m, k, n = case["m"], case["k"], case["n"]
    shape = {"A": (k, m) if case["trans_a"] else (m, k), "B": (n, k) if case["trans_b"] else (k, n)}
    shape |= {"C": (m, n), "D": (m, n)}
    size = {"A": in_b, "B": in_b, "C": max(out_b, acc_b), "D": acc_b}
    return {key: ((rows - 1) * ld[key] + cols) * size[key] for key, (rows, cols) in shape.items()}


def assert_disjoint_and_held(sizes: dict[str, int], footprint: dict[str, int]) -> None:
    addr, _ = operands.place(sizes)
    memory = np.zeros(operands.mem_mib(sizes) << 20, np.uint8)
    for i, key in enumerate(footprint):  # each operand filled with its own byte, in order
        memory[addr[key] : addr[key] + footprint[key]] = i + 1
        assert addr[key] + footprint[key] <= len(memory)
    for i, key in enumerate(footprint):
        assert (memory[addr[key] : addr[key] + footprint[key]] == i + 1).all(), key


dims = st.integers(1, 4000)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CONFIGS), dims, dims, dims, st.booleans(), st.booleans(), st.booleans(), st.sampled_from([0, 1]))
def test_gemm_operands_never_overlap(cfg, m, k, n, trans_a, trans_b, dense, out) -> None:
    case = {"m": m, "k": k, "n": n, "trans_a": trans_a, "trans_b": trans_b, "dense": dense, "out": out}
    assert_disjoint_and_held(operands.gemm_sizes(cfg, case), footprints_gemm(cfg, case))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(CONFIGS),
    st.integers(1, 3),
    st.integers(1, 60),
    st.integers(1, 60),
    st.integers(1, 300),
    st.integers(1, 300),
    st.integers(1, 7),
    st.integers(1, 3),
    st.integers(0, 3),
)
def test_conv_operands_never_overlap(cfg, batch, h, w, cin, cout, kernel, stride, pad) -> None:
    case = {"batch": batch, "h": h, "w": w, "cin": cin, "cout": cout, "kh": kernel, "kw": kernel}
    case |= {"stride": stride, "pad": pad}
    oh, ow = out_size(h, kernel, stride, pad), out_size(w, kernel, stride, pad)
    if oh < 1 or ow < 1:
        return
    in_b, acc_b = cfg.in_bits // 8, cfg.acc_bits // 8
    footprint = {
        "in": batch * h * w * cin * in_b,
        "w": kernel * kernel * cin * cout * in_b,
        "out": batch * oh * ow * cout * acc_b,
        "bias": cout * acc_b,
    }
    assert_disjoint_and_held(operands.conv_sizes(cfg, case), footprint)


def test_int8_512_cube_needs_more_than_a_mebibyte() -> None:
    """The case the fixed 1 MiB layout got wrong: int8 512^3 takes 1.25 MiB of A, B and C."""
    sizes = operands.gemm_sizes(AccelConfig.from_name("4x4-int8"), {"m": 512, "k": 512, "n": 512, "dense": 1})
    assert sum(sizes.values()) > 1 << 20
    assert operands.mem_mib(sizes) == 4  # 1.25 MiB of A, B, C plus a D of the same 1 MiB rounds up to 4


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "gemm", "--config", "4x4-int8", "--m", "65535", "--k", "65535", "--n", "65535"],
        ["bench", "conv", "--config", "4x4-bf16", "--h", "8192", "--w", "8192", "--cin", "64", "--cout", "8"],
    ],
)
def test_bench_refuses_operands_no_memory_holds(argv, capsys) -> None:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "MiB" in err and "Traceback" not in err, err


def test_bench_vector_refuses_a_tile_without_the_engine(capsys) -> None:
    try:
        code = main(["bench", "vector", "--config", "4x4-bf16", "--vector", "off", "--op", "add"])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    want = "vector = False is invalid: allowed true (bench vector needs the engine; 4x4-bf16-novector)"
    assert err == f"pyard: error: {want}"
