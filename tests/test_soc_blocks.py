"""SoC blocks on their own: config validation, the generated header and linker script, the banked
data RAM under random multi-master traffic (Amaranth simulator), and Verilator lint of the SoC top."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.sim import Simulator

from rtl.config import ConfigError
from soc.config import SocConfig
from soc.dram import BankedRam
from soc.memmap import c_header, linker_script, mmio_addr
from soc.rv32.bus import AmoOp


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cores": 0}, "cores"),
        ({"cores": 17}, "cores"),
        ({"itcm_kib": 48}, "itcm_kib"),
        ({"dram_banks": 3}, "dram_banks"),
        ({"mem_mib": 0}, "mem_mib"),
        ({"mem_latency": 2}, "mem_latency"),
        ({"cores": 16, "stack_kib": 4}, "stack_kib"),
    ],
)
def test_invalid_soc_field_is_named(fields: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        SocConfig(**fields)
    assert err.value.field == field and "allowed" in str(err.value)


def test_config_defaults_and_round_trip() -> None:
    cfg = SocConfig.from_name("8x8-bf16", cores=5)
    assert (cfg.name, cfg.dram_banks, cfg.mem_bits) == ("8x8-bf16-5c", 8, 64)
    assert SocConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.replace(cores=2).dram_banks == 2  # the default bank count follows the cores


def test_header_and_linker_script_follow_the_config() -> None:
    cfg = SocConfig.from_name("4x4-bf16", cores=3, dram_kib=128, stack_kib=4)
    macros = dict(re.findall(r"#define (PYARD_\w+) (\S+)", c_header(cfg)))
    assert macros["PYARD_NHARTS"] == "3" and macros["PYARD_DRAM_SIZE"] == "0x00020000u"
    assert int(macros["PYARD_EXIT_ADDR"].rstrip("u"), 16) == mmio_addr("EXIT") == 0x2000_0004
    assert int(macros["PYARD_MTIMECMP_ADDR"].rstrip("u"), 16) == mmio_addr("MTIMECMP", 0)
    assert macros["PYARD_ROWS"] == "4" and macros["PYARD_DTYPE_BF16"] == "1"
    ld = linker_script(cfg)
    assert "DRAM (rw) : ORIGIN = 0x10000000, LENGTH = 131072" in ld
    assert "__nharts = 3;" in ld and "__stack_size = 4096;" in ld and "__mem_free_start" in ld


def _amo(op: AmoOp, old: int, src: int) -> int:
    s = lambda x: x - (1 << 32) if x >> 31 else x  # noqa: E731
    return {
        AmoOp.SWAP: src,
        AmoOp.ADD: (old + src) & 0xFFFF_FFFF,
        AmoOp.XOR: old ^ src,
        AmoOp.AND: old & src,
        AmoOp.OR: old | src,
        AmoOp.MIN: old if s(old) < s(src) else src,
        AmoOp.MAX: old if s(old) > s(src) else src,
        AmoOp.MINU: min(old, src),
        AmoOp.MAXU: max(old, src),
    }[op]


def test_banked_ram_random_traffic_matches_a_model() -> None:
    """Three masters, two banks, eight words: heavy bank conflicts. Requests are accepted in some
    order; applying the accepted requests in that order to a Python model must give every response
    and the final memory, each response must come exactly one cycle after acceptance (two for a
    read-modify-write's bank), and nobody waits forever."""
    masters, words = 3, 8
    dut = BankedRam(size=words * 4 * 32, banks=2, masters=masters)  # only the first 8 words are used
    rng = random.Random(7)
    ops = [AmoOp.NONE] * 6 + [AmoOp.LR, AmoOp.SC, AmoOp.SC, AmoOp.ADD, AmoOp.SWAP, AmoOp.MIN, AmoOp.MAXU, AmoOp.XOR]
    model = [0] * words
    resv: list[int | None] = [None] * masters
    log: list[str] = []

    def apply(i: int, addr: int, write: int, wdata: int, mask: int, amo: AmoOp) -> int | None:
        w = addr // 4
        if amo == AmoOp.NONE:
            if write:
                bits = sum(0xFF << 8 * b for b in range(4) if mask >> b & 1)
                model[w] = (model[w] & ~bits) | (wdata & bits)
                resv[:] = [None if r == w else r for r in resv]
                return None  # a store's response data means nothing
            return model[w]
        if amo == AmoOp.LR:
            resv[i] = w
            return model[w]
        if amo == AmoOp.SC:
            ok = resv[i] == w
            resv[i] = None
            if ok:
                model[w] = wdata
                resv[:] = [None if r == w else r for r in resv]
            return 0 if ok else 1
        old = model[w]
        model[w] = _amo(amo, old, wdata)
        resv[:] = [None if r == w else r for r in resv]
        return old

    async def testbench(ctx) -> None:
        pending: list[tuple | None] = [None] * masters  # request on the bus
        expect: list[tuple[int, int | None] | None] = [None] * masters  # (due cycle, rdata)
        served = [0] * masters
        for cycle in range(3000):
            for i, port in enumerate(dut.ports):
                if pending[i] is None and expect[i] is None and rng.random() < 0.8:
                    amo = rng.choice(ops)
                    write = 1 if amo in (AmoOp.SC,) or (amo == AmoOp.NONE and rng.random() < 0.5) else 0
                    pending[i] = (4 * rng.randrange(words), write, rng.getrandbits(32), rng.choice([15, 1, 6, 8]), amo)
                    if amo != AmoOp.NONE:
                        pending[i] = (*pending[i][:3], 15, amo)
                req = pending[i]
                ctx.set(port.req_valid, req is not None)
                if req is not None:
                    for name, value in zip(("addr", "write", "wdata", "mask", "amo"), req, strict=True):
                        ctx.set(getattr(port, name), value)
            accepted = [ctx.get(p.req_valid) and ctx.get(p.req_ready) for p in dut.ports]
            for i in range(masters):
                if accepted[i]:
                    expect[i] = (cycle + 1, apply(i, *pending[i][:4], pending[i][4]))
                    log.append(f"{cycle}: m{i} {pending[i]}")
                    pending[i] = None
                    served[i] += 1
            await ctx.tick()
            for i, port in enumerate(dut.ports):
                if ctx.get(port.rsp_valid):
                    assert expect[i] is not None and expect[i][0] == cycle + 1, f"m{i} unexpected response"
                    if expect[i][1] is not None:
                        assert ctx.get(port.rdata) == expect[i][1], f"m{i} at {cycle + 1}: " + "\n".join(log[-6:])
                    expect[i] = None
                assert expect[i] is None or expect[i][0] > cycle + 1, f"m{i}: no response"
        assert min(served) > 300  # round-robin: every master keeps being served
        for w in range(words):
            bank, row = w % 2, w // 2
            assert ctx.get(dut._mems[bank].data[row]) == model[w]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def test_soc_verilog_is_lint_clean(tmp_path) -> None:
    from sim.generate import write_soc_outputs
    from sim.verilator import lint

    cfg = SocConfig.from_name("4x4-int8", cores=2)
    for top in ("soc", "soc_sim"):
        paths = write_soc_outputs(top, cfg, tmp_path / top)
        assert lint(paths["verilog"], top, extra=paths.get("sim_ram")) == []
