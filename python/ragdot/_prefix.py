"""Where group sizes of rank > 1 take their leading dims from (src/core/dims.hpp's rule)."""
from typing import Sequence, Tuple

from ._dims import Dims


def prefix_dims(dims: Dims, lhs_ndim: int) -> Tuple[int, ...]:
    """The lhs dims that index group_sizes ahead of its last (group) dim."""
    def before(seq):
        seq = list(seq)
        return seq[:seq.index(dims.ragged)] if dims.ragged in seq else seq

    mode = dims.mode()
    if mode == 1:
        free = [i for i in range(lhs_ndim) if i not in dims.lhs_contracting and i not in dims.lhs_batch]
        return tuple(dims.lhs_batch) + tuple(before(free))
    if mode == 2:
        return tuple(dims.lhs_batch) + tuple(before(dims.lhs_contracting))
    return tuple(before(dims.lhs_batch))


def full_group_sizes_shape(dims: Dims, lhs_shape: Sequence[int], groups: int) -> Tuple[int, ...]:
    return tuple(int(lhs_shape[d]) for d in prefix_dims(dims, len(lhs_shape))) + (int(groups),)
