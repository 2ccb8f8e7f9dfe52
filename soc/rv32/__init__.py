"""pyard's own RV32IMA + Zicsr machine-mode core (see ``docs/core.md``)."""

from .bus import AmoOp, BusSignature
from .core import Core, CoreConfig

__all__ = ["AmoOp", "BusSignature", "Core", "CoreConfig"]
