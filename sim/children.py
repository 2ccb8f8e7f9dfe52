"""Child processes that never outlive an interrupted pyard.

Each child (Verilator, make and its compilers, the simulator, Yosys) runs in a process group of its
own. If the caller is interrupted (Ctrl-C, SIGTERM turned into an exception by sim/cli.py) or fails
while the child runs, the whole group is killed and reaped, so no make, compiler or simulator is
left running behind a pyard that has exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["popen", "run"]


@contextmanager
def popen(cmd: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen]:
    """``subprocess.Popen(cmd, **kwargs)`` in its own process group, killed with everything it
    started if the body raises; always waited for on the way out."""
    proc = subprocess.Popen(list(cmd), start_new_session=True, **kwargs)
    try:
        yield proc
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()


def run(cmd: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, **kwargs)`` (no check), as :func:`popen` does it."""
    with popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs) as proc:
        out, err = proc.communicate()
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
