"""Mode 2 with group sizes that vary along a contracting dim, as a batched op and a sum.

In mode 2 the lhs contracting dims listed ahead of the ragged one index group_sizes (each entry
of them has its own split of the ragged dim), and the output sums over them. The cuda backend
takes no such "reduce" dims, so the framework layers express the op as the same ragged dot with
those dims made batch dims on both sides (the group-size array applies unchanged: its prefix is
still the batch dims followed by them), computed in float32, then summed over the new batch axes
of the output, which sit right after the group axis.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from ._dims import Dims


class ReduceAsBatch(NamedTuple):
    dims: Dims                  # the op with the reduce dims as trailing batch dims
    sum_axes: Tuple[int, ...]   # the output axes to sum over


def reduce_as_batch(dims: Dims) -> Optional[ReduceAsBatch]:
    """The batched form of a mode-2 op with reduce dims; None for every other op."""
    if dims.mode() != 2:
        return None
    lc, rc = list(dims.lhs_contracting), list(dims.rhs_contracting)
    pos = lc.index(dims.ragged)
    if pos == 0:
        return None
    batched = Dims(tuple(lc[pos:]), tuple(rc[pos:]), tuple(dims.lhs_batch) + tuple(lc[:pos]),
                   tuple(dims.rhs_batch) + tuple(rc[:pos]), dims.lhs_ragged, dims.rhs_group)
    first = 1 + len(dims.lhs_batch)  # output: [groups, batch..., reduce..., lhs free..., rhs free...]
    return ReduceAsBatch(batched, tuple(range(first, first + pos)))
