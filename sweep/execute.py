"""Run a sweep's points: cached results first, the rest serially or on Dask, one progress line.

Each point's result is stored (``<build>/sweep/points/<key>.json``) as soon as it arrives, so a
sweep that is interrupted resumes where it stopped and a re-run recomputes only the points whose
key (design, workload, sources, tools: sweep/measure.py) changed. Failed points are not stored:
they run again next time.

On Dask, every simulator build a point needs (one per design) is a task of its own, and the
points of that design depend on it: the build runs once, before its points fan out to the workers.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim import progress
from sweep.measure import point_key, prepare, prepare_key, run_point, source_hashes
from sweep.spec import Point, SweepSpec

__all__ = ["Outcome", "cache_dir", "run_sweep"]


@dataclass
class Outcome:
    point: Point
    key: str
    status: str  # "ok" or "failed"
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0  # wall time of the measurement (when it was made)
    cached: bool = False


def cache_dir() -> Path:
    from sim.paths import build_root

    return build_root() / "sweep" / "points"


def _load(directory: Path, point: Point, key: str) -> Outcome | None:
    path = directory / f"{key}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):  # absent, or cut short by a crash: measure again
        return None
    return Outcome(point, key, "ok", record["metrics"], seconds=record["seconds"], cached=True)


def _store(directory: Path, outcome: Outcome) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{outcome.key}.json"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    record = {"point": outcome.point.to_dict(), "metrics": outcome.metrics, "seconds": outcome.seconds}
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)  # atomic: an interrupted write never leaves half a result


def run_sweep(
    spec: SweepSpec,
    *,
    scheduler: str | None = None,
    serial: bool = False,
    workers: int | None = None,
    directory: Path | None = None,
) -> list[Outcome]:
    """Every point of ``spec``, in its order: from the cache, or measured serially (``serial``), on
    the Dask cluster at ``scheduler``, or on a LocalCluster of ``workers`` processes (default: one
    per core)."""
    directory = directory or cache_dir()
    points = spec.points()
    sources = source_hashes()
    keys = [point_key(p, sources, spec.latency, spec.max_cycles) for p in points]
    found = {k: o for p, k in zip(points, keys, strict=True) if (o := _load(directory, p, k)) is not None}
    todo = list({k: p for p, k in zip(points, keys, strict=True) if k not in found}.items())
    results = dict(found)

    def done(key: str, point: Point, raw: dict[str, Any]) -> None:
        outcome = Outcome(point, key, raw["status"], raw.get("metrics", {}), raw.get("error", ""), raw["seconds"])
        if outcome.status == "ok":
            _store(directory, outcome)
        results[key] = outcome

    if todo:
        with _Progress(len(todo)) as bar:
            if serial:
                _serial(spec, todo, bar, done)
            else:
                _dask(spec, todo, bar, done, scheduler, workers)
    return [results[k] for k in keys]


class _Progress:
    """The sweep's one line: points done of all, running, failed, and the time left at the rate so far."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.failed, self.running = total, 0, 0, 0
        self.start = time.monotonic()
        self._phase: progress.Phase | None = None

    def __enter__(self) -> _Progress:
        self._context = progress.phase("sweep", self.total, "points")
        self._phase = self._context.__enter__()
        self.update()
        return self

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(*exc)

    def finished(self, failed: bool, running: int) -> None:
        self.done += 1
        self.failed += failed
        self.running = running
        assert self._phase is not None
        self._phase.advance()
        self.update()

    def update(self) -> None:
        assert self._phase is not None
        left = self.total - self.done
        rate = self.done / (time.monotonic() - self.start) if self.done else 0.0
        eta = _duration(left / rate) if rate else "?"
        self._phase.describe(f"sweep: {self.running} running, {self.failed} failed, {eta} left")


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes}m{s:02d}s" if minutes else f"{s}s"


Done = Callable[[str, Point, dict[str, Any]], None]


def _serial(spec: SweepSpec, todo: list[tuple[str, Point]], bar: _Progress, done: Done) -> None:
    built: dict[str, str | None] = {}
    for n, (key, point) in enumerate(todo):
        bar.running = 1
        bar.update()
        build = prepare_key(point)
        if build is not None and build not in built:
            built[build] = prepare(point, spec.latency)
        raw = run_point(point, spec.latency, spec.max_cycles, built.get(build) if build else None)
        done(key, point, raw)
        bar.finished(raw["status"] != "ok", running=int(n + 1 < len(todo)))


def _dask(
    spec: SweepSpec,
    todo: list[tuple[str, Point]],
    bar: _Progress,
    done: Done,
    scheduler: str | None,
    workers: int | None,
) -> None:
    from distributed import as_completed

    with _client(scheduler, workers) as client:
        slots = max(1, sum(client.nthreads().values()))
        builds: dict[str, Any] = {}
        futures = {}
        for key, point in todo:
            build = prepare_key(point)
            if build is not None and build not in builds:
                builds[build] = client.submit(prepare, point, spec.latency, pure=False)
            dep = builds[build] if build is not None else None
            futures[client.submit(run_point, point, spec.latency, spec.max_cycles, dep, pure=False)] = (key, point)
        left = len(futures)
        bar.running = min(slots, left)
        bar.update()
        for future in as_completed(futures):
            key, point = futures[future]
            try:
                raw = future.result()
            except Exception as err:  # the worker died or the cluster lost the task
                raw = {"status": "failed", "error": f"{type(err).__name__}: {err}"[:400], "seconds": 0.0}
            done(key, point, raw)
            left -= 1
            bar.finished(raw["status"] != "ok", running=min(slots, left))


@contextmanager
def _client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A client of the cluster at ``scheduler``, or of a LocalCluster of worker processes (one
    thread each: a point is one simulator process) that is closed afterwards."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler, timeout="30s") as client:
            yield client
        return
    n = workers or os.cpu_count() or 1
    # No dashboard (it needs bokeh); no memory limit: the simulators and compilers a point runs are
    # child processes the nanny does not see, and the worker itself stays small.
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        memory_limit=0,
        silence_logs=logging.ERROR,
    )
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def summary(outcomes: list[Outcome]) -> str:
    failed = sum(o.status != "ok" for o in outcomes)
    cached = sum(o.cached for o in outcomes)
    return f"{len(outcomes)} points: {len(outcomes) - failed} ok ({cached} from the cache), {failed} failed"


def warn_failures(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if o.status != "ok":
            print(f"pyard: sweep: {o.point.design} {o.point.workload} failed: {o.error}", file=sys.stderr)
