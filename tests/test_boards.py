"""FPGA boards (boards/, docs/boards.md): the UART, the block-RAM main memory, the console's
back-pressure, the preloaded image, the board tops, ``pyard build``'s errors and files, and (slow)
the ECP5 flow end to end."""

import json
import random
import time

import pytest
from amaranth.sim import Simulator

from boards.block_ram import AxiBlockRam
from boards.boards import BOARDS
from boards.build import write_plan
from boards.uart import UartTx
from rtl.axi import AXI_RESP_DECERR, AXI_RESP_OKAY
from rtl.config import ConfigError, load_config
from sim.cli import main
from soc.config import SocConfig
from soc.image import MemoryImage
from soc.memmap import DRAM_BASE, ITCM_BASE, MEM_BASE, MMIO_BASE
from soc.mmio import Mmio

SMALL_SOC = SocConfig(accel=load_config("1x1-int8").replace(sp_kib=16, acc_kib=16), itcm_kib=8, dram_kib=8)


def _decode_uart(samples: list[int], divisor: int) -> bytes:
    """Bytes of an 8N1 line sampled once per cycle: each start bit's edge, then mid-bit samples."""
    out, i = bytearray(), 0
    while i < len(samples):
        if samples[i] == 0:
            bits = [samples[i + divisor * k + divisor // 2] for k in range(10)]
            assert bits[0] == 0 and bits[9] == 1, f"framing at cycle {i}: {bits}"
            out.append(sum(b << n for n, b in enumerate(bits[1:9])))
            i += divisor * 10 - divisor // 2  # into the stop bit: the next low sample is a start
        else:
            i += 1
    return bytes(out)


def test_uart_sends_every_byte_8n1() -> None:
    divisor, text = 7, b"Hi\x00\xff\x5a\n"
    dut, samples = UartTx(divisor), []

    async def testbench(ctx) -> None:
        for byte in text:
            ctx.set(dut.data, byte)
            ctx.set(dut.valid, 1)
            while True:  # offered until taken
                ready = ctx.get(dut.ready)
                await ctx.tick()
                samples.append(ctx.get(dut.tx))
                if ready:
                    break
            ctx.set(dut.valid, 0)
        for _ in range(divisor * 12):
            await ctx.tick()
            samples.append(ctx.get(dut.tx))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert _decode_uart(samples, divisor) == text
    # Back to back: the next start bit follows the stop bit at once (10 bit times per byte).
    assert len(samples) <= divisor * 10 * len(text) + divisor * 12 + len(text)


def test_mmio_holds_a_console_write_until_ready() -> None:
    dut = Mmio(1)

    async def testbench(ctx) -> None:
        bus = dut.bus
        ctx.set(dut.console_ready, 0)
        ctx.set(bus.req_valid, 1)
        ctx.set(bus.write, 1)
        ctx.set(bus.addr, MMIO_BASE)
        ctx.set(bus.wdata, ord("x"))
        ctx.set(bus.mask, 0xF)
        for _ in range(5):  # not ready: not accepted, no byte, no response
            assert ctx.get(bus.req_ready) == 0
            await ctx.tick()
            assert ctx.get(dut.console_valid) == 0 and ctx.get(bus.rsp_valid) == 0
        ctx.set(dut.console_ready, 1)
        assert ctx.get(bus.req_ready) == 1
        await ctx.tick()
        ctx.set(bus.req_valid, 0)
        assert ctx.get(dut.console_valid) == 1 and ctx.get(dut.console_data) == ord("x")
        assert ctx.get(bus.rsp_valid) == 1 and ctx.get(bus.err) == 0
        ctx.set(dut.console_ready, 0)  # other registers never wait for the console
        ctx.set(bus.req_valid, 1)
        ctx.set(bus.write, 0)
        ctx.set(bus.addr, MMIO_BASE + 8)  # NHARTS
        assert ctx.get(bus.req_ready) == 1
        await ctx.tick()
        assert ctx.get(bus.rsp_valid) == 1 and ctx.get(bus.rdata) == 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


async def _axi_write(ctx, axi, addr: int, beats: list[int], strb: int, size: int) -> int:
    ctx.set(axi.awaddr, addr)
    ctx.set(axi.awlen, len(beats) - 1)
    ctx.set(axi.awsize, size)
    ctx.set(axi.awid, 3)
    ctx.set(axi.awvalid, 1)
    await ctx.tick().until(axi.awready)
    ctx.set(axi.awvalid, 0)
    for n, beat in enumerate(beats):
        ctx.set(axi.wdata, beat)
        ctx.set(axi.wstrb, strb)
        ctx.set(axi.wlast, n == len(beats) - 1)
        ctx.set(axi.wvalid, 1)
        await ctx.tick().until(axi.wready)
    ctx.set(axi.wvalid, 0)
    ctx.set(axi.bready, 1)
    *_, bid, bresp = await ctx.tick().sample(axi.bid, axi.bresp).until(axi.bvalid)
    ctx.set(axi.bready, 0)
    assert bid == 3
    return bresp


async def _axi_read(ctx, axi, addr: int, beats: int, size: int) -> tuple[list[int], list[int]]:
    ctx.set(axi.araddr, addr)
    ctx.set(axi.arlen, beats - 1)
    ctx.set(axi.arsize, size)
    ctx.set(axi.arid, 5)
    ctx.set(axi.arvalid, 1)
    await ctx.tick().until(axi.arready)
    ctx.set(axi.arvalid, 0)
    data, resp = [], []
    while len(data) < beats:
        ctx.set(axi.rready, random.random() < 0.7)  # back-pressure now and then
        *_, valid, ready, rdata, rresp, rlast, rid = await ctx.tick().sample(
            axi.rvalid, axi.rready, axi.rdata, axi.rresp, axi.rlast, axi.rid
        )
        if valid and ready:
            assert rid == 5 and rlast == (len(data) == beats - 1)
            data.append(rdata)
            resp.append(rresp)
    ctx.set(axi.rready, 0)
    return data, resp


def test_block_ram_bursts_against_a_model() -> None:
    """Random bursts (sizes, strobes, lengths) against a byte model; the preloaded words read back;
    outside the memory DECERR (reads zero, writes dropped)."""
    size, init = 1024, [0x11223344, 0x55667788, 0x99AABBCC]
    dut = AxiBlockRam(MEM_BASE, size, 64, 5, init)
    model = bytearray(b"".join(w.to_bytes(4, "little") for w in init)) + bytearray(size - 12)
    rng = random.Random(7)
    random.seed(7)

    async def testbench(ctx) -> None:
        axi = dut.axi
        data, resp = await _axi_read(ctx, axi, MEM_BASE, 2, 3)
        assert data == [0x5566778811223344, 0x99AABBCC] and resp == [AXI_RESP_OKAY] * 2
        for _ in range(40):
            beats, row = rng.randint(1, 6), rng.randrange(size // 8 - 6)
            if rng.random() < 0.5:
                values = [rng.getrandbits(64) for _ in range(beats)]
                strb = rng.getrandbits(8)
                assert await _axi_write(ctx, axi, MEM_BASE + row * 8, values, strb, 3) == AXI_RESP_OKAY
                for n, v in enumerate(values):
                    for lane in range(8):
                        if strb >> lane & 1:
                            model[(row + n) * 8 + lane] = v >> (8 * lane) & 0xFF
            else:
                data, resp = await _axi_read(ctx, axi, MEM_BASE + row * 8, beats, 3)
                want = [int.from_bytes(model[(row + n) * 8 : (row + n + 1) * 8], "little") for n in range(beats)]
                assert data == want and resp == [AXI_RESP_OKAY] * beats
        assert await _axi_write(ctx, axi, MEM_BASE + size, [2**64 - 1], 0xFF, 3) == AXI_RESP_DECERR
        data, resp = await _axi_read(ctx, axi, MEM_BASE + size, 1, 3)
        assert data == [0] and resp == [AXI_RESP_DECERR]
        data, _ = await _axi_read(ctx, axi, MEM_BASE, 1, 3)  # the write outside did not wrap around
        assert data == [int.from_bytes(model[:8], "little")]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def test_memory_image_places_segments_by_region() -> None:
    segments = [(ITCM_BASE, bytes(range(1, 9))), (DRAM_BASE + 4, b"\xaa\xbb"), (MEM_BASE, b"\x01\x02\x03\x04\x05")]
    image = MemoryImage.from_segments(SMALL_SOC, segments, 16)
    assert image.itcm == (0x04030201, 0x08070605)
    assert image.dram == (0, 0xBBAA)
    assert image.mem == (0x04030201, 0x05)
    with pytest.raises(ConfigError, match="firmware = '8 bytes at 0x80000010' is invalid"):
        MemoryImage.from_segments(SMALL_SOC, [(MEM_BASE + 16, bytes(8))], 16)
    with pytest.raises(ConfigError, match="firmware"):
        MemoryImage.from_segments(SMALL_SOC, [(ITCM_BASE + SMALL_SOC.itcm_bytes - 4, bytes(8))], 16)


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_board_top_is_written_for_each_board(board, tmp_path) -> None:
    """The platform's build files for each board: the top, its pins and the board clock. The Arty's
    are Vivado's (Tcl, XDC, Verilog), written without running Vivado."""
    image = MemoryImage(itcm=(0x00000013,), dram=(0xDEADBEEF,))
    paths = {p.name: p for p in write_plan(BOARDS[board], SMALL_SOC, image, 4096, tmp_path)}
    if BOARDS[board].flow == "ecp5":
        assert {"top.il", "top.ys", "top.lpf"} <= set(paths)
        lpf = paths["top.lpf"].read_text()
        assert 'LOCATE COMP "uart_0__tx__io" SITE "L4"' in lpf and 'FREQUENCY PORT "clk25_0__io" 25000000' in lpf
        assert "synth_ecp5" in paths["top.ys"].read_text() and "-top top" in paths["top.ys"].read_text()
        assert f"{0xDEADBEEF:032b}" in paths["top.il"].read_text()  # the data RAM's preloaded word
    else:
        assert {"top.tcl", "top.xdc", "top.v"} <= set(paths)
        tcl, xdc = paths["top.tcl"].read_text(), paths["top.xdc"].read_text()
        assert "top.v" in tcl and "top.xdc" in tcl and "-top top" in tcl
        assert "D10" in xdc and "uart_0__tx" in xdc and "E3" in xdc
        assert "MMCME2_BASE" in paths["top.v"].read_text()


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--board", "ulx3s_12f"], ("board", "ulx3s_85f", "arty_a7_35")),
        (["--board", "ulx3s_85f", "--config", "5x5-int9"], ("5x5-int9",)),
        (["--board", "ulx3s_85f", "--config", "4x4-int8", "--program", "nope"], ("program", "hello")),
        (["--board", "ulx3s_85f", "--config", "4x4-int8", "--mem-kib", "3"], ("mem_kib", "4")),
        (["--board", "ulx3s_85f", "--config", "4x4-int8", "--firmware", "/nonexistent.elf"], ("firmware",)),
    ],
)
def test_build_refuses_bad_arguments_in_one_line(argv, names, capsys, tmp_path) -> None:
    code, _, err = _cli(["build", *argv, "-o", str(tmp_path / "out")], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(name in err for name in names), err


def test_build_arty_writes_the_vivado_project(capsys, tmp_path) -> None:
    argv = ["build", "--board", "arty_a7_35", "--config", "1x1-int8", "--sp-kib", "16", "--acc-kib", "16"]
    code, out, _ = _cli([*argv, "--itcm-kib", "8", "--dram-kib", "8", "-o", str(tmp_path), "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and result["flow"] == "vivado" and "Vivado not run" in result["note"]
    assert {"top.tcl", "top.xdc", "top.v", "build_top.sh"} <= set(result["files"])
    assert result["timing"] is None and (tmp_path / "top.v").stat().st_size > 0


@pytest.mark.slow
def test_ulx3s_flow_end_to_end(capsys, tmp_path, scale) -> None:
    """Yosys, nextpnr and ecppack give a bitstream that meets the 25 MHz board clock; a second build
    is served from the cache. Small scale (the CI): a 1x1-int8 tile without the vector engine, the
    flow's longest test kept to what it checks; full: the 4x4-int8 SoC, engine and all."""
    small = ["--config", "1x1-int8", "--sp-kib", "16", "--acc-kib", "16", "--vector", "off"]
    config = small if scale == "small" else ["--config", "4x4-int8"]
    start = time.monotonic()
    code, out, err = _cli(["build", "--board", "ulx3s_85f", *config, "-o", str(tmp_path), "--json"], capsys)
    with capsys.disabled():  # the wall time, for docs/boards.md; not part of the JSON parsed below
        print(f"ECP5 flow: {time.monotonic() - start:.0f} s")
    assert code == 0, err
    result = json.loads(out)
    bit = tmp_path / "top.bit"
    assert bit.stat().st_size > 100_000 and result["timing"]["met"] and result["timing"]["fmax_mhz"] >= 25.0
    assert json.loads((tmp_path / "timing.json").read_text()) == result["timing"]
    used = result["utilization"]
    assert 0 < used["lut"]["used"] <= used["lut"]["available"] and 0 < used["bram18"]["used"] <= 208
    again = json.loads(_cli(["build", "--board", "ulx3s_85f", *config, "-o", str(tmp_path), "--json"], capsys)[1])
    assert again["cached"] and again["timing"] == result["timing"]


def test_hello_reaches_the_uart_pin() -> None:
    """The board top in Amaranth's simulator, hello.c preloaded: the UART's line carries the
    program's console text, 8N1, and the program exits with 0. The line runs at a quarter of the
    clock (a divisor of 4, not 217) so that the simulation stays short; the back-pressure is the
    same, a byte every 40 cycles is still far slower than the hart writes them."""
    from boards.cli import PROGRAMS
    from boards.top import BoardTop
    from sim.firmware import build_firmware
    from sim.toolchain import load_elf

    cfg, divisor = SMALL_SOC, 4
    elf = build_firmware(cfg, [PROGRAMS / "hello.c"])
    image = MemoryImage.from_segments(cfg, load_elf(elf).segments, 4096)
    board = BOARDS["ulx3s_85f"]
    top = BoardTop(board, cfg, image, 4096, baud=board.clock_hz / divisor)
    samples: list[int] = []

    async def testbench(ctx) -> None:
        for _ in range(200_000):
            await ctx.tick()
            samples.append(ctx.get(top.uart.tx))
            if ctx.get(top.soc.exit_valid) and ctx.get(top.uart.ready):
                break
        assert ctx.get(top.soc.exit_valid) and ctx.get(top.soc.exit_code) == 0
        for _ in range(divisor * 2):
            await ctx.tick()
            samples.append(ctx.get(top.uart.tx))

    sim = Simulator(top)
    sim.add_clock(1 / board.clock_hz)
    sim.add_testbench(testbench)
    sim.run()
    assert _decode_uart(samples, divisor) == b"hello from pyard: 1 hart(s), tile 1x1\n"
