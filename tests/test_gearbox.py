"""The DMA's byte gearbox (rtl/dma.py, ``Gearbox``) in the Amaranth simulator, against a byte queue:
every output carries the next bytes of the input stream at the requested lanes, ``out.valid`` and
``inp.ready`` follow the documented rules exactly, and an unaligned stream of whole beats passes
at one beat a cycle. With byte lanes and with the 2- and 4-byte lanes of wider elements."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.dma import Gearbox


def _chunk(rng: random.Random, nu: int, unit: int) -> tuple[int, int, bytes]:
    lane = rng.randrange(nu)
    count = rng.randint(1, nu - lane)
    return lane, count, bytes(rng.randrange(256) for _ in range(count * unit))


def _word(lane: int, payload: bytes, nb: int, rng: random.Random, unit: int = 1) -> int:
    """A beat with ``payload`` at lane ``lane`` (of ``unit`` bytes) and noise in the other bytes."""
    lanes = [rng.randrange(256) for _ in range(nb)]
    lanes[lane * unit : lane * unit + len(payload)] = payload
    return int.from_bytes(bytes(lanes), "little")


def _run(dut: Gearbox, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize(("nb", "unit"), [(8, 1), (16, 1), (8, 2), (16, 4), (4, 2)])
def test_gearbox_matches_byte_queue(nb: int, unit: int, parallel: bool) -> None:
    """``parallel``: the requester also tells the next cycle's count (``req_next_count``), from a
    count of 0 after reset, as the store DMA's registered count does."""
    rng = random.Random(nb * unit)
    dut = Gearbox(nb, unit, parallel=parallel)
    nu = nb // unit
    inputs = [_chunk(rng, nu, unit) for _ in range(300)]
    total = sum(count for _, count, _ in inputs)
    requests = []
    while sum(c for _, c in requests) < total - nu:
        lane = rng.randrange(nu)
        requests.append((lane, rng.randint(1, nu - lane)))
    checked = {"outputs": 0}

    async def bench(ctx) -> None:
        queue = bytearray()
        i = r = 0
        if parallel:  # the count is 0 in the first cycle, then the first request's
            ctx.set(dut.req_next_count, requests[0][1])
            await ctx.tick()
        for _ in range(20 * len(inputs)):
            if r == len(requests):
                break
            in_valid = i < len(inputs) and rng.random() < 0.8
            if i < len(inputs):
                lane, count, payload = inputs[i]
                ctx.set(dut.inp.payload.data, _word(lane, payload, nb, rng, unit))
                ctx.set(dut.inp.payload.lane, lane)
                ctx.set(dut.inp.payload.count, count)
            ctx.set(dut.inp.valid, in_valid)
            req_lane, req_count = requests[r]
            req_valid = rng.random() < 0.8
            ctx.set(dut.req.valid, req_valid)
            ctx.set(dut.req.payload.lane, req_lane)
            ctx.set(dut.req.payload.count, req_count)
            ctx.set(dut.out.ready, rng.random() < 0.8)

            held = len(queue) // unit  # lanes
            assert ctx.get(dut.level) == held <= 2 * nu
            out_valid = ctx.get(dut.out.valid)
            assert out_valid == (req_valid and held >= req_count)
            out_fire = out_valid and ctx.get(dut.out.ready)
            taken = req_count if out_fire else 0
            assert ctx.get(dut.inp.ready) == (held - taken <= nu)
            if out_fire:
                got = ctx.get(dut.out.payload).to_bytes(nb, "little")[req_lane * unit : (req_lane + req_count) * unit]
                assert got == bytes(queue[: req_count * unit]), f"request {r}"
                del queue[: req_count * unit]
                r += 1
                checked["outputs"] += 1
            if parallel:
                ctx.set(dut.req_next_count, requests[min(r, len(requests) - 1)][1])
            if in_valid and ctx.get(dut.inp.ready):
                queue += inputs[i][2]
                i += 1
            await ctx.tick()

    _run(dut, bench)
    assert checked["outputs"] == len(requests)


@pytest.mark.parametrize(("nb", "unit"), [(8, 1), (16, 1), (16, 2)])
@pytest.mark.parametrize("offset", [0, 1, 5])
def test_unaligned_beats_pass_one_a_cycle(nb: int, unit: int, offset: int) -> None:
    """A stream that starts ``offset`` lanes into a beat, then whole beats, read out as whole beats:
    after the first, an input every cycle (the buffer never holds more than it must)."""
    rng = random.Random(offset)
    dut = Gearbox(nb, unit)
    nu = nb // unit
    beats = 40
    inputs = [(offset, nu - offset)] + [(0, nu)] * beats
    data = [bytes(rng.randrange(256) for _ in range(count * unit)) for _, count in inputs]
    stream = b"".join(data)
    outputs = len(stream) // nb
    record = {"accepted_at": [], "out": bytearray()}

    async def bench(ctx) -> None:
        i, cycle = 0, 0
        ctx.set(dut.req.valid, 1)
        ctx.set(dut.req.payload.lane, 0)
        ctx.set(dut.req.payload.count, nu)
        ctx.set(dut.out.ready, 1)
        while len(record["out"]) < outputs * nb and cycle < 4 * beats:
            ctx.set(dut.inp.valid, i < len(inputs))
            if i < len(inputs):
                lane, count = inputs[i]
                ctx.set(dut.inp.payload.data, _word(lane, data[i], nb, rng, unit))
                ctx.set(dut.inp.payload.lane, lane)
                ctx.set(dut.inp.payload.count, count)
            if ctx.get(dut.out.valid):
                record["out"] += ctx.get(dut.out.payload).to_bytes(nb, "little")
            if i < len(inputs) and ctx.get(dut.inp.ready):
                record["accepted_at"].append(cycle)
                i += 1
            await ctx.tick()
            cycle += 1

    _run(dut, bench)
    assert bytes(record["out"]) == stream[: outputs * nb]
    assert record["accepted_at"] == list(range(len(inputs)))
