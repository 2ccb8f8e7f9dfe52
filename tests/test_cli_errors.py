"""Every ``pyard`` command refuses bad arguments with one line and exit status 2 (never a
traceback); Ctrl-C and SIGTERM stop a command with a short line, its simulator child and temporary
folder gone. The commands are found by walking the parser, so a new one is covered at once."""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.cli import build_parser, main

REPO = Path(__file__).resolve().parent.parent


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every runnable command path (``("bench", "gemm")`` …) of the parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [prefix]
    return [path for name, child in subs[0].choices.items() for path in commands(child, (*prefix, name))]


def options(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


ALL = commands(build_parser())
# Values no option accepts: a number option gets one beyond its range or not a number at all.
BAD_VALUES = {int: "-5", float: "nan"}


def bad_cases() -> list[tuple[str, list[str]]]:
    """(id, argv) pairs: an unknown option for every command, and a bad value for every option that
    takes one (numbers out of range or not numbers, paths that cannot be written, unknown names)."""
    cases = []
    root = build_parser()
    for path in ALL:
        cases.append((" ".join(path) + " --no-such-option", [*path, "--no-such-option"]))
        for action in options(root, path)._actions:
            if not action.option_strings or action.nargs == 0 or action.dest in ("help", "quiet"):
                continue
            flag = action.option_strings[-1]
            for value in ("not-a-number-or-name", "-5", "0", "nan", "/nonexistent-dir/x", ","):
                cases.append((f"{' '.join(path)} {flag} {value}", [*path, flag, value]))
    return cases


def _outcome(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("path", ALL, ids=[" ".join(p) for p in ALL])
def test_every_command_refuses_an_unknown_option_in_one_line(path, capsys) -> None:
    code, err = _outcome([*path, "--no-such-option"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err


def test_bad_values_are_one_line_or_accepted(capsys, monkeypatch) -> None:
    """Each option given a value it may not take: exit 2 with one line. A value that is valid for
    an option (a name, a positive number) must get past parsing; the command then stops on its own
    check of the rest, never with a traceback. Commands are not run: their function is replaced."""
    ran: list[argparse.Namespace] = []
    parser = build_parser()
    for path in ALL:
        options(parser, path).set_defaults(func=lambda args: ran.append(args) or 0)
    monkeypatch.setattr("sim.cli.build_parser", lambda: parser)
    refused = 0
    for label, argv in bad_cases():
        code, err = _outcome(argv, capsys)
        assert "Traceback" not in err, label
        if code == 2:
            refused += 1
            assert err.count("\n") == 1, f"{label}: {err}"
        else:
            assert code == 0, f"{label}: exit {code}: {err}"
    assert refused > len(ALL) * 3


@pytest.mark.parametrize(
    "argv",
    [
        ["verilog", "--rows", "64", "--cols", "64", "--sp-kib", "1", "--sp-banks", "16", "--top", "tile"],
        ["bench", "gemm", "--latency", "0"],
        ["bench", "sim-speed", "--iterations", "-5"],
        ["fptt", "sweep", "--K", ","],
        ["fptt", "train", "--json", "/nonexistent-dir/curve.json"],
        ["fptt", "train", "--lr", "nan"],
        ["fptt", "train", "--lr", "inf"],
        ["fptt", "memory", "--T", "0"],
        ["synth", "--depth", "0"],
    ],
)
def test_the_issues_cases(argv, capsys, tmp_path) -> None:
    code, err = _outcome([*argv], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err


def test_output_path_that_is_a_file_or_not_writable(tmp_path, capsys) -> None:
    afile = tmp_path / "file"
    afile.write_text("")
    for out in (str(afile), str(afile / "below")):
        code, err = _outcome(["verilog", "-o", out], capsys)
        assert code == 2 and err.count("\n") == 1, err


def test_non_utf8_config_file(tmp_path, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"rows": 4, "name": "\xff\xfe"}')
    code, err = _outcome(["verilog", "--config", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "UTF-8" in err, err


def test_unknown_toolchain(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PYARD_TOOLCHAIN", "tcc")
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    code, err = _outcome(["run", "--config", "4x4-int8", str(tmp_path / "p.c")], capsys)
    assert code == 2 and err.count("\n") == 1 and "PYARD_TOOLCHAIN" in err, err


FOREVER = "int main(void) { for (;;) { } }\n"


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _cmdline(pid: int) -> str:
    """A process's command line, or "" once it has gone (pgrep lists children that may exit first)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _descendants(pid: int) -> list[int]:
    found = _children(pid)
    return found + [d for child in found for d in _descendants(child)]


def _alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False


def _wait_for_simulator(proc: subprocess.Popen) -> list[int]:
    """Wait until ``pyard run`` has started its simulator; return every process it runs then (the
    simulator, or on a cold cache the SoC's build: make and its compilers), which must go with it."""
    deadline = time.monotonic() + 600  # a cold SoC build first
    sims: list[int] = []
    while time.monotonic() < deadline and not sims:
        time.sleep(0.5)
        sims = [p for p in _children(proc.pid) if "soc_sim" in _cmdline(p)]
        assert proc.poll() is None, proc.stderr.read()
    assert sims, "the simulator never started"
    return _descendants(proc.pid)


@pytest.mark.parametrize(
    ("sig", "status", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_signal_stops_pyard_run_and_its_simulator(sig, status, word, tmp_path) -> None:
    program = tmp_path / "forever.c"
    program.write_text(FOREVER)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    argv = [sys.executable, "-m", "sim.cli", "run", "--config", "4x4-int8", "--cores", "2"]
    # Started with SIGINT ignored, as some runners start their jobs (the setting is inherited across
    # exec): pyard must still stop on it.
    proc = subprocess.Popen(
        [*argv, "--max-cycles", str(10**15), str(program)],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    started: list[int] = []
    try:
        started = _wait_for_simulator(proc)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == status
        assert proc.stderr.read().strip().endswith(f"pyard: {word}")
        time.sleep(0.5)  # a killed process group is reaped by init
        assert [pid for pid in started if _alive(pid)] == []
    finally:  # a failed check must not leave an endless simulation running
        for pid in {*started, *_descendants(proc.pid), proc.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("pyard-run-")]
