"""The core's memory bus: one request/response port for fetch and one for data.

Protocol (both ports; the core is the master):

* **Request** (master → slave): ``req_valid``, ``addr`` (byte address, always word aligned),
  ``write``, ``wdata`` (bytes already on their lanes), ``mask`` (byte enables, for reads too, so
  MMIO slaves see the access width) and ``amo`` (:class:`AmoOp`). The slave accepts with
  ``req_ready``; a transfer happens in a cycle where both are high. Once the master raises
  ``req_valid`` it keeps the request valid and unchanged until it is accepted. ``req_valid`` may
  depend combinationally on the response signals of the same cycle, but not on ``req_ready``.
* **Response** (slave → master): ``rsp_valid`` with ``rdata`` and ``err`` (access fault), one per
  accepted request, in request order, at least one cycle after acceptance. Responses must not
  depend combinationally on the request signals. There is no response back-pressure: the master
  only issues requests it can take the response for (the fetch port keeps a small credit count,
  the data port has at most one request outstanding).
* **Atomics** are performed by the slave side, so they are atomic across cores: for ``amo`` other
  than ``NONE`` the slave reads the word at ``addr``, answers the old value in ``rdata`` and, for
  the read-modify-write ops, stores ``op(old, wdata)`` without letting another master access the
  word in between. ``LR`` reads and sets the master's reservation on the word; ``SC`` stores only
  if that reservation is still valid and answers ``rdata = 0`` (success) or ``1`` (failure), and
  clears the reservation either way. The slave invalidates a reservation when any master writes
  the reserved word. A slave that cannot do atomics answers ``err`` to any ``amo != NONE``.
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["REQUEST_FIELDS", "AmoOp", "BusSignature", "forward_request"]

REQUEST_FIELDS = ("addr", "write", "wdata", "mask", "amo")  # a request, besides its handshake


def forward_request(dst: wiring.PureInterface, src: wiring.PureInterface) -> list:
    """Statements passing the request fields (not ``req_valid``/``req_ready``) from ``src`` to ``dst``."""
    return [getattr(dst, name).eq(getattr(src, name)) for name in REQUEST_FIELDS]


class AmoOp(enum.Enum, shape=unsigned(4)):
    """The atomic operation a data request asks the slave to perform."""

    NONE = 0
    LR = 1
    SC = 2
    SWAP = 3
    ADD = 4
    XOR = 5
    AND = 6
    OR = 7
    MIN = 8
    MAX = 9
    MINU = 10
    MAXU = 11


class BusSignature(wiring.Signature):
    """The master side of a core bus port; ``.flip()`` for the slave side."""

    def __init__(self) -> None:
        super().__init__(
            {
                "req_valid": Out(1),
                "req_ready": In(1),
                "addr": Out(32),
                "write": Out(1),
                "wdata": Out(32),
                "mask": Out(4),
                "amo": Out(AmoOp),
                "rsp_valid": In(1),
                "rdata": In(32),
                "err": In(1),
            }
        )
