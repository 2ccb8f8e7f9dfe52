"""AXI4 and AXI4-Lite bundles as flat ``wiring.Signature``s.

Members carry the AXI signal names (``awaddr``, ``rdata`` …) so that a port named ``m_axi`` comes out
in Verilog as ``m_axi__awaddr`` …, which is what ``cocotbext.axi.AxiBus.from_prefix(dut, "m_axi_")``
looks up (cocotb-bus joins prefix and name with ``_``). Both signatures are written from the
master's point of view: a master port is ``Out(sig)``, a slave port ``In(sig)``.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI_BURST_INCR", "AXI_RESP_DECERR", "AXI_RESP_OKAY", "AXI_RESP_SLVERR", "Axi4Signature", "AxiLiteSignature"]

AXI_BURST_INCR = 0b01
AXI_RESP_OKAY = 0b00
AXI_RESP_SLVERR = 0b10
AXI_RESP_DECERR = 0b11


class Axi4Signature(wiring.Signature):
    """A full AXI4 master interface: five channels, INCR-capable, no user or region signals."""

    def __init__(self, data_bits: int, addr_bits: int = 32, id_bits: int = 4) -> None:
        if data_bits < 8 or data_bits & (data_bits - 1):
            raise ValueError(f"AXI data width must be a power of two of at least 8 bits, not {data_bits}")
        self.data_bits = data_bits
        self.addr_bits = addr_bits
        self.id_bits = id_bits
        members = {}
        for ch in ("aw", "ar"):  # the two address channels have identical fields
            members |= {
                f"{ch}id": Out(id_bits),
                f"{ch}addr": Out(addr_bits),
                f"{ch}len": Out(8),
                f"{ch}size": Out(3),
                f"{ch}burst": Out(2),
                f"{ch}lock": Out(1),
                f"{ch}cache": Out(4),
                f"{ch}prot": Out(3),
                f"{ch}qos": Out(4),
                f"{ch}valid": Out(1),
                f"{ch}ready": In(1),
            }
        members |= {
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "wlast": Out(1),
            "wvalid": Out(1),
            "wready": In(1),
            "bid": In(id_bits),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "rid": In(id_bits),
            "rdata": In(data_bits),
            "rresp": In(2),
            "rlast": In(1),
            "rvalid": In(1),
            "rready": Out(1),
        }
        super().__init__(members)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axi4Signature) and (self.data_bits, self.addr_bits, self.id_bits) == (
            other.data_bits,
            other.addr_bits,
            other.id_bits,
        )

    def __hash__(self) -> int:
        return hash((Axi4Signature, self.data_bits, self.addr_bits, self.id_bits))

    def __repr__(self) -> str:
        return f"Axi4Signature({self.data_bits}, addr_bits={self.addr_bits}, id_bits={self.id_bits})"


class AxiLiteSignature(wiring.Signature):
    """An AXI4-Lite master interface with 32-bit address and data (a slave port is ``In(...)``)."""

    def __init__(self, addr_bits: int = 32, data_bits: int = 32) -> None:
        self.addr_bits = addr_bits
        self.data_bits = data_bits
        super().__init__(
            {
                "awaddr": Out(addr_bits),
                "awprot": Out(3),
                "awvalid": Out(1),
                "awready": In(1),
                "wdata": Out(data_bits),
                "wstrb": Out(data_bits // 8),
                "wvalid": Out(1),
                "wready": In(1),
                "bresp": In(2),
                "bvalid": In(1),
                "bready": Out(1),
                "araddr": Out(addr_bits),
                "arprot": Out(3),
                "arvalid": Out(1),
                "arready": In(1),
                "rdata": In(data_bits),
                "rresp": In(2),
                "rvalid": In(1),
                "rready": Out(1),
            }
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AxiLiteSignature) and (self.addr_bits, self.data_bits) == (
            other.addr_bits,
            other.data_bits,
        )

    def __hash__(self) -> int:
        return hash((AxiLiteSignature, self.addr_bits, self.data_bits))

    def __repr__(self) -> str:
        return f"AxiLiteSignature(addr_bits={self.addr_bits}, data_bits={self.data_bits})"
