"""The same parity on the GPU: ragdot.jax's CUDA handler against jax.lax (on the CPU), the eager
API on PyTorch and CuPy CUDA arrays, and ragdot.torch.grouped_mm against torch._grouped_mm.
Skipped where there is no CUDA GPU; scripts/gpu_python.sh runs them with RAGDOT_TEST_GPU=1."""
import numpy as np
import pytest

from conftest import CASES, gpu, random_case

pytestmark = gpu


def jax_gpu():
    import jax

    # the oracle in full float32, not TF32
    jax.config.update("jax_default_matmul_precision", "highest")
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU here (set RAGDOT_TEST_GPU=1 and install jax with CUDA)")


@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_jax_values_and_gradients_on_gpu(name, dtype):
    """ragdot's CUDA handler against jax.lax on the CPU in float32, from the same (rounded) values:
    jax.lax on the GPU has no bfloat16 path at full precision, fails XLA's verifier on some
    prefix layouts and lacks some gradients, so it cannot be the oracle here."""
    import jax
    import jax.numpy as jnp

    import ragdot.jax as rj
    from jax_reference import jax_gradients, loss

    dev = jax_gpu()
    cpu = jax.devices("cpu")[0]
    lhs, rhs, gs, dims = random_case(name, 40)
    lhs, rhs = (jnp.asarray(x, dtype) for x in (lhs, rhs))
    jdims = dims.to_jax()
    on_gpu = [jax.device_put(x, dev) for x in (lhs, rhs, jnp.asarray(gs))]
    on_cpu = [jax.device_put(x, cpu) for x in (lhs.astype(jnp.float32), rhs.astype(jnp.float32), jnp.asarray(gs))]
    ours = jax.jit(lambda a, b, g: rj.ragged_dot_general(a, b, g, jdims))(*on_gpu)
    with jax.default_device(cpu):
        theirs = jax.lax.ragged_dot_general(*on_cpu, jdims)
        cot = jnp.asarray(np.random.default_rng(3).standard_normal(theirs.shape), jnp.float32)
        grads_theirs = jax_gradients(*on_cpu, jdims, cot)
    tol = 1e-3 if dtype == "float32" else 6e-2
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs), atol=tol * 4, rtol=tol)
    gs_gpu, cot_gpu = on_gpu[2], jax.device_put(cot, dev)
    grads_ours = jax.jit(jax.grad(lambda a, b: loss(rj.ragged_dot_general, jdims, gs_gpu, cot_gpu)(a, b)
                                  .astype(jnp.float32), argnums=(0, 1)))(*on_gpu[:2])
    for o, t, primal in zip(grads_ours, grads_theirs, on_gpu):
        assert o.shape == t.shape and o.dtype == primal.dtype
        scale = float(jnp.max(jnp.abs(t))) + 1
        np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(t), atol=tol * 4 * scale, rtol=tol)


def test_jax_vmap_and_group_offset_on_gpu():
    import jax
    import jax.numpy as jnp
    from jax import lax

    import ragdot.jax as rj

    dev = jax_gpu()
    rng = np.random.default_rng(1)
    x = jax.device_put(jnp.asarray(rng.standard_normal((3, 64, 32)), jnp.bfloat16), dev)
    w = jax.device_put(jnp.asarray(rng.standard_normal((4, 32, 48)), jnp.bfloat16), dev)
    gs = jax.device_put(jnp.array([[10, 0, 30, 24], [64, 0, 0, 0], [1, 2, 3, 4]], jnp.int32), dev)
    ours = jax.jit(jax.vmap(rj.ragged_dot, (0, None, 0)))(x, w, gs)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(ours[i], np.float32), np.asarray(lax.ragged_dot(x[i], w, gs[i]), np.float32),
                                   atol=0.25, rtol=0.05)
    shard = jax.jit(lambda a, b, g: rj.ragged_dot(a, b, g, group_offset=jnp.array([2], jnp.int32)))(x[0], w[2:], gs[0])
    np.testing.assert_array_equal(np.asarray(shard[:10], np.float32), 0)
    np.testing.assert_allclose(np.asarray(shard[10:40], np.float32),
                               np.asarray(x[0][10:40] @ w[2], np.float32), atol=0.25, rtol=0.05)


def test_torch_cuda_eager_and_grouped_mm():
    torch = pytest.importorskip("torch")
    import ragdot
    import ragdot.torch as rt

    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    torch.manual_seed(0)
    sizes = [40, 0, 100, 16]
    offs = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    a = torch.randn(156, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(4, 64, 96, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    ours = rt.grouped_mm(a, b, offs=offs)
    eager = ragdot.ragged_dot(a, b, torch.tensor(sizes, dtype=torch.int32, device="cuda"))
    torch.testing.assert_close(ours, eager)
    try:
        theirs = torch._grouped_mm(a, b.transpose(-2, -1).contiguous().transpose(-2, -1), offs=offs)
    except RuntimeError as e:  # torch._grouped_mm needs a recent GPU and layout
        pytest.skip(f"torch._grouped_mm unavailable: {e}")
    torch.testing.assert_close(ours.float(), theirs.float(), atol=0.5, rtol=0.05)
    cot = torch.randn_like(ours)
    ga, gb = torch.autograd.grad((ours * cot).float().sum(), (a, b))
    ra, rb = torch.autograd.grad((theirs * cot).float().sum(), (a, b))
    torch.testing.assert_close(ga.float(), ra.float(), atol=1.0, rtol=0.05)
    torch.testing.assert_close(gb.float(), rb.float(), atol=1.0, rtol=0.05)


def test_cupy_eager():
    cupy = pytest.importorskip("cupy")
    import ragdot

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((50, 16)).astype(np.float32), rng.standard_normal((3, 16, 8)).astype(np.float32)
    gs = np.array([20, 0, 25], np.int32)
    out = ragdot.ragged_dot(cupy.asarray(x), cupy.asarray(w), cupy.asarray(gs))
    np.testing.assert_allclose(cupy.asnumpy(out), ragdot.ragged_dot(x, w, gs), atol=1e-3, rtol=1e-3)
