"""Main memory for cocotb testbenches: an AXI4 slave RAM with a read latency and error injection.

Built on cocotbext-axi's slave channel models. What it adds:

* **Pipelined read latency.** Read bursts are accepted on AR as they come and time-stamped; the first
  R beat of a burst is handshaken exactly ``read_latency`` clock edges after its AR handshake (if
  the master is ready and no earlier burst still occupies R), so several bursts in flight overlap
  their latencies instead of paying them one after the other.
* **Error injection.** Address ranges answer SLVERR or DECERR: read beats from such a range carry
  the error response (and zero data); write bursts touching one are not written and get the error
  on B.
* **Counters** of read and write bursts, for "a refused descriptor does no transfer" checks.

Python does work per beat and per burst, not per idle cycle (waits are timers, not clock loops).
"""

from __future__ import annotations

from dataclasses import dataclass

import cocotb
from cocotb.queue import Queue
from cocotb.simtime import convert, get_sim_time
from cocotb.triggers import Timer
from cocotbext.axi import AxiBus, AxiResp
from cocotbext.axi.axi_slave import AxiSlaveRead, AxiSlaveWrite

__all__ = ["AxiMemory", "ErrorRange"]


@dataclass(frozen=True)
class ErrorRange:
    start: int
    end: int  # exclusive
    resp: AxiResp

    def hits(self, lo: int, hi: int) -> bool:
        """Whether bytes [lo, hi) overlap the range."""
        return lo < self.end and self.start < hi


class _Backing:
    """Bytes and error ranges shared by the read and write halves."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.errors: list[ErrorRange] = []
        self.read_bursts = 0
        self.write_bursts = 0

    def response(self, lo: int, hi: int) -> AxiResp:
        for err in self.errors:
            if err.hits(lo, hi):
                return err.resp
        return AxiResp.OKAY


class _LatencyRead(AxiSlaveRead):
    def __init__(self, bus, clock, reset, backing: _Backing, latency: int, period_steps: int) -> None:
        self.backing = backing
        self.latency = latency
        self.period_steps = period_steps
        self._due: Queue = Queue()
        self._emit_cr = None
        super().__init__(bus, clock, reset)

    def _handle_reset(self, state) -> None:
        super()._handle_reset(state)
        if state:
            if self._emit_cr is not None:
                self._emit_cr.cancel()
                self._emit_cr = None
            self._due = Queue()
        elif self._emit_cr is None:
            self._emit_cr = cocotb.start_soon(self._emit())

    async def _process_read(self) -> None:
        # Accept every AR at once (no per-burst latency here) and remember the edge it came on.
        while True:
            ar = await self.ar_channel.recv()
            self.backing.read_bursts += 1
            self._due.put_nowait((get_sim_time("step"), ar))

    async def _emit(self) -> None:
        period = self.period_steps
        while True:
            accepted, ar = await self._due.get()
            # The R source drives on the edge after a beat is queued and the master samples it on
            # the next one, so queue the beat half a cycle before edge (AR edge + latency - 1).
            target = accepted + (self.latency - 1) * period - period // 2
            now = get_sim_time("step")
            if target > now:
                await Timer(target - now, unit="step")
            for beat in self._beats(ar):
                await self.r_channel.send(beat)

    def _beats(self, ar) -> list:
        lanes = self.byte_lanes
        addr = (int(ar.araddr) // lanes) * lanes
        length = int(ar.arlen) + 1
        assert int(ar.arburst) == 1, "the DMA issues INCR bursts only"
        assert int(ar.arsize) == (lanes - 1).bit_length(), "the DMA issues full-width beats"
        assert addr // 4096 == (addr + length * lanes - 1) // 4096, f"read burst at {addr:#x} crosses 4 KiB"
        beats = []
        for n in range(length):
            lo = addr + n * lanes
            r = self.r_channel._transaction_obj()
            r.rid = int(ar.arid)
            r.rlast = n == length - 1
            r.rresp = self.backing.response(lo, lo + lanes)
            chunk = self.backing.data[lo : lo + lanes] if r.rresp == AxiResp.OKAY else bytes(lanes)
            r.rdata = int.from_bytes(chunk, "little")
            beats.append(r)
        return beats


class _ErrorWrite(AxiSlaveWrite):
    def __init__(self, bus, clock, reset, backing: _Backing) -> None:
        self.backing = backing
        super().__init__(bus, clock, reset)

    async def _process_write(self) -> None:
        lanes = self.byte_lanes
        full = (1 << lanes) - 1
        mem = self.backing.data
        while True:
            aw = await self.aw_channel.recv()
            self.backing.write_bursts += 1
            addr = (int(aw.awaddr) // lanes) * lanes
            length = int(aw.awlen) + 1
            assert int(aw.awburst) == 1 and int(aw.awsize) == (lanes - 1).bit_length()
            assert addr // 4096 == (addr + length * lanes - 1) // 4096, f"write burst at {addr:#x} crosses 4 KiB"
            resp = self.backing.response(addr, addr + length * lanes)
            for n in range(length):
                w = await self.w_channel.recv()
                assert int(w.wlast) == (n == length - 1), f"wlast wrong on beat {n} of a {length}-beat burst"
                if resp != AxiResp.OKAY:
                    continue
                lo = addr + n * lanes
                strb = int(w.wstrb)
                data = int(w.wdata).to_bytes(lanes, "little")
                if strb == full:
                    mem[lo : lo + lanes] = data
                else:
                    for k in range(lanes):
                        if strb >> k & 1:
                            mem[lo + k] = data[k]
            b = self.b_channel._transaction_obj()
            b.bid = int(aw.awid)
            b.bresp = resp
            await self.b_channel.send(b)


class AxiMemory:
    """``size`` bytes of RAM behind the AXI4 master port with the given prefix (e.g. ``m_axi_``).

    ``data`` is the backing ``bytearray`` (read and write it directly as a backdoor);
    ``inject(start, end, resp)`` makes ``[start, end)`` answer with an error, ``clear_errors()`` undoes it.
    """

    def __init__(
        self,
        dut,
        prefix: str,
        clock,
        reset,
        *,
        size: int = 1 << 20,
        read_latency: int = 32,
        clock_period_ns: float = 10,
    ) -> None:
        if read_latency < 2:
            raise ValueError("read_latency must be at least 2 cycles (the R source adds one register)")
        bus = AxiBus.from_prefix(dut, prefix)
        self.backing = _Backing(size)
        period = convert(clock_period_ns, "ns", to="step")
        self.read_if = _LatencyRead(bus.read, clock, reset, self.backing, read_latency, period)
        self.write_if = _ErrorWrite(bus.write, clock, reset, self.backing)

    @property
    def data(self) -> bytearray:
        return self.backing.data

    @property
    def read_bursts(self) -> int:
        return self.backing.read_bursts

    @property
    def write_bursts(self) -> int:
        return self.backing.write_bursts

    def inject(self, start: int, end: int, resp: AxiResp) -> None:
        self.backing.errors.append(ErrorRange(start, end, resp))

    def clear_errors(self) -> None:
        self.backing.errors.clear()
