"""The multi-TPU paper's three ways to split a model into pipeline segments (§V).

* ``equal``: equal layer counts (the first segments take one more when they do not divide).
* ``profiled``: the Edge TPU compiler's profiling partitioner as the paper describes it: start from
  the equal split and move a layer from the slowest segment to its faster neighbour while that
  lowers the slowest segment's estimate, until the slowest and fastest segments are within
  ``threshold`` of the slowest (or no move helps: the last split tried is kept). A segment's
  estimate is the sum of its layers' measured cycles on one tile, each layer's resident or streamed
  figure as the segment's placement puts it.
* ``exhaustive``: every split point choice (C(l-1, s-1) of them), each run as the pipeline over
  the batch and scored by its measured cycles per inference (the paper: "taking the best one in
  terms of the inference time when running as a pipeline over a large batch of inputs"). So it
  sees what the per-segment profile cannot: stages that slow each other down by sharing main
  memory.

Each later strategy starts from the one before and only leaves it for a strictly better score, so
a tie keeps the same split (and the same measured pipeline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations, pairwise

__all__ = ["STRATEGIES", "equal", "exhaustive", "profiled", "splits"]

STRATEGIES = ("equal", "profiled", "exhaustive")
Bounds = tuple[int, ...]


def equal(layers: int, stages: int) -> Bounds:
    sizes = [layers // stages + (i < layers % stages) for i in range(stages)]
    return tuple([0] + [sum(sizes[: i + 1]) for i in range(stages)])


def splits(layers: int, stages: int) -> list[Bounds]:
    """Every split of ``layers`` layers into ``stages`` non-empty segments."""
    return [(0, *cut, layers) for cut in combinations(range(1, layers), stages - 1)]


def stage_costs(bounds: Bounds, cost: Callable[[int, int], float]) -> list[float]:
    return [cost(a, b) for a, b in pairwise(bounds)]


def profiled(layers: int, stages: int, cost: Callable[[int, int], float], threshold: float) -> Bounds:
    """``cost(a, b)``: the estimated cycles of segment ``[a, b)``."""
    bounds = equal(layers, stages)
    for _ in range(layers * stages):
        costs = stage_costs(bounds, cost)
        worst = max(costs)
        if worst - min(costs) <= threshold * worst:
            break
        slow = costs.index(worst)
        best = None
        for moved in _moves(bounds, slow, costs):
            score = max(stage_costs(moved, cost))
            if score < worst and (best is None or score < best[0]):
                best = (score, moved)
        if best is None:
            break
        bounds = best[1]
    return bounds


def _moves(bounds: Bounds, slow: int, costs: Sequence[float]) -> list[Bounds]:
    """The splits that give one layer of segment ``slow`` to a neighbour (the faster first)."""
    if bounds[slow + 1] - bounds[slow] < 2:
        return []
    out = []
    for side in sorted((s for s in (slow - 1, slow + 1) if 0 <= s < len(costs)), key=lambda s: costs[s]):
        b = list(bounds)
        if side < slow:
            b[slow] += 1  # its first layer goes to the previous segment
        else:
            b[slow + 1] -= 1  # its last layer goes to the next segment
        out.append(tuple(b))
    return out


def exhaustive(layers: int, stages: int, time: Callable[[Bounds], float], start: Bounds) -> Bounds:
    """The split whose pipeline ``time`` is lowest; ``start`` unless another is strictly faster."""
    best, score = start, time(start)
    for bounds in splits(layers, stages):
        t = time(bounds)
        if t < score:
            best, score = bounds, t
    return best
