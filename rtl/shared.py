"""Components that are converted to Verilog once and instantiated many times (the mesh's PEs).

Amaranth flattens a whole design into one netlist before it prints Verilog, so a 64x64 mesh would
be elaborated, checked and printed as 4,096 separate copies of the PE, and Verilator would then
compile 4,096 copies of its code. Inside :func:`convert` a shared component is instead converted
once into a Verilog module of its own, and the design holds instances of that module. Outside it
(Amaranth's simulator, a plain ``amaranth.back.verilog.convert``) the component is an ordinary
submodule, so a design behaves the same either way.

The instance is clocked by its parent's ``sync`` domain (after any ``DomainRenamer``) and reset by
that domain's reset, or never when the domain has none. ``ResetInserter`` and ``EnableInserter``
do not reach into an instance: do not wrap a design that holds shared components in them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from amaranth.back import rtlil, verilog
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring

__all__ = ["add_shared", "convert"]


@dataclass
class _Module:
    signature: wiring.Signature
    ports: frozenset[str]  # the port names of the generated module (clk and rst only if it is clocked)
    verilog: str


@dataclass
class _Collector:
    top: str
    modules: dict[str, _Module] = field(default_factory=dict)

    def module(
        self, key: str, make: Callable[[], wiring.Component], hier_block: bool, no_inline: bool
    ) -> tuple[str, _Module]:
        """The Verilog module of the component ``key`` names, converted on first use."""
        name = f"{self.top}_{key}"  # one underscore: Verilator escapes "__" in module names
        if name not in self.modules:
            component = make()
            # Internal attributes off: the module must not also claim to be the file's top.
            text = verilog.convert(component, name=name, emit_src=False, strip_internal_attrs=True)
            header = re.search(rf"^module {re.escape(name)}\(([^)]*)\);", text, re.M)
            assert header, f"no module header for {name} in the generated Verilog"
            ports = frozenset(p.strip() for p in header[1].split(","))
            # Verilator builds a hierarchical block once and links it into every instance when it
            # runs with --hierarchical (sim/build.py); a module not inlined is one function that
            # every instance calls in a flat build. Other tools read comments.
            meta = [("hier_block", hier_block), ("no_inline_module", no_inline)]
            comments = "".join(f" /*verilator {word}*/" for word, wanted in meta if wanted)
            text = text[: header.end()] + comments + text[header.end() :]
            self.modules[name] = _Module(component.signature, ports, text)
        return name, self.modules[name]


_active: ContextVar[_Collector | None] = ContextVar("pyard_shared_modules", default=None)


@contextmanager
def _collecting(top: str) -> Iterator[_Collector]:
    collector = _Collector(top)
    token = _active.set(collector)
    try:
        yield collector
    finally:
        _active.reset(token)


def convert(component: wiring.Component, name: str) -> str:
    """Verilog of ``component`` as module ``name``, followed by the modules of its shared components."""
    with _collecting(name) as collector, _zero_memories_left_uninitialised():
        text = verilog.convert(component, name=name, emit_src=False)
        return text + "".join(module.verilog for module in collector.modules.values())


@contextmanager
def _zero_memories_left_uninitialised() -> Iterator[None]:
    """Convert memories whose initial contents are all zero without an initial value.

    Zero is what block RAM holds after configuration and what Verilator starts from, but Amaranth
    0.5's RTLIL backend passes a memory's initial contents to Yosys one net per bit (3.4 M nets and
    about 40 % of the conversion time of a SoC with a 256 KiB scratchpad), and Yosys then writes one
    Verilog statement per row, which it reads back row by row in synthesis (hours for a 256 KiB
    scratchpad). A memory with other contents (a ROM) is converted as before. Amaranth has no option
    for this, so the backend's ``emit_memory`` (which only adds the initial-contents cell) is
    wrapped for the duration of one conversion; ``amaranth<0.6`` in pyproject.toml pins the API.
    """
    emitter = rtlil.ModuleEmitter
    original = emitter.emit_memory

    def emit_memory(self, cell_idx, cell) -> None:
        if any(cell.init):
            original(self, cell_idx, cell)

    emitter.emit_memory = emit_memory
    try:
        yield
    finally:
        emitter.emit_memory = original


def add_shared(
    m: Module,
    name: str,
    key: str,
    make: Callable[[], wiring.Component],
    *,
    hier_block: bool = False,
    no_inline: bool = False,
):
    """Add the submodule ``name`` built by ``make()``; return an object with its ports.

    ``key`` names the component's Verilog module and must identify everything ``make()`` depends
    on: components with the same key share one module. ``hier_block`` marks the module as a
    Verilator hierarchical block, ``no_inline`` as one Verilator keeps out of line in a flat build
    (``key`` must then tell such modules apart too). Outside :func:`convert` this is simply
    ``m.submodules[name] = make()``.
    """
    collector = _active.get()
    if collector is None:
        component = make()
        m.submodules[name] = component
        return component
    module_name, module = collector.module(key, make, hier_block, no_inline)
    interface = module.signature.create(path=(name,))
    ports = {}
    for path, member, value in module.signature.flatten(interface):
        direction = "i" if member.flow == wiring.In else "o"
        ports[f"{direction}_{'__'.join(map(str, path))}"] = value
    if "clk" in module.ports:
        ports["i_clk"] = ClockSignal()
    if "rst" in module.ports:
        ports["i_rst"] = ResetSignal(allow_reset_less=True)
    m.submodules[name] = Instance(module_name, **ports)
    return interface
