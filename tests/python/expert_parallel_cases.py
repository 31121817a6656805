"""The expert-parallel MoE layer against the single-device layer on 8 CPU devices, run as its own
process by test_jax_expert_parallel.py (the device count is fixed when JAX starts, so the other
tests keep their one device). Prints one JSON object: case name -> {"err": relative max error,
"tol": tolerance} (or {"error": message}), plus the routing of the problem under "routing".

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu python tests/python/expert_parallel_cases.py
"""
import functools
import json
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import ragdot.jax as rj
from ragdot.jax.expert_parallel import enable_cpu_ragged_all_to_all, ragged_all_to_all_dense
from ragdot.jax.moe import MoeParams, moe_layer, route

T, H, F, E, K = 64, 16, 8, 16, 2
EMPTY = (5, 14, 15)  # experts no token picks: with 8 shards, shard 7 gets nothing


def problem(seed, dtype=jnp.float32, router_bias=False):
    """Skewed routing (Zipf-like bias on a constant input feature) with EMPTY experts unpicked."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, H)).astype(np.float32)
    x[:, 0] = 1.0
    router = 0.5 * rng.standard_normal((H, E)).astype(np.float32)
    router[0] = -1.5 * np.log1p(rng.permutation(E))  # skew
    router[0, list(EMPTY)] = -1e3
    w_up = rng.standard_normal((E, H, 2 * F)).astype(np.float32) / np.sqrt(H)
    w_down = rng.standard_normal((E, F, H)).astype(np.float32) / np.sqrt(F)
    bias = 0.1 * rng.standard_normal(E).astype(np.float32) if router_bias else None
    params = MoeParams(jnp.asarray(router), jnp.asarray(w_up, dtype), jnp.asarray(w_down, dtype),
                       None if bias is None else jnp.asarray(bias))
    cot = jnp.asarray(rng.standard_normal((T, H)), jnp.float32)
    return jnp.asarray(x, dtype), params, cot


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


@functools.lru_cache(maxsize=None)
def reference_forward(router, scaling, dtype, seed):
    x, params, _ = problem(seed, dtype, router_bias=router == "deepseek_v3")
    return moe_layer(x, params, top_k=K, router=router, scaling=scaling)


def loss(layer, cot):
    return lambda x, r, u, d: jnp.sum(layer(x, MoeParams(r, u, d)) * cot)


@functools.lru_cache(maxsize=None)
def reference_grad(seed):
    x, params, cot = problem(seed)
    return jax.grad(loss(lambda x, p: moe_layer(x, p, top_k=K), cot), argnums=(0, 1, 2, 3))(
        x, params.router, params.w_up, params.w_down)


def forward_case(shards, dispatch, transport, router="softmax", scaling=1.0, dtype=jnp.float32, seed=0):
    x, params, _ = problem(seed, dtype, router_bias=router == "deepseek_v3")
    kw = dict(top_k=K, router=router, scaling=scaling)
    want = reference_forward(router, scaling, dtype, seed)
    mesh = rj.expert_mesh(shards)
    got = jax.jit(lambda x, p: rj.expert_parallel_moe(x, p, mesh, dispatch=dispatch, transport=transport, **kw))(
        x, params)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    return rel_err(got, want)


def grad_case(shards, dispatch, transport, seed=1):
    x, params, cot = problem(seed)
    mesh = rj.expert_mesh(shards)
    ep = lambda x, p: rj.expert_parallel_moe(x, p, mesh, top_k=K, dispatch=dispatch, transport=transport)
    got = jax.jit(jax.grad(loss(ep, cot), argnums=(0, 1, 2, 3)))(x, params.router, params.w_up, params.w_down)
    return max(rel_err(g, w) for g, w in zip(got, reference_grad(seed)))


def ragged_semantics_case():
    """jax.lax.ragged_all_to_all's documented example, by the dense exchange."""
    mesh = rj.expert_mesh(2)
    spec = jax.sharding.PartitionSpec("ep")
    args = [jnp.array(a, dtype) for a, dtype in (
        ([1, 2, 2, 3, 4, 0], jnp.float32), ([0, 1, 0, 1], jnp.int32), ([1, 2, 1, 1], jnp.int32),
        ([0, 0, 1, 2], jnp.int32), ([1, 1, 2, 1], jnp.int32))]

    def f(x, io, ss, oo, rs):
        return ragged_all_to_all_dense(x, jnp.zeros(4, x.dtype), io, ss, oo, rs, axis_name="ep")

    got = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(spec,) * 5, out_specs=spec))(*args)
    return rel_err(got, [1, 3, 0, 0, 2, 2, 4, 0])


def uneven_tokens_case():
    """63 tokens over 8 shards: a ValueError that says so (0: raised as expected)."""
    x, params, _ = problem(0)
    try:
        rj.expert_parallel_moe(x[:63], params, rj.expert_mesh(8), top_k=K)
    except ValueError as err:
        return 0.0 if "multiples" in str(err) else 1.0
    return 1.0


def lowered_calls():
    """The ragged transport's program (forward and gradient): JAX's ragged all-to-all and ragdot's
    custom call, counted in the lowered text (before the CPU lowering replaces the collective)."""
    x, params, cot = problem(0)
    mesh = rj.expert_mesh(4)
    ep = lambda x, p: rj.expert_parallel_moe(x, p, mesh, top_k=K, transport="ragged")
    fwd = jax.jit(ep).lower(x, params).as_text()
    bwd = jax.jit(jax.grad(lambda x, p: jnp.sum(ep(x, p) * cot), argnums=(0, 1))).lower(x, params).as_text()
    count = lambda text: [text.count("ragged_all_to_all"), text.count("ragdot_ragged_dot_general")]
    return {"forward": count(fwd), "gradient": count(bwd)}


def main():
    assert len(jax.devices()) >= 8, f"needs 8 devices, got {jax.devices()}"
    results = {}

    def run(name, fn, tol):
        try:
            results[name] = {"err": fn(), "tol": tol}
        except Exception:  # noqa: BLE001 -- reported per case to the test
            results[name] = {"error": traceback.format_exc(limit=6)}

    x, params, _ = problem(0)
    r = route(x, params.router, top_k=K)
    results["routing"] = np.bincount(np.asarray(r.experts).reshape(-1), minlength=E).tolist()
    try:
        results["lowered"] = lowered_calls()
    except Exception:  # noqa: BLE001
        results["lowered"] = {"error": traceback.format_exc(limit=6)}
    run("ragged_semantics", ragged_semantics_case, 0.0)
    run("uneven_tokens", uneven_tokens_case, 0.0)
    for shards in (2, 4, 8):
        run(f"forward-{shards}-all_to_all-dense", lambda: forward_case(shards, "all_to_all", "dense"), 1e-5)
    for shards in (2, 8):
        run(f"forward-{shards}-all_gather", lambda: forward_case(shards, "all_gather", "dense"), 1e-5)
    run("forward-4-all_to_all-deepseek_v3", lambda: forward_case(4, "all_to_all", "dense", "deepseek_v3", 2.5), 1e-5)
    run("forward-4-all_gather-llama4", lambda: forward_case(4, "all_gather", "dense", "llama4"), 1e-5)
    run("forward-8-all_to_all-bf16", lambda: forward_case(8, "all_to_all", "dense", dtype=jnp.bfloat16), 3e-2)
    run("grad-8-all_to_all-dense", lambda: grad_case(8, "all_to_all", "dense"), 1e-5)
    run("grad-4-all_gather", lambda: grad_case(4, "all_gather", "dense"), 1e-5)
    enable_cpu_ragged_all_to_all()  # from here jax.lax.ragged_all_to_all runs on the CPU
    run("forward-8-all_to_all-ragged", lambda: forward_case(8, "all_to_all", "ragged"), 1e-5)
    run("grad-4-all_to_all-ragged", lambda: grad_case(4, "all_to_all", "ragged"), 1e-5)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
