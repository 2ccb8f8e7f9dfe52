"""The digits sequences and the ``pyard fptt`` commands."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cli import main
from tb.fptt.accounting import memory, op_counts, ops_summary
from tb.fptt.data import load_digits_sequences
from tb.fptt.tensors import Dims


@pytest.mark.parametrize(("stream", "steps", "inputs"), [("pixel", 64, 1), ("row", 8, 8)])
def test_digits_sequences(stream: str, steps: int, inputs: int) -> None:
    from sklearn.datasets import load_digits

    d = load_digits_sequences(stream)
    assert d.x_train.shape[1:] == (steps, inputs) and d.x_test.shape[1:] == (steps, inputs)
    assert len(d.y_train) + len(d.y_test) == 1797
    assert d.x_train.min() == 0.0 and d.x_train.max() == 1.0
    assert set(np.unique(d.y_test)) == set(range(10))
    again = load_digits_sequences(stream)
    np.testing.assert_array_equal(d.x_test, again.x_test)
    # each test sequence is an original image, pixel order row by row, divided by 16
    raw = load_digits()
    images = raw.images.reshape(1797, -1) / 16.0
    first = d.x_test[0].reshape(-1)
    matches = np.flatnonzero((images == first).all(axis=1))
    assert len(matches) >= 1 and raw.target[matches[0]] == d.y_test[0]


def test_split_seed_changes_the_split() -> None:
    a = load_digits_sequences("row", split_seed=0)
    b = load_digits_sequences("row", split_seed=1)
    assert not np.array_equal(a.y_test, b.y_test)


def test_memory_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fptt", "memory", "--K", "1,28", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    dims = Dims(1, 128, 10, 4)
    assert data["per_K"]["28"]["bf16"]["total"] == memory(784, dims, 28, "bf16").total
    assert data["per_K"]["1"]["fp32"]["params"] == 3 * dims.param_count() * 4


def test_memory_ops_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fptt", "memory", "--T", "16", "--hidden", "4", "--K", "4", "--ops", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    want = ops_summary(op_counts(16, Dims(1, 4, 10, 4), 4))
    assert data["per_K"]["4"]["gemm_macs"] == want["gemm_macs"]
    assert data["per_K"]["4"]["gemm"]["fwd_gate"]["shape_MxKxN"] == "4x5x16"


@pytest.mark.parametrize(
    "argv",
    [
        ["fptt", "memory", "--T", "10", "--K", "11"],
        ["fptt", "train", "--K", "65"],
        ["fptt", "train", "--batch", "5000"],
        ["fptt", "train", "--lr", "0"],
        ["fptt", "train", "--trunc-s", "-1"],
        ["fptt", "train", "--dataset", "mnist"],
    ],
)
def test_bad_options_are_one_line_and_status_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pyard: error:") and "\n" not in err and "Traceback" not in err


def test_train_row_stream_learns_and_writes_the_curve(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "curve.json"
    argv = ["fptt", "train", "--stream", "row", "--K", "2", "--epochs", "4", "--lr", "0.3", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("test acc") == 4
    curve = json.loads(out.read_text())["curve"]
    assert [r["epoch"] for r in curve] == [1, 2, 3, 4]
    assert curve[-1]["test_acc"] > 0.6  # chance is 0.1
    assert curve[-1]["train_loss"] < curve[0]["train_loss"]
