"""Shared pytest setup: the scale of long regressions (PYARD_SCALE=small in CI)."""

import os

import pytest


@pytest.fixture(scope="session")
def scale() -> str:
    return os.environ.get("PYARD_SCALE", "full")
