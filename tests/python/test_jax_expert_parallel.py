"""ragdot.jax.expert_parallel on 8 CPU devices: the expert-parallel layer equals the single-device
layer (jax.lax.ragged_dot) in the forward pass and in its gradients, for 2, 4 and 8 shards, both
dispatches and both transports, with skewed routing and experts (and with 8 shards a whole shard)
that get no tokens. The cases run in one child process (expert_parallel_cases.py): the CPU device
count is fixed when JAX starts, and this process keeps its single device. With RAGDOT_TEST_GPU=1
the layer also runs on every GPU JAX sees."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ragdot.jax as rj
from conftest import gpu
from ragdot.jax.moe import MoeParams, moe_layer

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off for XLA's NCCL on several GPUs

CASES = ["ragged_semantics", "uneven_tokens"] + [f"forward-{n}-all_to_all-dense" for n in (2, 4, 8)] + [
    "forward-2-all_gather", "forward-8-all_gather", "forward-4-all_to_all-deepseek_v3", "forward-4-all_gather-llama4",
    "forward-8-all_to_all-bf16", "grad-8-all_to_all-dense", "grad-4-all_gather", "forward-8-all_to_all-ragged",
    "grad-4-all_to_all-ragged"]


@pytest.fixture(scope="module")
def results():
    # small programs, many of them: XLA:CPU's cheaper code generation halves the compile time
    flags = "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0 " \
            "--xla_llvm_disable_expensive_passes=true"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
    script = Path(__file__).with_name("expert_parallel_cases.py")
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{script.name} failed:\n{run.stderr[-4000:]}"
    return json.loads(run.stdout)


@pytest.mark.parametrize("case", CASES)
def test_expert_parallel_matches_single_device(results, case):
    r = results[case]
    assert "error" not in r, r.get("error")
    assert r["err"] <= r["tol"], f"{case}: relative error {r['err']:.3g} > {r['tol']:.3g}"


def test_routing_is_skewed_with_empty_experts(results):
    sizes = np.array(results["routing"])
    assert sizes.sum() == 64 * 2
    assert sizes[[5, 14, 15]].tolist() == [0, 0, 0]
    assert sizes.max() >= 4 * np.median(sizes)


def test_ragged_transport_program(results):
    """Forward: two ragged all-to-alls (to the experts and back) and two ragdot calls (up, down);
    its gradient adds the two transposed all-to-alls and the four cotangent ragged dots."""
    assert results["lowered"] == {"forward": [2, 2], "gradient": [4, 6]}


def small_problem(seed, tokens, hidden, experts, ffn):
    rng = np.random.default_rng(seed)
    normal = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)
    return normal(tokens, hidden), MoeParams(normal(hidden, experts), normal(experts, hidden, 2 * ffn),
                                             normal(experts, ffn, hidden))


def test_single_device_layer_with_ragdot_matches_jax_lax():
    x, params = small_problem(0, 24, 8, 6, 5)
    want = moe_layer(x, params, top_k=2)
    got = jax.jit(lambda x, p: moe_layer(x, p, top_k=2, ragged_dot=rj.ragged_dot))(x, params)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["swiglu", "geglu", "geglu_tanh"])
def test_gated_activations_match_a_dense_oracle(activation):
    """moe_layer's expert FFN with each gated activation against every token run through each of
    its chosen experts in float64 (the routing from ragdot.jax.moe.route); the expert-parallel
    layer on one shard, with either dispatch, gives the same."""
    from math import erf, pi, sqrt, tanh
    from ragdot.jax.moe import route
    gates = {"swiglu": lambda g: g / (1 + np.exp(-g)),
             "geglu": lambda g: 0.5 * g * (1 + np.vectorize(erf)(g / sqrt(2))),
             "geglu_tanh": lambda g: 0.5 * g * (1 + np.vectorize(tanh)(sqrt(2 / pi) * (g + 0.044715 * g ** 3)))}
    x, params = small_problem(3, 20, 8, 5, 6)
    got = np.asarray(moe_layer(x, params, top_k=2, activation=activation))
    routing = route(x, params.router, top_k=2)
    xs, w_up, w_down = (np.asarray(a, np.float64) for a in (x, params.w_up, params.w_down))
    want = np.zeros_like(xs)
    for t in range(xs.shape[0]):
        for e, w in zip(np.asarray(routing.experts[t]), np.asarray(routing.weights[t], np.float64)):
            up = xs[t] @ w_up[e]
            f = up.shape[0] // 2
            want[t] += w * ((gates[activation](up[:f]) * up[f:]) @ w_down[e])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    for dispatch in ("all_to_all", "all_gather"):
        ep = rj.expert_parallel_moe(x, params, rj.expert_mesh(1), top_k=2, activation=activation, dispatch=dispatch)
        np.testing.assert_allclose(ep, got, rtol=1e-5, atol=1e-5, err_msg=dispatch)


def test_one_shard_and_bad_arguments():
    mesh = rj.expert_mesh(1)
    x, params = small_problem(1, 6, 4, 3, 3)
    want = moe_layer(x, params, top_k=2)
    for dispatch in ("all_to_all", "all_gather"):
        got = rj.expert_parallel_moe(x, params, mesh, top_k=2, dispatch=dispatch)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="dispatch"):
        rj.expert_parallel_moe(x, params, mesh, top_k=2, dispatch="ring")
    with pytest.raises(ValueError, match="transport"):
        rj.expert_parallel_moe(x, params, mesh, top_k=2, transport="nvshmem")
    with pytest.raises(ValueError, match="router"):
        moe_layer(x, params, top_k=2, router="expert_choice")
    with pytest.raises(ValueError, match="geglu_tanh"):  # names the known activations
        moe_layer(x, params, top_k=2, activation="relu")
    with pytest.raises(ValueError, match="activation"):
        rj.expert_parallel_moe(x, params, mesh, top_k=2, activation="relu")
    with pytest.raises(ValueError, match="shards"):
        rj.expert_mesh(len(jax.devices()) + 1)


@gpu
@pytest.mark.parametrize("dispatch,transport", [("all_to_all", "ragged"), ("all_to_all", "dense"),
                                                ("all_gather", "ragged")])
def test_expert_parallel_on_the_gpus(dispatch, transport):
    """On every GPU JAX sees (one or several): the layer and its gradients against the
    single-device layer on the CPU (jax.lax, float32)."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        pytest.skip("JAX has no GPU here (set RAGDOT_TEST_GPU=1 and install jax with CUDA)")
    jax.config.update("jax_default_matmul_precision", "highest")
    n = len(gpus)
    x, params = small_problem(7, 16 * n, 32, 4 * n, 16)
    cot = jnp.asarray(np.random.default_rng(8).standard_normal(x.shape), jnp.float32)
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        want = moe_layer(x, params, top_k=2)
        want_grads = jax.grad(lambda x, p: jnp.sum(moe_layer(x, p, top_k=2) * cot), argnums=(0, 1))(x, params)
    mesh = rj.expert_mesh(devices=gpus)
    on = lambda spec: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
    x, cot = jax.device_put(x, on(("ep",))), jax.device_put(cot, on(("ep",)))
    params = jax.device_put(params, MoeParams(on(()), on(("ep",)), on(("ep",))))
    layer = lambda x, p: rj.expert_parallel_moe(x, p, mesh, top_k=2, dispatch=dispatch, transport=transport)
    got = jax.jit(layer)(x, params)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-3)
    grads = jax.jit(jax.grad(lambda x, p: jnp.sum(layer(x, p) * cot), argnums=(0, 1)))(x, params)
    for g, w in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads)):
        scale = float(np.max(np.abs(np.asarray(w)))) + 1
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-3 * scale)
