"""FPTT-K LSTM training reference in NumPy (thesis 002: eqs. 4.1-4.21, Algorithms 3 and 4).

Layout, precision contract and figures: docs/fptt.md.
"""

from .arith import PRECISIONS, Arith, round_bf16
from .model import backward, cell_backward, forward, fptt_update, head, init_params, init_state, partition_bounds
from .tensors import BackwardOut, Dims, FpttState, HeadOut, Hyper, Params, PartitionStates
from .train import evaluate, train_epoch, train_sequence

__all__ = [
    "PRECISIONS",
    "Arith",
    "BackwardOut",
    "Dims",
    "FpttState",
    "HeadOut",
    "Hyper",
    "Params",
    "PartitionStates",
    "backward",
    "cell_backward",
    "evaluate",
    "forward",
    "fptt_update",
    "head",
    "init_params",
    "init_state",
    "partition_bounds",
    "round_bf16",
    "train_epoch",
    "train_sequence",
]
