"""Where pyard keeps what it builds: ``PYARD_BUILD_DIR`` if set, else ``build/`` in the checkout;
and how the environment's on/off switches of the builds (``PYARD_WAVES``, ``PYARD_SIM_PGO``,
``PYARD_CCACHE``) are read.

Every cache (Verilator models, SoC simulators, firmware, synthesis results) lives below it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build_root() -> Path:
    return Path(os.environ.get("PYARD_BUILD_DIR") or REPO / "build")


def env_flag(name: str, default: bool) -> bool:
    """An on/off environment variable: true for 1, yes, true; false for 0, no, false (any case);
    ``default`` when unset or anything else."""
    value = os.environ.get(name, "").lower()
    return True if value in ("1", "yes", "true") else False if value in ("0", "no", "false") else default
