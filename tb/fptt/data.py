"""scikit-learn's bundled 8x8 digits as pixel or row sequences (no download needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Stream = Literal["pixel", "row"]
STREAMS: tuple[Stream, ...] = ("pixel", "row")
DATASETS = ("digits",)


@dataclass(frozen=True)
class SequenceData:
    """Train and test sequences x (N, T, I) in [0, 1] and labels y (N,), one label per sequence."""

    name: str
    stream: Stream
    x_train: npt.NDArray[np.float32]
    y_train: npt.NDArray[np.int64]
    x_test: npt.NDArray[np.float32]
    y_test: npt.NDArray[np.int64]
    classes: int

    @property
    def steps(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def inputs(self) -> int:
        return int(self.x_train.shape[2])


def load_digits_sequences(stream: Stream = "pixel", test_fraction: float = 0.2, split_seed: int = 0) -> SequenceData:
    """Digits streamed one pixel per step (T = 64, I = 1) or one row per step (T = 8, I = 8).

    Pixels are 0..16 in the data set and divided by 16 (exact in bf16). The split is stratified
    and fixed by ``split_seed``, independent of the training seed.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {', '.join(STREAMS)}, not {stream!r}")
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)  # (N, 8, 8)
    x = images.reshape(len(images), 64, 1) if stream == "pixel" else images
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, random_state=split_seed, stratify=y)
    return SequenceData("digits", stream, x_tr, y_tr, x_te, y_te, classes=10)
