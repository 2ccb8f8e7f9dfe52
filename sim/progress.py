"""Progress of long steps on stderr: the phase being run, its time, and a bar where its size is known.

Drawn with rich, only when stderr is a terminal and the command was not given ``--json`` or
``--quiet`` (:func:`set_quiet`), so logs, pipes and CI stay clean. Phases nest: the first one
opens a display and the ones inside it add lines to it (a SoC build shows its Verilog generation,
Verilation and C++ compile one under the other, each with its time).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

__all__ = ["Phase", "enabled", "phase", "set_quiet", "silenced"]

_quiet = False
_display: Progress | None = None
_depth = 0


def set_quiet(quiet: bool) -> None:
    """Switch progress off (``--json``, ``--quiet``) or back on."""
    global _quiet
    _quiet = quiet


@contextmanager
def silenced() -> Iterator[None]:
    """No new progress display inside the block (work run under a display of its own, such as a
    sweep's points); the previous setting comes back after it."""
    global _quiet
    before, _quiet = _quiet, True
    try:
        yield
    finally:
        _quiet = before


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


class _Bar(BarColumn):
    """A bar only for phases whose size is known."""

    def render(self, task: Task) -> Text:
        return super().render(task) if task.fields.get("unit") else Text("")


class _Count(ProgressColumn):
    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit")
        return Text(f"{int(task.completed)}/{int(task.total or 0)} {unit}" if unit else "")


class Phase:
    """A running phase: ``advance()`` counts done items, ``total()`` sets how many there are."""

    def __init__(self, display: Progress | None = None, task: int = 0) -> None:
        self._display, self._task = display, task

    def advance(self, n: int = 1) -> None:
        if self._display is not None:
            task = self._display.tasks[self._task]
            total = max(task.total or 0, task.completed + n)  # a count beyond the estimate raises it
            self._display.update(self._task, completed=task.completed + n, total=total)

    def total(self, n: int, unit: str) -> None:
        if self._display is not None:
            self._display.update(self._task, total=n, unit=unit)

    def describe(self, text: str) -> None:
        """Replace the phase's text (e.g. a sweep's points running and failed, its time left)."""
        if self._display is not None:
            self._display.update(self._task, description=text)


def _open() -> Progress:
    display = Progress(
        SpinnerColumn(finished_text="[green]✓"),
        TextColumn("{task.description}"),
        _Bar(bar_width=30),
        _Count(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        redirect_stdout=False,  # the program's own output (pyard run's console) must stay on stdout
        redirect_stderr=False,
    )
    display.start()
    return display


@contextmanager
def phase(name: str, total: int | None = None, unit: str = "") -> Iterator[Phase]:
    """Show ``name`` while the block runs; with ``total`` (of ``unit``s), a bar the block advances."""
    global _display, _depth
    if not enabled():
        yield Phase()
        return
    if _display is None:
        _display = _open()
    _depth += 1
    task = _display.add_task(name, total=total, unit=unit if total is not None else "")
    try:
        yield Phase(_display, task)
        done = _display.tasks[task].total or 1
        _display.update(task, total=done, completed=done)
    finally:
        _depth -= 1
        if _depth == 0:
            _display.stop()
            _display = None
