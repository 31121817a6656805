"""Dimension numbers of ragged_dot_general, independent of any framework.

`RaggedDotDimensionNumbers` has the fields of `jax.lax.RaggedDotDimensionNumbers`, and either
kind (or anything with those three attributes) is accepted wherever ragdot takes dimension
numbers. `Dims` is the normalized, hashable form the rest of the package works with.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple

import numpy as np


class RaggedDotDimensionNumbers(NamedTuple):
    dot_dimension_numbers: Tuple[Tuple[Sequence[int], Sequence[int]], Tuple[Sequence[int], Sequence[int]]]
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]


class Dims(NamedTuple):
    lhs_contracting: Tuple[int, ...]
    rhs_contracting: Tuple[int, ...]
    lhs_batch: Tuple[int, ...]
    rhs_batch: Tuple[int, ...]
    lhs_ragged: Tuple[int, ...]
    rhs_group: Tuple[int, ...]

    @property
    def ragged(self) -> int:
        return self.lhs_ragged[0]

    def mode(self) -> int:
        """1: ragged non-contracting, 2: ragged contracting, 3: ragged batch."""
        if self.ragged in self.lhs_contracting:
            return 2
        if self.ragged in self.lhs_batch:
            return 3
        return 1

    def encode(self) -> np.ndarray:
        """The flat int64 attribute the native module decodes (python/src/dims_encoding.hpp)."""
        flat = []
        for part in self:
            flat.append(len(part))
            flat.extend(part)
        return np.asarray(flat, dtype=np.int64)

    @staticmethod
    def decode(flat) -> "Dims":
        """The inverse of encode()."""
        parts, at = [], 0
        for _ in range(6):
            n = int(flat[at])
            parts.append(tuple(int(v) for v in flat[at + 1:at + 1 + n]))
            at += 1 + n
        return Dims(*parts)

    def to_jax(self):
        from jax import lax

        return lax.RaggedDotDimensionNumbers(
            dot_dimension_numbers=((list(self.lhs_contracting), list(self.rhs_contracting)),
                                   (list(self.lhs_batch), list(self.rhs_batch))),
            lhs_ragged_dimensions=list(self.lhs_ragged),
            rhs_group_dimensions=list(self.rhs_group),
        )


def _ints(values, what) -> Tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except TypeError as e:
        raise TypeError(f"{what} must be a sequence of integers, got {values!r}") from e


def normalize(dimension_numbers) -> Dims:
    """Dims from a RaggedDotDimensionNumbers of ragdot's or JAX's (anything with its fields)."""
    if isinstance(dimension_numbers, Dims):
        return dimension_numbers
    try:
        (lc, rc), (lb, rb) = dimension_numbers.dot_dimension_numbers
        ragged = dimension_numbers.lhs_ragged_dimensions
        group = dimension_numbers.rhs_group_dimensions
    except (AttributeError, TypeError, ValueError) as e:
        raise TypeError(
            "ragged_dot_dimension_numbers must be a RaggedDotDimensionNumbers "
            "(dot_dimension_numbers=((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), "
            f"lhs_ragged_dimensions, rhs_group_dimensions), got {dimension_numbers!r}") from e
    return Dims(_ints(lc, "lhs contracting dimensions"), _ints(rc, "rhs contracting dimensions"),
                _ints(lb, "lhs batch dimensions"), _ints(rb, "rhs batch dimensions"),
                _ints(ragged, "lhs_ragged_dimensions"), _ints(group or (), "rhs_group_dimensions"))


# jax.lax.ragged_dot: lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n].
RAGGED_DOT = Dims((1,), (1,), (), (), (0,), (0,))
