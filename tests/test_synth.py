"""``pyard synth``: Yosys resources per block and nextpnr's fmax, and Verilog memories that Yosys
reads quickly (no zero initialisation, other contents kept)."""

import json
import re

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl import shared
from sim.cli import main
from synth.resources import block_resources


def test_block_resources_add_submodules_by_instance_count() -> None:
    modules = {
        "top": {"LUT4": 3, "top.a": 1, "top.b": 2, "TRELLIS_FF": 1},
        "top.a": {"LUT4": 10, "CCU2C": 2, "leaf": 3},
        "top.b": {"DP16KD": 1, "MULT18X18D": 1},
        "leaf": {"LUT4": 1, "TRELLIS_FF": 4},
    }
    blocks = block_resources("ecp5", modules, "top")
    assert blocks["a"] == {"lut": 10 + 2 * 2 + 3, "lutram": 0, "ff": 12, "bram18": 0, "dsp": 0}
    assert blocks["b x2"] == {"lut": 0, "lutram": 0, "ff": 0, "bram18": 2, "dsp": 2}
    assert blocks["total"] == {"lut": 3 + 17, "lutram": 0, "ff": 13, "bram18": 2, "dsp": 2}


class _Rom(wiring.Component):
    def __init__(self, init: list[int], width: int = 8) -> None:
        super().__init__({"addr": In(2), "data": Out(width)})
        self.init, self.width = init, width

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=4, init=self.init)
        port = mem.read_port()
        m.d.comb += [port.addr.eq(self.addr), self.data.eq(port.data)]
        return m


def test_zero_memories_carry_no_initial_block_others_keep_theirs() -> None:
    zero = shared.convert(_Rom([0, 0, 0, 0]), "rom")
    assert "initial" not in zero and "reg [7:0]" in zero
    text = shared.convert(_Rom([1, 0, 3, 0]), "rom")
    assert "initial begin" in text and "8'h03" in text and "8'h01" in text


def test_zero_memories_of_32_bit_rows_carry_no_initial_block() -> None:
    """Yosys prints 32-bit rows in decimal (32'd0): the scratchpad of a 4-column int8 tile."""
    zero = shared.convert(_Rom([0, 0, 0, 0], 32), "rom")
    assert "initial" not in zero and "reg [31:0]" in zero
    text = shared.convert(_Rom([0, 10, 0, 0], 32), "rom")
    assert "initial begin" in text and "32'd10" in text


def test_tile_with_256_kib_scratchpad_has_no_zero_initial_rows() -> None:
    """The whole tile's Verilog: no memory row is initialised, so Yosys reads it in seconds."""
    from rtl.config import AccelConfig
    from sim.generate import top_component

    cfg = AccelConfig.from_name("4x4-int8").replace(sp_kib=256)
    text = shared.convert(top_component("tile", cfg), "tile")
    # Each of the four 64 KiB scratchpad banks is four 16 KiB column memories, all declared.
    assert all(f"reg [7:0] bank{b}_col{k} [16383:0];" in text for b in range(4) for k in range(4))
    blocks = re.findall(r"^ *initial begin\n(.*?)^ *end\n", text, re.M | re.S)
    zero_rows = re.compile(r"^ *\S+ ?\[\d+\] = \d+'[hdb]0+;$")
    assert not [b for b in blocks if all(zero_rows.match(line) for line in b.splitlines())]


def _synth(capsys, *argv: str) -> dict:
    assert main(["synth", "--json", "-q", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_synth_int8_mesh_one_multiplier_block_per_pe(capsys) -> None:
    """An int8 PE's 8x8 product maps to one hard multiplier on ECP5 and on Xilinx parts."""
    for family in ("ecp5", "xc7"):
        result = _synth(capsys, "--top", "mesh", "--rows", "2", "--cols", "3", "--dtype", "int8", "--family", family)
        total = result["blocks"]["total"]
        assert total["dsp"] == 6, result
        assert total["lut"] > 0 and total["ff"] > 0


def test_synth_flat_is_one_flat_run(capsys) -> None:
    """``--flat`` flattens everything (the shared PE modules too) into one run: the total alone,
    the same hard multipliers; with ``--depth`` too, or a depth outside 1 to 4, it is refused in
    one line."""
    argv = ["--top", "mesh", "--rows", "2", "--cols", "3", "--dtype", "int8", "--family", "xc7"]
    flat = _synth(capsys, *argv, "--flat")["blocks"]
    kept = _synth(capsys, *argv)["blocks"]
    assert set(flat) == {"total"} and len(kept) > 1, (flat, kept)
    assert flat["total"]["dsp"] == kept["total"]["dsp"] == 6
    assert flat["total"]["lut"] > 0 and 0 < flat["total"]["ff"] <= kept["total"]["ff"]
    for bad, message in ((["--depth", "5"], "--depth: 5 is invalid"), (["--flat", "--depth", "2"], "not allowed with")):
        assert main(["synth", *argv, *bad]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_synth_tile_blocks(capsys) -> None:
    """The tile's blocks add up to at most its total (the rest is the top's own glue); a second call
    is served from the cache with the same figures."""
    argv = ["--top", "tile", "--rows", "1", "--cols", "1", "--dtype", "int8", "--sp-kib", "1", "--acc-kib", "1"]
    blocks = _synth(capsys, *argv, "--family", "ecp5")["blocks"]
    assert {"gemm", "exec_unit", "sp", "accumulator", "decoder"} <= set(blocks)
    for kind in ("lut", "ff", "bram18", "dsp"):
        assert sum(b[kind] for name, b in blocks.items() if name != "total") <= blocks["total"][kind]
    assert blocks["sp"]["bram18"] >= 1 and blocks["exec_unit"]["dsp"] == 1
    again = _synth(capsys, *argv, "--family", "ecp5")
    assert again["cached"] and again["blocks"] == blocks


def test_pnr_reports_fmax_and_is_cached(capsys) -> None:
    """Place and route of a small registered design gives one clock's fmax; a second call is served
    from the cache with the same figure. (The tile's own fmax is a sweep figure: docs/sweep.md.)"""
    argv = ["--top", "mesh", "--rows", "2", "--cols", "2", "--dtype", "int8", "--family", "ecp5", "--pnr"]
    result = _synth(capsys, *argv)
    assert list(result["fmax_by_clock"]) and 1 < result["fmax_mhz"] < 1000
    assert result["blocks"]["total"]["dsp"] == 4
    # The critical path sets the clock: its delay is the period, logic plus routing.
    ((clock, path),) = result["critical_paths"].items()
    assert clock in result["fmax_by_clock"]
    assert path["ns"] == pytest.approx(1000 / result["fmax_mhz"], abs=0.01)
    assert path["ns"] == pytest.approx(path["logic_ns"] + path["routing_ns"], abs=0.011)
    assert path["from"] and path["to"] and "TRELLIS" not in path["from"] + path["to"]
    again = _synth(capsys, *argv)
    assert again["cached"] and again["fmax_mhz"] == result["fmax_mhz"]


def test_synth_refuses_pnr_without_ecp5(capsys) -> None:
    assert main(["synth", "--pnr", "--family", "xcup"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_pnr_seeds_place_the_netlist_once_per_seed(capsys) -> None:
    """``--seeds`` places one netlist with consecutive seeds: each seed's fmax is what a run with
    that ``--seed`` alone reports (nextpnr is deterministic), the result's own fmax and critical
    path are the first seed's, and the median and minimum are of the seeds' figures."""
    argv = ["--top", "mesh", "--rows", "2", "--cols", "2", "--dtype", "int8", "--family", "ecp5", "--pnr"]
    result = _synth(capsys, *argv, "--seed", "3", "--seeds", "3")
    by_seed = result["fmax_by_seed"]
    assert list(by_seed) == ["3", "4", "5"]
    for seed, mhz in by_seed.items():
        alone = _synth(capsys, *argv, "--seed", seed)
        assert alone["fmax_mhz"] == mhz and "fmax_by_seed" not in alone
        if seed == "3":
            assert alone["critical_paths"] == result["critical_paths"]
    assert result["fmax_mhz"] == by_seed["3"]
    assert result["fmax_median_mhz"] == sorted(by_seed.values())[1]
    assert result["fmax_min_mhz"] == min(by_seed.values())


@pytest.mark.parametrize(
    "argv",
    [
        ["--seeds", "2", "--family", "ecp5"],  # without --pnr
        ["--pnr", "--family", "ecp5", "--seeds", "0"],
        ["--pnr", "--family", "ecp5", "--seeds", "17"],
        ["--pnr", "--family", "ecp5", "--seed", str(2**31 - 1), "--seeds", "2"],  # past the last seed
    ],
)
def test_synth_refuses_bad_seeds(capsys, argv: list[str]) -> None:
    assert main(["synth", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seeds" in err


def test_blocks_and_shared_modules_are_found_in_the_verilog() -> None:
    """The blockwise flow's view of a design: each block's subtree (its own blocks and the shared
    modules it instantiates, each once) and the shared modules kept whole."""
    from rtl.config import AccelConfig
    from sim.generate import top_component
    from synth.flow import kept_blocks, shared_modules, split_modules, subtree

    text = shared.convert(top_component("tile", AccelConfig.from_name("2x3-int8")), "tile")
    texts = split_modules(text)
    assert "".join(texts.values()).rstrip() == text.rstrip()  # nothing lost, nothing repeated
    # An int8 mesh has two kinds of PE and of row (the top row's, and the retimed ones below it).
    shared_names = shared_modules(text, "tile")
    pes = [n for n in shared_names if n.startswith("tile_pe_")]
    rows = [n for n in shared_names if n.startswith("tile_row_")]
    assert len(pes) == len(rows) == 2
    for pe in pes:  # a shared module's own blocks stay inside it
        assert "." not in pe and f"{pe}.mul" in texts
    below = subtree(texts, "tile.exec_unit")
    assert below[0] == "tile.exec_unit"
    assert {"tile.exec_unit.mesh", *pes, *(f"{pe}.mul" for pe in pes), *rows} <= set(below)
    assert len(below) == len(set(below)) and not {"tile.sp", "tile.vector"} & set(below)
    everything = subtree(texts, "tile")
    assert set(everything) == set(texts)  # every module of the file is reached from the top
    assert set(kept_blocks(text, "tile", 1)) <= set(everything)


class _Counter(wiring.Component):
    """A block whose generated names Amaranth numbers across the whole design."""

    def __init__(self, width: int) -> None:
        super().__init__({"en": In(1), "step": In(width), "count": Out(width), "odd": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + self.step + 1)
        m.d.comb += self.odd.eq(self.count[0] ^ self.step[1])
        return m


class _Parent(wiring.Component):
    def __init__(self, width: int, before: int) -> None:
        super().__init__({"a": In(8), "y": Out(8), "z": Out(width)})
        self.width, self.before = width, before

    def elaborate(self, platform) -> Module:
        m = Module()
        y = self.a
        for k in range(self.before):  # blocks converted before this one shift its generated names
            m.submodules[f"a{k}"] = other = _Counter(8)
            m.d.comb += [other.en.eq(y[0]), other.step.eq(y)]
            y = other.count
        m.d.comb += self.y.eq(y)
        m.submodules.block = block = _Counter(self.width)
        m.d.comb += [block.en.eq(self.a[0]), block.step.eq(self.a), self.z.eq(block.count)]
        return m


def test_a_block_is_cached_by_its_text_up_to_generated_names() -> None:
    """The same block in two designs has the same cache text although Amaranth numbered its names
    differently; a block with other logic does not."""
    from synth.flow import _canonical, split_modules

    def block(width: int, before: int) -> str:
        return split_modules(shared.convert(_Parent(width, before), "top"))["top.block"]

    one, other, wider = block(8, 0), block(8, 5), block(9, 0)
    assert one != other and _canonical(one) == _canonical(other)
    assert _canonical(wider) != _canonical(one)


def test_block_cache_text_ignores_only_what_verilog_leaves_unordered() -> None:
    """Declarations, a header's ports and an instance's named connections may come in any order,
    and generated names with any numbers; a connection to another net is another block."""
    from synth.flow import _canonical

    def module(ports: str, decls: list[str], conns: list[str], net: str) -> str:
        body = "".join(f"  {d};\n" for d in decls) + "  sub u (\n" + ",\n".join(f"    {c}" for c in conns)
        return f"module \\top.b ({ports});\n{body}\n  );\n  assign y = {net} ;\nendmodule\n"

    one = module("a, y, \\port$12$0 ", ["input a", "output y", "wire \\$7 "], [".x(a)", ".q(\\$7 )"], "\\$7")
    same = module("\\port$40$0 , y, a", ["wire \\$9 ", "output y", "input a"], [".q(\\$9 )", ".x(a)"], "\\$9")
    other = module("a, y, \\port$12$0 ", ["input a", "output y", "wire \\$7 "], [".x(\\$7 )", ".q(a)"], "\\$7")
    assert _canonical(one) == _canonical(same)
    assert _canonical(other) != _canonical(one)


def _synthesize_mesh(root: str) -> dict:
    from pathlib import Path

    from rtl.config import AccelConfig
    from sim.generate import top_component
    from synth.flow import Options, synthesize

    cfg = AccelConfig(rows=2, cols=2, dtype="int8")
    return synthesize(shared.convert(top_component("mesh", cfg), "mesh"), "mesh", cfg.name, Options("ecp5"), Path(root))


def test_concurrent_synthesis_of_one_design_runs_it_once(tmp_path) -> None:
    """Two processes asking for the same design at once (a sweep's workers: the same tile in SoCs
    of different core counts) take turns: one synthesizes, the other gets the cached result. They
    used to share one scratch folder, each deleting the other's run."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(_synthesize_mesh, [str(tmp_path)] * 2))
    assert sorted(r["cached"] for r in results) == [False, True]
    assert results[0]["blocks"] == results[1]["blocks"] and results[0]["blocks"]["total"]["dsp"] == 4
