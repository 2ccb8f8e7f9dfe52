"""A simulated pyard device: one tile with its main memory in a persistent ``tile_sim --serve``
process (tilesim/tile_main.cpp), driven over its stdin/stdout. No Python runs per cycle: a batch of
commands is pushed and run to the interrupt inside the C++ harness.

A device that does not finish a batch within its cycle budget is stopped (its process killed) and
started again with empty memory; the batch raises :class:`DeviceHung`. A device error (the tile's
STATUS error code) raises :class:`DeviceError` with the code's name (rtl/cmd.ERR) and the command.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import struct
import subprocess
import threading
import weakref
from dataclasses import dataclass

from rtl.cmd import ERR, ID_VALUE
from rtl.config import AccelConfig
from tilesim.build import build_tile_sim
from tilesim.run import MIN_MEM_BYTES

__all__ = ["COUNTERS", "Device", "DeviceError", "DeviceHung", "RunRecord"]

LATENCY = 32  # main-memory read latency of the device's memory model, in cycles (as pyard bench gemm)
# The run record's counters, in the harness's order (kCounters in tile_main.cpp).
COUNTERS = (
    "cycles_busy", "macs_lo", "macs_hi", "dma_rd_bytes", "dma_wr_bytes", "stall_exec_on_load",
    "stall_exec_on_store", "stall_dma_read", "stall_dma_write", "stall_queue", "vec_elems", "vec_cycles",
)  # fmt: skip
_RECORD = struct.Struct(f"<BQIII{len(COUNTERS)}I")
_ERR_NAMES = {code: name for name, code in ERR.items()}
_UNITS = {1: "decode", 2: "LOAD", 3: "EXEC", 4: "STORE", 5: "queue", 6: "VEC"}
_OPCODES = {0x01: "LOAD", 0x02: "STORE", 0x03: "EXEC", 0x04: "FENCE", 0x05: "VEC", 0x10: "GEMM", 0x11: "CONV2D"}


class DeviceError(RuntimeError):
    """The tile reported an error: ``name`` is its code's name (rtl/cmd.ERR), ``command`` the words
    of the command that failed (by the tile's sequence number)."""

    def __init__(self, device: int, name: str, unit: str, command: list[int]) -> None:
        self.device, self.name, self.unit, self.command = device, name, unit, command
        op = _OPCODES.get(command[0] & 0xFF, f"{command[0] & 0xFF:#x}") if command else "?"
        words = " ".join(f"{w:#x}" for w in command)
        super().__init__(f"device {device}: {name} from the {unit} unit in the {op} command [{words}]")


class DeviceHung(RuntimeError):
    """A batch did not finish within its cycle budget; the device was stopped and restarted."""


@dataclass(frozen=True)
class RunRecord:
    cycles: int  # from the first command write to the interrupt
    counters: dict[str, int]


_DEVICES: weakref.WeakSet[Device] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """No device process outlives the Python that started it."""
    for device in list(_DEVICES):
        device.close()


class Device:
    """One simulated tile. Thread-safe: one request at a time."""

    def __init__(self, cfg: AccelConfig, index: int = 0, mem_bytes: int = MIN_MEM_BYTES) -> None:
        self.cfg, self.index = cfg, index
        self.executable = build_tile_sim(cfg, mem_bytes, LATENCY).executable
        self.mem_bytes = mem_bytes
        self.cycles = 0  # device cycles of every batch run so far
        self.bytes_written = self.bytes_read = 0  # host <-> device memory traffic so far
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._seq = 0  # the tile's sequence number of the next command pushed (ERROR_SEQ's count)
        self._start()
        _DEVICES.add(self)

    def _start(self) -> None:
        # A session of its own, so the group is killed with it and a terminal's Ctrl-C reaches
        # only the runtime, which then closes the device.
        self._proc = subprocess.Popen(
            [str(self.executable), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        self._seq = 0
        ident, _hwcfg, size = struct.unpack("<IIQ", self._read(16))
        if ident != ID_VALUE or size != self.mem_bytes:
            self.close()
            raise RuntimeError(f"device {self.index}: unexpected handshake (ID {ident:#x}, {size} bytes)")

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask the process to quit, kill it if it does not, and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(b"Q")
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def write(self, addr: int, data: bytes) -> None:
        with self._lock:
            self._send(struct.pack("<cQQ", b"W", addr, len(data)) + data)
            self._status("write", addr, len(data))
            self.bytes_written += len(data)

    def read(self, addr: int, length: int) -> bytes:
        with self._lock:
            self._send(struct.pack("<cQQ", b"R", addr, length))
            self._status("read", addr, length)
            self.bytes_read += length
            return self._read(length)

    def run(self, commands: list[list[int]], budget: int) -> RunRecord:
        """Push ``commands`` and run until the tile interrupts; raises DeviceError on a tile error
        and DeviceHung (after restarting the device) when ``budget`` cycles pass first."""
        flat = [w for words in commands for w in (len(words), *words)]
        with self._lock:
            self._send(struct.pack(f"<cQI{len(flat)}I", b"E", budget, len(flat), *flat))
            self._status("run", 0, 0)
            irq, cycles, pushed, status, seq, *counts = _RECORD.unpack(self._read(_RECORD.size))
            self.cycles += cycles
            first, self._seq = self._seq, (self._seq + pushed) & 0xFFFF
            if not irq:
                self.close()
                self._start()  # stopped: a fresh device with empty memory
                raise DeviceHung(
                    f"device {self.index}: no interrupt within the budget of {budget} cycles "
                    f"(STATUS {status:#x}); the device was stopped and restarted with empty memory"
                )
        if status & 4:
            code, unit = status >> 8 & 0xFF, status >> 4 & 7
            index = (seq - first) & 0xFFFF
            failed = commands[index] if index < len(commands) else []
            raise DeviceError(self.index, _ERR_NAMES.get(code, f"code {code:#x}"), _UNITS.get(unit, "?"), failed)
        return RunRecord(cycles, dict(zip(COUNTERS, counts, strict=True)))

    def _send(self, data: bytes) -> None:
        if self._proc is None:
            raise RuntimeError(f"device {self.index} is closed")
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def _read(self, length: int) -> bytes:
        data = self._proc.stdout.read(length) if self._proc else b""
        if len(data) != length:
            raise RuntimeError(f"device {self.index}: the simulator process ended (status {self._proc.poll()})")
        return data

    def _status(self, what: str, addr: int, length: int) -> None:
        if self._read(1) == b"\0":
            return
        (size,) = struct.unpack("<I", self._read(4))
        message = self._read(size).decode()
        raise ValueError(f"device {self.index}: {what} of {length} bytes at {addr:#x}: {message}")
