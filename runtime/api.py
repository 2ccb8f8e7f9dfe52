"""The host runtime's API, in the spirit of GPTPU's OpenCtpu (its Table 2):

==============================  ==========================================================
OpenCtpu                        here
==============================  ==========================================================
``openctpu_alloc_dimension``    the shape of a NumPy array
``openctpu_create_buffer``      ``rt.buffer(array)`` (a host buffer; data moves per block)
``openctpu_enqueue(kernel)``    ``rt.enqueue(kernel, *args)`` → :class:`Task`
``openctpu_invoke_operator``    ``rt.invoke("gemm", a, b, precision="int8")`` or ``rt.gemm(a, b)``
``openctpu_sync``               ``rt.sync()``
``openctpu_wait(task)``         ``rt.wait(task)``
==============================  ==========================================================

Devices are simulated tiles (runtime/device.py), ``devices`` of each tile type, started on first
use. Each device has a thread that takes the next queued block instruction (first come first
served), so operators and tasks spread over the devices without changes to the caller's code.
Operators within a task run in order; tasks run in parallel.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from runtime import ops
from runtime.device import Device
from runtime.kernels import Block

__all__ = ["MAX_DEVICES", "Buffer", "Runtime", "Task"]

MAX_DEVICES = 8
DEFAULT_BUDGET = 50_000_000  # device cycles one block instruction may take before it is stopped
DEFAULT_BLOCK = 64  # the tensorizer's largest block edge (GEMM M, K, N; element-wise rows; conv pixels)
SCALINGS = ("balanced", "tensor")  # int8 GEMM / conv2D factors (runtime/quant.py)
OPERATORS = ("gemm", "fully_connected", "conv2d", *ops.ELEMENTWISE, "mean", "max", "crop", "ext")


@dataclass
class Buffer:
    """A tensor buffer (``openctpu_create_buffer``): host data, moved to a device per block."""

    array: npt.NDArray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape


Task = Future  # enqueue's handle: rt.wait(task) returns what the kernel function returned


class _Pool:
    """The devices of one tile type and the queue they take block instructions from."""

    def __init__(self, cfg: AccelConfig, count: int, budget: int, block: int, scaling: str) -> None:
        self.cfg, self.budget, self.block, self.scaling = cfg, budget, block, scaling
        self._queue: queue.SimpleQueue[tuple[Callable[[Device], Block], Future] | None] = queue.SimpleQueue()
        self.devices: list[Device] = []
        self._threads: list[threading.Thread] = []
        try:
            for index in range(count):
                self.devices.append(Device(cfg, index))
        except BaseException:
            self.close()
            raise
        self.mem_bytes = self.devices[0].mem_bytes
        for device in self.devices:
            thread = threading.Thread(
                target=self._serve, args=(device,), daemon=True, name=f"pyard-device-{device.index}"
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, instruction: Callable[[Device], Block]) -> Future[Block]:
        future: Future[Block] = Future()
        self._queue.put((instruction, future))
        return future

    def _serve(self, device: Device) -> None:
        while (item := self._queue.get()) is not None:
            instruction, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(instruction(device))
                except BaseException as error:  # handed to the caller waiting on the block
                    future.set_exception(error)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        for device in self.devices:
            device.close()


class Runtime:
    """Devices of up to two tile types (an int8 and a bf16 config); ``precision`` per call picks one.

    >>> with Runtime("4x4-int8", devices=2) as rt:
    ...     c = rt.gemm(a, b)                       # int8 with GPTPU's scale factors
    """

    def __init__(
        self,
        config: str | AccelConfig | Sequence[str | AccelConfig] = "4x4-int8",
        devices: int = 1,
        *,
        budget: int = DEFAULT_BUDGET,
        block: int = DEFAULT_BLOCK,
        scaling: str = "balanced",
    ) -> None:
        if not isinstance(devices, int) or not 1 <= devices <= MAX_DEVICES:
            raise ValueError(f"devices: must be 1-{MAX_DEVICES}, got {devices!r}")
        if not isinstance(block, int) or not 1 <= block <= 65535:
            raise ValueError(f"block: must be 1-65535, got {block!r}")
        if scaling not in SCALINGS:
            raise ValueError(f"scaling: must be one of {', '.join(SCALINGS)}, got {scaling!r}")
        if not isinstance(budget, int) or budget < 1:
            raise ValueError(f"budget: must be a positive number of cycles, got {budget!r}")
        configs = [config] if isinstance(config, str | AccelConfig) else list(config)
        self.configs: dict[str, AccelConfig] = {}
        for c in configs:
            cfg = c if isinstance(c, AccelConfig) else AccelConfig.from_name(c)
            if cfg.dtype in self.configs:
                raise ValueError(f"config: one config per tile type (int8, bf16), got two {cfg.dtype}")
            self.configs[cfg.dtype] = cfg
        self.default_precision = next(iter(self.configs))
        self.devices, self.budget, self.block, self.scaling = devices, budget, block, scaling
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._tasks: list[Task] = []
        self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="pyard-task")

    # -- devices -----------------------------------------------------------------------------

    def pool(self, precision: str | None = None) -> _Pool:
        """The devices for ``precision`` (started on first use)."""
        precision = precision or self.default_precision
        if precision not in self.configs:
            raise ValueError(
                f"precision: must be one of {', '.join(self.configs)} (the opened tile types), got {precision!r}"
            )
        with self._lock:
            if precision not in self._pools:
                self._pools[precision] = _Pool(
                    self.configs[precision], self.devices, self.budget, self.block, self.scaling
                )
            return self._pools[precision]

    def device_cycles(self) -> dict[str, list[int]]:
        """Cycles each device has run so far, per tile type."""
        return {p: [d.cycles for d in pool.devices] for p, pool in self._pools.items()}

    def device_bytes(self) -> dict[str, list[tuple[int, int]]]:
        """Bytes the host has written to and read from each device's memory so far, per tile type."""
        return {p: [(d.bytes_written, d.bytes_read) for d in pool.devices] for p, pool in self._pools.items()}

    def close(self) -> None:
        """Finish the queued tasks and stop every device."""
        self._executor.shutdown(wait=True)
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- OpenCtpu ----------------------------------------------------------------------------

    def buffer(self, data: npt.ArrayLike) -> Buffer:
        return Buffer(np.asarray(data))

    def enqueue(self, kernel: Callable[..., Any], *args: Any) -> Task:
        """Run ``kernel(*args)`` as a task (in parallel with other tasks); returns its handle."""
        task = self._executor.submit(kernel, *args)
        self._tasks.append(task)
        return task

    def wait(self, task: Task) -> Any:
        """Block until ``task`` returns; its value (or its exception, raised here)."""
        return task.result()

    def sync(self) -> None:
        """Block until every enqueued task has finished; the first failure is raised."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.result()

    def invoke(self, op: str, *args: Any, precision: str | None = None, **kwargs: Any) -> Any:
        """Run operator ``op`` (GPTPU's Table 1) on the devices of ``precision``."""
        if op not in OPERATORS:
            raise ValueError(f"op: must be one of {', '.join(OPERATORS)}, got {op!r}")
        return getattr(self, op)(*args, precision=precision, **kwargs)

    # -- operators (runtime/ops.py) ----------------------------------------------------------

    def gemm(self, a: Any, b: Any, *, precision: str | None = None, digits: int = 1) -> npt.NDArray[np.float64]:
        """``a @ b``; ``digits=2`` sends the operands as two digits each (three products on the
        tile, 15-16 bits of operand precision: runtime/quant.py)."""
        return ops.gemm(self.pool(precision), _array(a), _array(b), digits)

    def fully_connected(
        self, x: Any, w: Any, *, precision: str | None = None, digits: int = 1
    ) -> npt.NDArray[np.float64]:
        """``x @ w`` for a vector or a batch of rows ``x``; ``digits`` as :meth:`gemm`."""
        x = _array(x)
        out = ops.gemm(self.pool(precision), x.reshape(1, -1) if x.ndim == 1 else x, _array(w), digits)
        return out[0] if x.ndim == 1 else out

    def conv2d(self, x: Any, w: Any, *, stride: int = 1, pad: int = 0, precision: str | None = None) -> npt.NDArray:
        return ops.conv2d(self.pool(precision), _array(x), _array(w), stride, pad)

    def add(self, a: Any, b: Any, *, precision: str | None = None) -> npt.NDArray[np.float64]:
        return ops.elementwise(self.pool(precision), "add", _array(a), _array(b))

    def sub(self, a: Any, b: Any, *, precision: str | None = None) -> npt.NDArray[np.float64]:
        return ops.elementwise(self.pool(precision), "sub", _array(a), _array(b))

    def mul(self, a: Any, b: Any, *, precision: str | None = None) -> npt.NDArray[np.float64]:
        return ops.elementwise(self.pool(precision), "mul", _array(a), _array(b))

    def relu(self, a: Any, *, precision: str | None = None) -> npt.NDArray[np.float64]:
        return ops.elementwise(self.pool(precision), "relu", _array(a))

    def tanh(self, a: Any, *, precision: str | None = None) -> npt.NDArray[np.float64]:
        return ops.elementwise(self.pool(precision), "tanh", _array(a))

    def mean(self, a: Any, *, precision: str | None = None) -> float:
        return ops.reduce(self.pool(precision), "mean", _array(a))

    def max(self, a: Any, *, precision: str | None = None) -> float:
        return ops.reduce(self.pool(precision), "max", _array(a))

    def crop(
        self, a: Any, top: int, left: int, height: int, width: int, *, precision: str | None = None
    ) -> npt.NDArray:
        return ops.crop(_array(a), top, left, height, width)

    def ext(self, a: Any, rows: int, cols: int, *, precision: str | None = None) -> npt.NDArray:
        return ops.ext(_array(a), rows, cols)


def _array(x: Any) -> npt.NDArray:
    return x.array if isinstance(x, Buffer) else np.asarray(x)
