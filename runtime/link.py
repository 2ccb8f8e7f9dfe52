"""The host link: how long the host <-> device transfers the runtime makes would take on a named
link, beside the device cycles (which count only the tile's work from its memory; the simulated
host writes and reads take no simulated time).

Each device has a link of its own (GPTPU puts every M.2 Edge TPU on its own PCIe lane behind a
switch). A block instruction writes its operands, runs, and reads its result, one after another,
so a device's transfers add to its cycles: ``cycles + (written + read) / bandwidth · clock``. The
bandwidths are line rates after the physical encoding, with no packet overhead, so the times are
lower bounds.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from sim.arg_types import real

__all__ = ["DEFAULT_CLOCK_MHZ", "DEFAULT_LINK", "LINKS", "Link", "add_link_args", "transfer_report"]


@dataclass(frozen=True)
class Link:
    name: str
    bytes_per_second: float  # each direction
    source: str


LINKS = {
    link.name: link
    for link in (
        # GPTPU §3.1: "Each M.2 Edge TPU is designed to occupy only a single PCIe 2.0 lane".
        Link("pcie2x1", 5e9 * 8 / 10 / 8, "PCIe 2.0 x1: 5 GT/s, 8b/10b (GPTPU's M.2 Edge TPU)"),
        Link("usb3", 5e9 * 8 / 10 / 8, "USB 3.0 SuperSpeed: 5 Gb/s, 8b/10b (the Coral USB Accelerator)"),
        Link("pcie3x4", 4 * 8e9 * 128 / 130 / 8, "PCIe 3.0 x4: 8 GT/s per lane, 128b/130b (an NVMe M.2 slot)"),
    )
}
DEFAULT_LINK = "pcie2x1"
# The tile's timing target (docs/tile.md: 100 MHz for 4x4-int8 on ECP5), to put transfer times
# in device cycles; the ECP5 builds reach 24.5-29.9 MHz so far.
DEFAULT_CLOCK_MHZ = 100.0


def add_link_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--link", choices=sorted(LINKS), default=DEFAULT_LINK, help=f"host link of each device (default {DEFAULT_LINK})"
    )
    p.add_argument(
        "--clock-mhz",
        type=real(0.0, low_open=True),
        default=DEFAULT_CLOCK_MHZ,
        help=f"device clock to count transfer time in cycles (default {DEFAULT_CLOCK_MHZ:g})",
    )


def transfer_report(
    cycles: list[int],
    written: list[int],
    read: list[int],
    link: str = DEFAULT_LINK,
    clock_mhz: float = DEFAULT_CLOCK_MHZ,
) -> dict[str, Any]:
    """Per device (lists in the same order): its cycles, bytes written to and read from its memory.
    The link's time for those bytes, in seconds and in device cycles at ``clock_mhz``, and the
    busiest device's cycles with its transfers (the run's length when each device's blocks are
    write, run, read in turn)."""
    if link not in LINKS:
        raise ValueError(f"link: must be one of {', '.join(sorted(LINKS))}, got {link!r}")
    if not clock_mhz > 0:
        raise ValueError(f"clock_mhz: must be positive, got {clock_mhz}")
    if not len(cycles) == len(written) == len(read):
        raise ValueError("cycles, written, read: one entry per device in each")
    rate = LINKS[link].bytes_per_second
    seconds = [(w + r) / rate for w, r in zip(written, read, strict=True)]
    transfer_cycles = [round(s * clock_mhz * 1e6) for s in seconds]
    return {
        "link": link,
        "link_bytes_per_second": rate,
        "clock_mhz": clock_mhz,
        "bytes_to_device": sum(written),
        "bytes_from_device": sum(read),
        "transfer_seconds": sum(seconds),
        "transfer_cycles": transfer_cycles,
        "cycles_max_with_transfers": max((c + t for c, t in zip(cycles, transfer_cycles, strict=True)), default=0),
    }
