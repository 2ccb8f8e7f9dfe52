"""Where pyard keeps what it builds: ``PYARD_BUILD_DIR`` if set, else ``build/`` in the checkout.

Every cache (Verilator models, SoC simulators, firmware, synthesis results) lives below it.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build_root() -> Path:
    return Path(os.environ.get("PYARD_BUILD_DIR") or REPO / "build")
