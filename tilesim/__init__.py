"""The tile simulator: the tile and a cycle-level main memory in one Verilator model, driven by a
C++ harness (``tile_main.cpp``), so benchmarks and long regressions run without Python per cycle."""
