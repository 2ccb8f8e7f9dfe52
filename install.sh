#!/usr/bin/env bash
# Install pyard on a fresh Debian machine: the system headers Verilator's FST waveform writer
# compiles against (lz4, zlib), ccache (every Verilator model compiles the same runtime), the GNU
# RISC-V compiler (firmware builds with it when present, else with zig's clang from the ziglang
# wheel; the tests use both), then the Python package with every tool it uses (pip extras).
set -euo pipefail
cd "$(dirname "$0")"

missing=()
for pkg in liblz4-dev zlib1g-dev make g++ ccache perl gcc-riscv64-unknown-elf; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

python3 -m pip install -e ".[dev]" "$@"
