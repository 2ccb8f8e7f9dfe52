"""Shared pytest setup: the scale of long regressions (PYARD_SCALE=small in CI), and tile simulators
built without profile-guided optimisation (a second compile that the tests' short runs never win
back; tests/test_tilesim.py builds one with it)."""

import os

import pytest

os.environ.setdefault("PYARD_SIM_PGO", "0")  # inherited by the CLI runs the tests start too


@pytest.fixture(scope="session")
def scale() -> str:
    return os.environ.get("PYARD_SCALE", "full")
