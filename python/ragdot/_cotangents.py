"""The two cotangents of ragged_dot_general, each as one more ragged_dot_general.

Every dimension gets a label (a batch pair, a contracting pair, a free dimension of one side,
the rhs group dimension). A cotangent is the ragged dot of two of (lhs, rhs, out-cotangent)
that meet on some labels and keep the others, followed by a transpose into the primal's layout:

  mode 1 (forward):  dlhs = mode 1 (ct, rhs)   contracting rhs's free dims, rhs's groups
                     drhs = mode 2 (lhs, ct)   contracting lhs's free dims, ragged among them
  mode 2 (weights):  dlhs = mode 1 (rhs, ct)   the ragged dim is rhs's, ct's leading dim the groups
                     drhs = mode 1 (lhs, ct)
  mode 3 (batch):    dlhs = mode 3 (ct, rhs),  drhs = mode 3 (lhs, ct)

Group sizes of rank > 1 are indexed by "prefix" dimensions that each mode orders its own way;
where a cotangent's order would differ from the primal's, its first operand is transposed
first so that the same group-size array applies. The framework layers (JAX, PyTorch) only run
the steps this module describes.
"""
from __future__ import annotations

import functools
from typing import List, NamedTuple, Optional, Sequence, Tuple

from ._dims import Dims
from ._prefix import prefix_dims
from ._reduce_dims import reduce_as_batch

Label = Tuple


class CotangentOp(NamedTuple):
    a: str  # which array is the op's lhs: "lhs", "rhs" or "ct"
    b: str  # and which its rhs
    a_perm: Optional[Tuple[int, ...]]  # transpose `a` first (None: as it is)
    dims: Dims
    out_perm: Tuple[int, ...]  # transpose of the op's output into the primal operand's layout
    # Axes the framework sums (in float32) before out_perm: a mode-2 op's reduce dims run as batch
    # dims (ragdot/_reduce_dims.py); empty for every other op.
    sum_axes: Tuple[int, ...] = ()


def _labels(dims: Dims, lhs_ndim: int, rhs_ndim: int):
    def side(ndim, batch, contracting, group, free_tag):
        out = []
        for i in range(ndim):
            if i in batch:
                out.append(("b", batch.index(i)))
            elif i in contracting:
                out.append(("c", contracting.index(i)))
            elif i in group:
                out.append(("G",))
            else:
                out.append((free_tag, i))
        return out

    lhs = side(lhs_ndim, dims.lhs_batch, dims.lhs_contracting, (), "l")
    rhs = side(rhs_ndim, dims.rhs_batch, dims.rhs_contracting, dims.rhs_group, "r")
    return lhs, rhs


def _free(labels, batch, contract, group=None):
    return [l for l in labels if l not in batch and l not in contract and l != group]


def _mode(ragged, batch, contract):
    return 2 if ragged in contract else 3 if ragged in batch else 1


def _prefix(a_labels, batch, contract, ragged) -> List[Label]:
    """The labels that index group sizes ahead of the group dim, for `a` as an op's lhs."""
    index = a_labels.index
    d = Dims(tuple(map(index, contract)), (), tuple(map(index, batch)), (), (index(ragged),), ())
    return [a_labels[i] for i in prefix_dims(d, len(a_labels))]


def _op(a, a_labels, b, b_labels, batch, contract, ragged, group, target, want_prefix, gs_ndim) -> CotangentOp:
    a_perm = None
    if gs_ndim > 1 and _prefix(a_labels, batch, contract, ragged) != want_prefix:
        lead = list(batch) + [l for l in want_prefix if l not in batch] + [ragged]
        order = lead + [l for l in a_labels if l not in lead]
        a_perm = tuple(a_labels.index(l) for l in order)
        a_labels = order
        if _mode(ragged, batch, contract) == 2:
            contract = [l for l in order if l in contract]
    dims = Dims(tuple(a_labels.index(l) for l in contract), tuple(b_labels.index(l) for l in contract),
                tuple(a_labels.index(l) for l in batch), tuple(b_labels.index(l) for l in batch),
                (a_labels.index(ragged),), (b_labels.index(group),) if group else ())
    out = ([("G",)] if _mode(ragged, batch, contract) == 2 else []) + list(batch) + \
        _free(a_labels, batch, contract) + _free(b_labels, batch, contract, group)
    op = CotangentOp(a, b, a_perm, dims, tuple(out.index(l) for l in target))
    batched = reduce_as_batch(dims)
    # summing the extra batch axes leaves the unbatched op's output, so out_perm stays
    return op if batched is None else op._replace(dims=batched.dims, sum_axes=batched.sum_axes)


@functools.lru_cache(maxsize=1024)
def cotangent_ops(dims: Dims, lhs_ndim: int, rhs_ndim: int, gs_ndim: int) -> Tuple[CotangentOp, CotangentOp]:
    """(dlhs, drhs) of ragged_dot_general(lhs, rhs, gs, dims), as ragged dots of lhs, rhs, ct."""
    lhs, rhs = _labels(dims, lhs_ndim, rhs_ndim)
    batch = [("b", j) for j in range(len(dims.lhs_batch))]
    contract = [("c", j) for j in range(len(dims.lhs_contracting))]
    ragged = lhs[dims.ragged]
    mode = dims.mode()
    lfree, rfree = _free(lhs, batch, contract), _free(rhs, batch, contract, ("G",))
    ct = ([("G",)] if mode == 2 else []) + batch + lfree + rfree
    want = _prefix(lhs, batch, contract, ragged)
    if mode == 1:
        return (_op("ct", ct, "rhs", rhs, batch, rfree, ragged, ("G",), lhs, want, gs_ndim),
                _op("lhs", lhs, "ct", ct, batch, lfree, ragged, None, rhs, want, gs_ndim))
    if mode == 2:
        return (_op("rhs", rhs, "ct", ct, batch, rfree, ragged, ("G",), lhs, want, gs_ndim),
                _op("lhs", lhs, "ct", ct, batch, lfree, ragged, ("G",), rhs, want, gs_ndim))
    return (_op("ct", ct, "rhs", rhs, batch, rfree, ragged, None, lhs, want, gs_ndim),
            _op("lhs", lhs, "ct", ct, batch, lfree, ragged, None, rhs, want, gs_ndim))


def is_identity(perm: Optional[Sequence[int]]) -> bool:
    return perm is None or tuple(perm) == tuple(range(len(perm)))


def narrow_cotangent(ct_itemsize: int, lhs_dtype, rhs_dtype) -> bool:
    """Whether to round the output cotangent to the operands' dtype before the backward ragged dots.

    True when both operands share one 2-byte float type and the cotangent is wider (float32, from
    preferred_element_type=float32): the backward products then run on the same tensor-core
    path as the forward, with float32 accumulation, as mixed-precision training does. Left wide,
    each would be a float32 x bfloat16 product, which only the slow SIMT kernels take.
    """
    return lhs_dtype == rhs_dtype and getattr(lhs_dtype, "itemsize", 0) == 2 and ct_itemsize > 2

