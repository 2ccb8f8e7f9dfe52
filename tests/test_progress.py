"""Progress of long steps: on stderr when it is a terminal, never under --quiet / --json or into a
pipe, so logs and CI output stay clean (sim/progress.py)."""

import os
import pty
import subprocess
import sys

import pytest

PYARD = [sys.executable, "-m", "sim.cli"]


def stderr_on_terminal(*args: str) -> tuple[int, str]:
    """Run pyard with its stderr on a pseudo-terminal; its exit status and everything it wrote there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*PYARD, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end of the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def test_progress_shown_on_a_terminal(tmp_path) -> None:
    status, err = stderr_on_terminal("verilog", "--config", "2x3-int8", "-o", str(tmp_path))
    assert status == 0
    assert "Generating Verilog: mesh 2x3-int8" in err
    assert "✓" in err  # the phase is shown as finished


@pytest.mark.parametrize("quiet", [["--quiet"], ["-q"]], ids=["after", "before"])
def test_no_progress_when_quiet(tmp_path, quiet: list[str]) -> None:
    args = ["verilog", "--config", "2x3-int8", "-o", str(tmp_path)]
    args = [*args, *quiet] if quiet == ["--quiet"] else [*quiet, *args]
    status, err = stderr_on_terminal(*args)
    assert status == 0
    assert err == ""


def test_no_progress_into_a_pipe(tmp_path) -> None:
    proc = subprocess.run([*PYARD, "verilog", "--config", "2x3-int8", "-o", str(tmp_path)], capture_output=True)
    assert proc.returncode == 0
    assert proc.stderr == b""
    assert b"generated in" in proc.stdout
