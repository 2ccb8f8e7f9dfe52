"""pyard as a deployment target: a host runtime for tensor programs on simulated tiles (GPTPU's
role; docs/runtime.md)."""

from runtime.api import Buffer, Runtime, Task
from runtime.device import DeviceError, DeviceHung

__all__ = ["Buffer", "DeviceError", "DeviceHung", "Runtime", "Task"]
