"""An MoE layer on ragged dots in JAX: the routers of ragdot's presets, the sort of the (token,
slot) pairs by expert, the expert FFN (gate and up fused in one ragged dot, a gated activation:
SwiGLU by default, or GeGLU; one ragged dot down) and the weighted combine. `moe_layer` is the single-device layer, written with plain
`jax.lax.ragged_dot` by default; ragdot.jax.expert_parallel shards the same layer's experts over
devices and must give its result.

    params = MoeParams(router=r, w_up=w1, w_down=w2)    # [H, E], [E, H, 2F], [E, F, H]
    y = moe_layer(x, params, top_k=2)                   # x [T, H] -> y [T, H]
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

ROUTERS = ("softmax", "deepseek_v3", "llama4")

# The gate's activation of each gated activation (ragdot::moe::GatedActivation): act = a(gate) * up.
GATE_ACTIVATIONS = {
    "swiglu": jax.nn.silu,
    "geglu": lambda g: jax.nn.gelu(g, approximate=False),  # gelu through erf
    "geglu_tanh": lambda g: jax.nn.gelu(g, approximate=True),  # gelu's tanh approximation
}
ACTIVATIONS = tuple(GATE_ACTIVATIONS)


def gate_activation(activation: str) -> Callable:
    """The gate's activation function of `activation` (one of ACTIVATIONS)."""
    if activation not in GATE_ACTIVATIONS:
        raise ValueError(f"activation {activation!r}: expected one of {', '.join(ACTIVATIONS)}")
    return GATE_ACTIVATIONS[activation]


class MoeParams(NamedTuple):
    """The routed experts of one layer. Columns [0, F) of w_up are the gate, [F, 2F) the up."""
    router: jax.Array  # [H, E]
    w_up: jax.Array  # [E, H, 2F]
    w_down: jax.Array  # [E, F, H]
    router_bias: Optional[jax.Array] = None  # [E]: DeepSeek-V3's selection bias (selection only)


class Routing(NamedTuple):
    experts: jax.Array  # [T, k] int32
    weights: jax.Array  # [T, k] float32 combine weights
    input_scale: Optional[jax.Array]  # [T] float32 (Llama-4: sigmoid of the top-1 logit) or None


def route(x, router, *, top_k: int, kind: str = "softmax", scaling: float = 1.0, bias=None) -> Routing:
    """The router of a preset, as ragdot's C++ layer defines it (ties go to the lower expert).

    softmax      Mixtral and Qwen3: the top-k logits, softmax over those k (the same as a softmax
                 over all experts, top-k, renormalized), times `scaling`
    deepseek_v3  selection by sigmoid(logit) + bias; weights the chosen sigmoids renormalized,
                 times `scaling` (2.5 in the preset)
    llama4       top-k logits; the input is scaled by sigmoid of the top-1 logit and the combine
                 weight is `scaling`
    """
    if kind not in ROUTERS:
        raise ValueError(f"router {kind!r}: expected one of {', '.join(ROUTERS)}")
    logits = jnp.dot(x.astype(jnp.float32), router.astype(jnp.float32))
    if kind == "deepseek_v3":
        score = jax.nn.sigmoid(logits)
        select = lax.stop_gradient(score if bias is None else score + bias.astype(jnp.float32))
        _, experts = lax.top_k(select, top_k)
        chosen = jnp.take_along_axis(score, experts, axis=-1)
        return Routing(experts.astype(jnp.int32), scaling * chosen / jnp.sum(chosen, -1, keepdims=True), None)
    top, experts = lax.top_k(logits, top_k)
    if kind == "llama4":
        return Routing(experts.astype(jnp.int32), jnp.full(top.shape, scaling, jnp.float32), jax.nn.sigmoid(top[:, 0]))
    return Routing(experts.astype(jnp.int32), scaling * jax.nn.softmax(top, axis=-1), None)


def scaled_input(x, routing: Routing):
    """x with Llama-4's input scale applied (x itself for the other routers)."""
    if routing.input_scale is None:
        return x
    return (x.astype(jnp.float32) * routing.input_scale[:, None]).astype(x.dtype)


class SortedPairs(NamedTuple):
    order: jax.Array  # [T*k]: the pair (t, j) = (p // k, p % k) at sorted position i is order[i]
    inverse: jax.Array  # [T*k]: the sorted position of pair p
    group_sizes: jax.Array  # [E] int32


def sort_pairs(experts, num_experts: int) -> SortedPairs:
    """The stable sort of the (token, slot) pairs by expert."""
    flat = experts.reshape(-1)
    order = jnp.argsort(flat, stable=True).astype(jnp.int32)
    inverse = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=jnp.int32))
    group_sizes = jnp.bincount(flat, length=num_experts).astype(jnp.int32)
    return SortedPairs(order, inverse, group_sizes)


def expert_ffn(rows, w_up, w_down, group_sizes, ragged_dot: Callable = lax.ragged_dot, *,
               activation: str = "swiglu", **dot_kwargs):
    """rows [M, H] sorted by expert -> [M, H]: ragged dot up to [M, 2F], a(gate) * up (a: silu for
    "swiglu", gelu for "geglu" and "geglu_tanh"), ragged dot down. `dot_kwargs` go to both ragged
    dots (ragdot.jax.ragged_dot's group_offset, say)."""
    act_fn = gate_activation(activation)
    up = ragged_dot(rows, w_up, group_sizes, **dot_kwargs)
    f = w_down.shape[-2]
    act = act_fn(up[:, :f].astype(jnp.float32)) * up[:, f:].astype(jnp.float32)
    return ragged_dot(act.astype(rows.dtype), w_down, group_sizes, **dot_kwargs)


def combine(out_sorted, pairs: SortedPairs, weights):
    """y [T, H] float32 = sum over each token's k slots of weight * its sorted row."""
    tokens, k = weights.shape
    per_pair = jnp.take(out_sorted, pairs.inverse, axis=0).astype(jnp.float32)
    return jnp.einsum("tkh,tk->th", per_pair.reshape(tokens, k, -1), weights)


def moe_layer(x, params: MoeParams, *, top_k: int, router: str = "softmax", scaling: float = 1.0,
              ragged_dot: Callable = lax.ragged_dot, activation: str = "swiglu"):
    """The routed experts of one MoE layer on one device: x [T, H] -> y [T, H] (x's dtype).
    `activation`: the experts' gated activation, one of ACTIVATIONS."""
    num_experts = params.w_up.shape[0]
    routing = route(x, params.router, top_k=top_k, kind=router, scaling=scaling, bias=params.router_bias)
    pairs = sort_pairs(routing.experts, num_experts)
    rows = jnp.take(scaled_input(x, routing), pairs.order // top_k, axis=0)
    out = expert_ffn(rows, params.w_up, params.w_down, pairs.group_sizes, ragged_dot, activation=activation)
    return combine(out, pairs, routing.weights).astype(x.dtype)
