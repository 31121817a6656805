"""ragdot.jax.enable(): JAX-only programs (jax.lax.ragged_dot, never ragdot's API) lower to ragdot's
custom call and compute the same values and gradients as with JAX's own lowering."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ragdot.jax as rj
from conftest import CASES, random_case

TARGET = "ragdot_ragged_dot_general"


@pytest.fixture(autouse=True)
def restore():
    yield
    rj.disable()


def moe_layer(x, w_up, w_down, router):
    """A small MoE layer written with jax.lax only: top-2 routing, sort by expert, SwiGLU, combine."""
    e, f = w_up.shape[0], w_down.shape[1]
    logits = x @ router
    weights, experts = lax.top_k(logits, 2)
    weights = jax.nn.softmax(weights, axis=-1)
    flat = experts.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    rows = x[order // 2]
    sizes = jnp.bincount(flat, length=e).astype(jnp.int32)
    up = lax.ragged_dot(rows, w_up, sizes)
    act = jax.nn.silu(up[:, :f]) * up[:, f:]
    down = lax.ragged_dot(act, w_down, sizes)
    out = jnp.zeros((flat.shape[0], x.shape[1]), down.dtype).at[order].set(down)
    return jnp.sum(out.reshape(x.shape[0], 2, -1) * weights[..., None], axis=1)


def moe_inputs(seed=0, t=24, h=16, f=8, e=6):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.standard_normal((t, h)), jnp.float32),
            jnp.asarray(rng.standard_normal((e, h, 2 * f)) / 4, jnp.float32),
            jnp.asarray(rng.standard_normal((e, f, h)) / 3, jnp.float32),
            jnp.asarray(rng.standard_normal((h, e)), jnp.float32))


def loss(*args):
    return jnp.sum(moe_layer(*args) ** 2)


def test_a_jax_only_moe_layer_gives_the_same_values_and_gradients():
    args = moe_inputs()
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    base_value, base_grads = step(*args)
    rj.enable()
    assert TARGET in jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(*args).as_text()
    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))(*args)
    np.testing.assert_allclose(value, base_value, rtol=1e-5)
    for ours, theirs in zip(grads, base_grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * float(jnp.max(jnp.abs(theirs))))


def test_disable_and_the_context_manager_restore_jax_lowering():
    args = moe_inputs(1)
    f = jax.jit(loss)
    assert TARGET not in f.lower(*args).as_text()
    with rj.enabled():
        assert rj.is_enabled()
        assert jax.jit(loss).lower(*args).as_text().count(TARGET) == 2  # the up and the down ragged dot
    assert not rj.is_enabled()
    assert TARGET not in jax.jit(loss).lower(*args).as_text()
    base = f(*args)
    rj.enable()
    rj.disable()
    np.testing.assert_allclose(jax.jit(loss)(*args), base, rtol=1e-6)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_mode_and_layout_lowers_to_ragdot(name):
    lhs, rhs, gs, dims = random_case(name, 21)
    jdims = dims.to_jax()
    fn = jax.jit(lambda a, b: lax.ragged_dot_general(a, b, gs, jdims))
    base = fn(lhs, rhs)
    rj.enable()
    fn = jax.jit(lambda a, b: lax.ragged_dot_general(a, b, gs, jdims))
    assert TARGET in fn.lower(lhs, rhs).as_text()
    np.testing.assert_allclose(fn(lhs, rhs), base, rtol=1e-5, atol=1e-5)


def test_ops_ragdot_does_not_take_keep_jax_lowering_and_say_why(monkeypatch, capsys):
    monkeypatch.setenv("RAGDOT_JAX_DEBUG", "1")
    x, w, gs = jnp.ones((6, 4), jnp.int8), jnp.ones((2, 4, 3), jnp.int8), jnp.array([2, 4], jnp.int32)
    base = jax.jit(lambda a, b: lax.ragged_dot(a, b, gs))(x, w)
    rj.enable()
    fn = jax.jit(lambda a, b: lax.ragged_dot(a, b, gs))
    assert TARGET not in fn.lower(x, w).as_text()
    np.testing.assert_array_equal(fn(x, w), base)
    assert "keeping JAX's lowering" in capsys.readouterr().err


def test_whole_programs_run_unchanged_under_python_m_ragdot_jax(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "program.py"
    script.write_text(
        "import sys, jax, jax.numpy as jnp\n"
        "x, w, g = jnp.ones((6, 4)), jnp.ones((2, 4, 3)), jnp.array([2, 4], jnp.int32)\n"
        "text = jax.jit(lambda a, b: jax.lax.ragged_dot(a, b, g)).lower(x, w).as_text()\n"
        f"print('lowered to ragdot' if {TARGET!r} in text else 'jax lowering', sys.argv[1:])\n")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for cmd, expect in (([sys.executable, "-m", "ragdot.jax", str(script), "--flag"], "lowered to ragdot"),
                        ([sys.executable, str(script), "--flag"], "jax lowering")):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"{expect} ['--flag']", out.stdout + out.stderr
    env["RAGDOT_JAX_LOWERING"] = "1"
    script.write_text("import ragdot.jax\n" + script.read_text())
    out = subprocess.run([sys.executable, str(script), "--flag"], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "lowered to ragdot ['--flag']", out.stdout + out.stderr


def test_float32_by_bf16_products_are_narrowed_on_cuda_at_default_precision_only():
    from ragdot.jax._lowering import narrowed_operand

    f32, bf16, f16 = jnp.float32, jnp.bfloat16, jnp.float16
    assert narrowed_operand("cuda", f32, bf16, None) == 0  # the cotangent against a bf16 weight
    assert narrowed_operand("cuda", bf16, f32, None) == 1
    assert narrowed_operand("cuda", bf16, f32, (lax.Precision.DEFAULT, lax.Precision.DEFAULT)) == 1
    assert narrowed_operand("cuda", f32, bf16, lax.Precision.HIGHEST) is None
    assert narrowed_operand("cuda", f32, bf16, (lax.Precision.DEFAULT, lax.Precision.HIGH)) is None
    assert narrowed_operand("cuda", f32, bf16, lax.DotAlgorithmPreset.F32_F32_F32) is None
    assert narrowed_operand("cuda", f16, f32, None) is None  # float16's range is too small for it
    assert narrowed_operand("cuda", bf16, bf16, None) is None
    assert narrowed_operand("cuda", f32, f32, None) is None
    assert narrowed_operand("cpu", f32, bf16, None) is None  # exact on the CPU
