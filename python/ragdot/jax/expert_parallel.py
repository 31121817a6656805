"""Expert parallelism on JAX's SPMD: the experts of an MoE layer sharded over one mesh axis, the
tokens sharded over the same axis, and ragdot's ragged dots for the experts of each shard.

    mesh = expert_mesh(8)                                   # a 1-D mesh with axis "ep"
    y = expert_parallel_moe(x, params, mesh, top_k=2)       # == moe_layer(x, params, top_k=2)

Two ways to bring tokens to their experts (`dispatch`):

all_to_all (default; MaxText's sparse path). Each shard routes its tokens, sorts the (token, slot)
    pairs by expert and all-gathers its per-expert counts (one collective of shards x experts
    int32; every offset both ways follows from it with no further exchange). A ragged all-to-all
    sends each shard's rows to the shard of their expert, which regroups what it received from
    every sender by local expert, runs the expert FFN on ragdot.jax.ragged_dot with its local
    group sizes, regroups back, and a second ragged all-to-all returns the rows to their tokens'
    shard for the weighted combine. The receive buffer holds the worst case (every pair of every
    shard at one shard: shards x local tokens x k rows), so no token is ever dropped.
all_gather. Every shard all-gathers the tokens, routes and sorts all of them, runs
    ragdot.jax.ragged_dot with `group_offset` on its own experts (the rows of other experts come
    out zero) and a reduce-scatter sums the shards' partial outputs back onto the token shards.
    More traffic (T x H both ways) but no ragged collective: small batches, checks.

The ragged all-to-all (`transport`):

ragged  jax.lax.ragged_all_to_all, the collective XLA implements on GPU and TPU (its transpose
        rule makes the layer differentiable).
dense   the same semantics on jax.lax.all_to_all: every (sender, receiver) slice is padded to the
        sender's whole buffer, exchanged densely and scattered at its offsets (what XLA's GPU
        "ragged all-to-all decomposer" does). XLA:CPU has no ragged all-to-all (jaxlib 0.10
        raises "HLO opcode `ragged-all-to-all` is not supported by XLA:CPU ThunkEmitter";
        jax-ml/jax#34755), so this is how the layer runs on CPU devices.
auto    dense on CPU devices, ragged elsewhere.

enable_cpu_ragged_all_to_all() gives XLA:CPU a lowering of jax.lax.ragged_all_to_all itself (the
dense exchange), so programs that call it, and the ragged transport with JAX's own transpose rule,
run on CPU devices (multi-device tests with --xla_force_host_platform_device_count).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import mlir
from jax.sharding import Mesh, PartitionSpec as P

from ._api import ragged_dot as ragdot_ragged_dot
from .moe import MoeParams, combine, expert_ffn, gate_activation, route, scaled_input, sort_pairs

DISPATCHES = ("all_to_all", "all_gather")
TRANSPORTS = ("auto", "ragged", "dense")


def expert_mesh(shards: Optional[int] = None, axis: str = "ep", devices=None) -> Mesh:
    """A 1-D mesh of the first `shards` devices (all by default) with the axis `axis`."""
    devices = list(jax.devices() if devices is None else devices)
    shards = len(devices) if shards is None else shards
    if not 1 <= shards <= len(devices):
        raise ValueError(f"expert_mesh: {shards} shards asked for, {len(devices)} devices present")
    return Mesh(np.array(devices[:shards]), (axis,))


def _exclusive_cumsum(a, axis=-1):
    return jnp.cumsum(a, axis=axis) - a


def ragged_all_to_all_dense(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                            axis_name, max_send_rows: Optional[int] = None):
    """jax.lax.ragged_all_to_all's semantics on a dense jax.lax.all_to_all, for backends without
    the ragged collective (XLA:CPU). Each slice is sent in a block of `max_send_rows` rows
    (default: operand's rows, which always fits); differentiable through all_to_all's transpose."""
    n = lax.axis_size(axis_name)
    slices = input_offsets.shape[0]
    if slices % n:
        raise ValueError(f"ragged_all_to_all_dense: {slices} slices for an axis of size {n}")
    rows = operand.shape[0] if max_send_rows is None else int(max_send_rows)
    tail = operand.shape[1:]
    r = jnp.arange(rows, dtype=jnp.int32)

    def column(mask):
        return mask.reshape(mask.shape + (1,) * len(tail))

    sending = r[None, :] < send_sizes[:, None]  # [slices, rows]
    src = jnp.where(sending, input_offsets[:, None] + r[None, :], 0)
    packed = jnp.where(column(sending), jnp.take(operand, src, axis=0), jnp.zeros((), operand.dtype))
    got = lax.all_to_all(packed.reshape((n, -1) + tail), axis_name, 0, 0, tiled=True)  # [sender, ...]
    # where each received slice goes here: the senders' output offsets, exchanged
    offsets = lax.all_to_all(output_offsets.reshape(n, -1), axis_name, 0, 0, tiled=True).reshape(-1)
    receiving = r[None, :] < recv_sizes[:, None]
    dest = jnp.where(receiving, offsets[:, None] + r[None, :], output.shape[0]).reshape(-1)  # past the end: dropped
    placed = jnp.zeros_like(output).at[dest].add(got.reshape((-1,) + tail), mode="drop")
    covered = jnp.zeros((output.shape[0],), bool).at[dest].set(True, mode="drop")
    return jnp.where(column(covered), placed, output)


_cpu_lowering = []


def enable_cpu_ragged_all_to_all() -> None:
    """Lowers jax.lax.ragged_all_to_all on the CPU to ragged_all_to_all_dense (idempotent). Each
    slice travels in a block of the operand's rows; axis_index_groups is not supported."""
    if _cpu_lowering:
        return
    from jax._src.lax.parallel import ragged_all_to_all_p  # the primitive has no public name

    def dense(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *, axis_name,
              axis_index_groups):
        if axis_index_groups is not None:
            raise NotImplementedError("ragged_all_to_all on the CPU: axis_index_groups is not supported")
        axis = axis_name[0] if len(axis_name) == 1 else tuple(axis_name)
        return ragged_all_to_all_dense(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                                       axis_name=axis)

    mlir.register_lowering(ragged_all_to_all_p, mlir.lower_fun(dense, multiple_results=False), platform="cpu")
    _cpu_lowering.append(True)


def _transport(name: str, platform: str) -> Callable:
    """f(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, axis, max_rows):
    a ragged all-to-all where no slice has more than `max_rows` rows."""
    if name not in TRANSPORTS:
        raise ValueError(f"transport {name!r}: expected one of {', '.join(TRANSPORTS)}")
    if name == "dense" or (name == "auto" and platform == "cpu"):
        return lambda *args, axis, max_rows: ragged_all_to_all_dense(*args, axis_name=axis, max_send_rows=max_rows)
    return lambda *args, axis, max_rows: lax.ragged_all_to_all(*args, axis_name=axis)


def _regroup(sizes, rows: int):
    """Chunk sizes [a, b] laid out a-major (chunk (i, j) after every (i', j') with i' < i, or i' = i
    and j' < j) -> for each of `rows` positions of the b-major layout, its position in the a-major
    one (positions past the chunks: any valid row)."""
    a, b = sizes.shape
    src_start = _exclusive_cumsum(sizes.reshape(-1)).reshape(a, b)
    dst_end = jnp.cumsum(sizes.T.reshape(-1))  # b-major chunk ends
    p = jnp.arange(rows, dtype=jnp.int32)
    chunk = jnp.minimum(jnp.searchsorted(dst_end, p, side="right"), a * b - 1)
    j, i = chunk // a, chunk % a
    src = src_start[i, j] + p - (dst_end[chunk] - sizes[i, j])
    return jnp.clip(src, 0, rows - 1)


def _all_to_all_shard(x, params: MoeParams, *, axis, shards, top_k, router, scaling, send, dot, activation):
    """One shard of the all_to_all dispatch: x [T/n, H] local tokens, params' experts local."""
    local_experts = params.w_up.shape[0]
    me = lax.axis_index(axis)
    routing = route(x, params.router, top_k=top_k, kind=router, scaling=scaling, bias=params.router_bias)
    pairs = sort_pairs(routing.experts, local_experts * shards)
    rows = jnp.take(scaled_input(x, routing), pairs.order // top_k, axis=0)  # [P, H] by expert
    counts = lax.all_gather(pairs.group_sizes, axis).reshape(shards, shards, local_experts)  # [sender, shard, e]
    per_shard = jnp.sum(counts, axis=-1)  # rows sender s sends to shard d
    send_sizes, recv_sizes = per_shard[me], per_shard[:, me]
    send_offsets = _exclusive_cumsum(per_shard, axis=1)  # [s, d]: where s's rows for d start in s's buffer
    land_offsets = _exclusive_cumsum(per_shard, axis=0)  # [s, d]: where s's rows land on d
    received = shards * rows.shape[0]  # the worst case: every pair of every shard comes here
    buf = send(rows, jnp.zeros((received,) + rows.shape[1:], rows.dtype), send_offsets[me], send_sizes,
               land_offsets[me], recv_sizes, axis=axis, max_rows=rows.shape[0])
    # received rows come grouped by sender, each sender's by local expert: regroup by expert
    mine = counts[:, me, :]  # [sender, local expert]
    out = expert_ffn(jnp.take(buf, _regroup(mine, received), axis=0), params.w_up, params.w_down,
                     jnp.sum(mine, axis=0), dot, activation=activation)
    out = jnp.take(out, _regroup(mine.T, received), axis=0)
    # each shard gets back at most what it sent: its own rows
    back = send(out, jnp.zeros_like(rows), land_offsets[:, me], recv_sizes, send_offsets[:, me], send_sizes,
                axis=axis, max_rows=rows.shape[0])
    return combine(back, pairs, routing.weights).astype(x.dtype)


def _all_gather_shard(x, params: MoeParams, *, axis, shards, top_k, router, scaling, send, dot, activation):
    """One shard of the all_gather dispatch: every token here, only the local experts computed."""
    local_experts = params.w_up.shape[0]
    xs = lax.all_gather(x, axis, tiled=True)
    routing = route(xs, params.router, top_k=top_k, kind=router, scaling=scaling, bias=params.router_bias)
    pairs = sort_pairs(routing.experts, local_experts * shards)
    rows = jnp.take(scaled_input(xs, routing), pairs.order // top_k, axis=0)
    offset = (lax.axis_index(axis) * local_experts).astype(jnp.int32).reshape(1)
    out = expert_ffn(rows, params.w_up, params.w_down, pairs.group_sizes, dot, activation=activation,
                     group_offset=offset)
    partial_y = combine(out, pairs, routing.weights)
    return lax.psum_scatter(partial_y, axis, scatter_dimension=0, tiled=True).astype(x.dtype)


def expert_parallel_moe_shard(x, params: MoeParams, *, axis: str, top_k: int, router: str = "softmax",
                              scaling: float = 1.0, dispatch: str = "all_to_all", transport: str = "auto",
                              ragged_dot: Callable = ragdot_ragged_dot, activation: str = "swiglu"):
    """The body of expert_parallel_moe for a caller's own shard_map over `axis`: x [T/n, H] (this
    shard's tokens), params with this shard's experts (w_up [E/n, H, 2F], w_down [E/n, F, H]) and
    the whole router. `transport` as for expert_parallel_moe ("auto": dense when JAX's default
    backend is the CPU). The all_gather dispatch needs a ragged dot with group_offset
    (ragdot.jax.ragged_dot; jax.lax does not implement it)."""
    if dispatch not in DISPATCHES:
        raise ValueError(f"dispatch {dispatch!r}: expected one of {', '.join(DISPATCHES)}")
    body = _all_to_all_shard if dispatch == "all_to_all" else _all_gather_shard
    gate_activation(activation)  # a clear error before tracing the body
    return body(x, params, axis=axis, shards=lax.axis_size(axis), top_k=top_k, router=router, scaling=scaling,
                send=_transport(transport, jax.default_backend()), dot=ragged_dot, activation=activation)


def expert_parallel_moe(x, params: MoeParams, mesh: Mesh, *, axis: str = "ep", top_k: int, router: str = "softmax",
                        scaling: float = 1.0, dispatch: str = "all_to_all", transport: str = "auto",
                        ragged_dot: Callable = ragdot_ragged_dot, activation: str = "swiglu"):
    """The routed experts of one MoE layer with the experts and the tokens sharded over `axis` of
    `mesh`: x [T, H] -> y [T, H], equal to moe_layer(x, params, ...) on one device. T and E must
    be multiples of the axis size. Usable under jax.jit and jax.grad."""
    shards = mesh.shape[axis]
    tokens, experts = x.shape[0], params.w_up.shape[0]
    if tokens % shards or experts % shards:
        raise ValueError(f"expert_parallel_moe: {tokens} tokens and {experts} experts must be multiples of the "
                         f"{shards} shards of mesh axis {axis!r}")
    if transport == "auto":
        transport = "dense" if mesh.devices.flat[0].platform == "cpu" else "ragged"
    body = functools.partial(expert_parallel_moe_shard, axis=axis, top_k=top_k, router=router, scaling=scaling,
                             dispatch=dispatch, ragged_dot=ragged_dot, transport=transport, activation=activation)
    param_specs = MoeParams(P(), P(axis), P(axis), None if params.router_bias is None else P())
    # check_vma=False: ragdot's custom call has no varying-manual-axes rule
    fn = jax.shard_map(body, mesh=mesh, in_specs=(P(axis), param_specs), out_specs=P(axis), check_vma=False)
    return fn(x, params)
