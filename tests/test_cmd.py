"""Register file and command queue (rtl/cmd.py) in the Amaranth simulator, against docs/isa.md."""

from amaranth.sim import Simulator

from rtl.cmd import CMD_WORDS, ERR, REG, CommandInterface, hwcfg_word
from rtl.config import AccelConfig

CFG = AccelConfig(rows=8, cols=4, dtype="bf16", dma_bits=128)
DEPTH = 4


async def write(ctx, dut, offset: int, value: int) -> None:
    ctx.set(dut.req.p.addr, offset // 4)
    ctx.set(dut.req.p.write, 1)
    ctx.set(dut.req.p.wdata, value)
    ctx.set(dut.req.valid, 1)
    await ctx.tick()
    ctx.set(dut.req.valid, 0)


async def read(ctx, dut, offset: int) -> int:
    ctx.set(dut.req.p.addr, offset // 4)
    ctx.set(dut.req.p.write, 0)
    ctx.set(dut.req.valid, 1)
    await ctx.tick()
    ctx.set(dut.req.valid, 0)
    assert ctx.get(dut.rsp.valid)
    return ctx.get(dut.rsp.rdata)


async def push(ctx, dut, words: list[int]) -> None:
    for k, w in enumerate(words):
        await write(ctx, dut, REG["CMD0"] + 4 * k, w)
    await write(ctx, dut, REG["CMD_PUSH"], 1)


def command(n: int) -> list[int]:
    return [(n * 0x01000193 + k * 0x9E3779B1) & 0xFFFFFFFF for k in range(CMD_WORDS)]


def status_fields(word: int) -> dict:
    return {
        "busy": word & 1,
        "done": word >> 1 & 1,
        "error": word >> 2 & 1,
        "unit": word >> 4 & 7,
        "code": word >> 8 & 0xFF,
        "free": word >> 16 & 0xFF,
        "irq": word >> 24 & 1,
    }


def run(bench) -> None:
    dut = CommandInterface(CFG, queue_depth=DEPTH, sp_rows=4096, acc_rows=512)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def testbench(ctx) -> None:
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    sim.run()


def test_identity_registers() -> None:
    async def bench(ctx, dut):
        assert await read(ctx, dut, REG["ID"]) == 0x50594144
        word = await read(ctx, dut, REG["HWCFG"])
        assert word == hwcfg_word(CFG, DEPTH)
        assert (word & 0xFF, word >> 8 & 0xFF, word >> 16 & 3, word >> 20 & 0xF) == (8, 4, 1, 4)
        assert await read(ctx, dut, REG["SP_ROWS"]) == 4096
        assert await read(ctx, dut, REG["ACC_ROWS"]) == 512
        assert await read(ctx, dut, 0x3FC) == 0  # unmapped

    run(bench)


def test_commands_are_queued_in_order_with_sequence_numbers() -> None:
    async def bench(ctx, dut):
        ctx.set(dut.cmd.ready, 0)
        for n in range(3):
            await push(ctx, dut, command(n))
        st = status_fields(await read(ctx, dut, REG["STATUS"]))
        assert st["busy"] == 1 and st["free"] == DEPTH - 3 and st["error"] == 0
        ctx.set(dut.cmd.ready, 1)
        seen = []
        for _ in range(10):
            if ctx.get(dut.cmd.valid):
                seen.append((ctx.get(dut.cmd.p.words), ctx.get(dut.cmd.p.seq)))
            await ctx.tick()
        assert [s for _, s in seen] == [0, 1, 2]
        for (words, _), n in zip(seen, range(3), strict=True):
            assert [words[k] for k in range(CMD_WORDS)] == command(n)

    run(bench)


def test_full_queue_sets_error_and_clear_discards_queue() -> None:
    async def bench(ctx, dut):
        ctx.set(dut.cmd.ready, 0)
        for n in range(DEPTH + 1):
            await push(ctx, dut, command(n))
        st = status_fields(await read(ctx, dut, REG["STATUS"]))
        assert (st["error"], st["unit"], st["code"], st["free"]) == (1, 5, ERR["QUEUE_FULL"], 0)
        assert await read(ctx, dut, REG["ERROR_SEQ"]) == DEPTH
        ctx.set(dut.cmd.ready, 1)
        await ctx.tick().repeat(3)
        assert not ctx.get(dut.cmd.valid), "no command may be dispatched while an error is pending"
        await write(ctx, dut, REG["CONTROL"], 0b10)
        await ctx.tick().repeat(DEPTH + 2)
        st = status_fields(await read(ctx, dut, REG["STATUS"]))
        assert (st["error"], st["free"], st["code"]) == (0, DEPTH, 0)
        await push(ctx, dut, command(9))
        await ctx.tick()
        assert ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.p.seq) == DEPTH

    run(bench)


def test_unit_error_done_and_interrupt() -> None:
    async def bench(ctx, dut):
        await write(ctx, dut, REG["IRQ_ENABLE"], 0b11)
        ctx.set(dut.cmd.ready, 1)
        ctx.set(dut.busy, 1)
        await push(ctx, dut, command(1))
        await ctx.tick().repeat(2)
        assert not ctx.get(dut.irq)
        ctx.set(dut.busy, 0)
        await ctx.tick().repeat(2)
        st = status_fields(await read(ctx, dut, REG["STATUS"]))
        assert (st["done"], st["busy"], st["irq"]) == (1, 0, 1)
        await write(ctx, dut, REG["CONTROL"], 0b01)
        await ctx.tick()
        assert not ctx.get(dut.irq)

        ctx.set(dut.error.valid, 1)
        ctx.set(dut.error.payload.unit, 3)
        ctx.set(dut.error.payload.code, ERR["ACC_RANGE"])
        ctx.set(dut.error.payload.seq, 1)
        await ctx.tick()
        ctx.set(dut.error.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.irq)
        st = status_fields(await read(ctx, dut, REG["STATUS"]))
        assert (st["error"], st["unit"], st["code"]) == (1, 3, ERR["ACC_RANGE"])
        await write(ctx, dut, REG["CONTROL"], 0b10)
        # The status clears with the write; the flush pulse follows in the next cycle, for one cycle.
        assert not ctx.get(dut.irq) and ctx.get(dut.flush) == 1
        assert status_fields(await read(ctx, dut, REG["STATUS"]))["error"] == 0
        assert ctx.get(dut.flush) == 0

    run(bench)


def test_counters_accumulate_and_reset() -> None:
    async def bench(ctx, dut):
        ctx.set(dut.events.macs, 64)
        ctx.set(dut.events.dma_rd_bytes, 16)
        ctx.set(dut.events.stall, 0b00101)
        ctx.set(dut.busy, 1)
        await ctx.tick().repeat(10)
        ctx.set(dut.events.macs, 0)
        ctx.set(dut.events.dma_rd_bytes, 0)
        ctx.set(dut.events.stall, 0)
        ctx.set(dut.busy, 0)
        await ctx.tick()  # the counters lag their events by the increment's register
        assert await read(ctx, dut, REG["MACS_LO"]) == 640
        assert await read(ctx, dut, REG["DMA_RD_BYTES"]) == 160
        assert await read(ctx, dut, REG["STALL_EXEC_ON_LOAD"]) == 10
        assert await read(ctx, dut, REG["STALL_DMA_READ"]) == 10
        assert await read(ctx, dut, REG["STALL_EXEC_ON_STORE"]) == 0
        assert await read(ctx, dut, REG["CYCLES_BUSY"]) == 10
        await write(ctx, dut, REG["CONTROL"], 0b100)
        assert await read(ctx, dut, REG["MACS_LO"]) == 0

    run(bench)


def test_done_waits_for_queued_commands() -> None:
    """`done` means every pushed command ran: not while one still sits in the queue."""

    async def bench(ctx, dut):
        ctx.set(dut.cmd.ready, 0)
        await push(ctx, dut, command(1))
        for _ in range(4):
            assert not status_fields(await read(ctx, dut, REG["STATUS"]))["done"]
        ctx.set(dut.cmd.ready, 1)
        await ctx.tick().repeat(3)
        assert status_fields(await read(ctx, dut, REG["STATUS"]))["done"]

    run(bench)


def test_every_address_reads_its_register_or_zero() -> None:
    """The read-back multiplexer (pages of words, see ``CommandInterface._readback``): each word
    address of the register port reads its own register, unmapped and write-only ones zero."""

    async def bench(ctx, dut):
        counts = {"macs": 7, "dma_rd_bytes": 2, "dma_wr_bytes": 3, "vec_elems": 5, "vec_busy": 1, "stall": 0b10110}
        for name, value in counts.items():
            ctx.set(getattr(dut.events, name), value)
        await write(ctx, dut, REG["IRQ_ENABLE"], 0b10)
        await ctx.tick().repeat(3)
        for name in counts:
            ctx.set(getattr(dut.events, name), 0)
        await ctx.tick().repeat(2)
        ticks = 4  # the cycles with the events set: the IRQ_ENABLE write's and three more
        want = {
            "ID": 0x50594144,
            "HWCFG": hwcfg_word(CFG, DEPTH),
            "STATUS": DEPTH << 16,
            "IRQ_ENABLE": 0b10,
            "SP_ROWS": 4096,
            "ACC_ROWS": 512,
            "MACS_LO": 7 * ticks,
            "DMA_RD_BYTES": 2 * ticks,
            "DMA_WR_BYTES": 3 * ticks,
            "VEC_ELEMS": 5 * ticks,
            "VEC_CYCLES": ticks,
            "STALL_EXEC_ON_STORE": ticks,
            "STALL_DMA_READ": ticks,
            "STALL_QUEUE": ticks,
        }
        by_word = {REG[name] // 4: value for name, value in want.items()}
        for word in range(1024):
            assert await read(ctx, dut, 4 * word) == by_word.get(word, 0), hex(4 * word)

    run(bench)
