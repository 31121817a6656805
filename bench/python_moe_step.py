#!/usr/bin/env python3
"""GPU benchmark of the Python bindings: one jitted MoE expert step (up GEMM, SwiGLU, down GEMM,
forward and backward) in JAX with ragdot.jax.ragged_dot against the same step with
jax.lax.ragged_dot (and that unmodified step again under ragdot.jax.enable()), and in PyTorch
with ragdot.torch.grouped_mm against torch._grouped_mm.
Tokens arrive sorted by expert with seeded, skewed routing; times are medians of CUDA-synced
wall clock. Writes JSON and prints a markdown table of ratios (peer ms / ragdot ms).

    python_moe_step.py --json OUT.json --md OUT.md [--quick] [--only jax|torch]
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

SHAPES = [  # name, tokens (already times top-k), hidden, expert ffn, experts
    ("mixtral-8x7b", 8192, 4096, 14336, 8),
    ("qwen3-30b-a3b", 16384, 2048, 768, 128),
]


def group_sizes(tokens, experts, seed=0):
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(experts, 2.0))
    sizes = rng.multinomial(tokens, weights).astype(np.int32)
    sizes[0] = 0  # an empty expert, as a skewed router produces
    sizes[1] += tokens - sizes.sum()
    return sizes


def median_ms(fn, sync, reps, warmup=3):
    """Median CUDA-synchronized wall time of fn() in ms, after `warmup` untimed calls."""
    for _ in range(warmup):
        sync(fn())
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sync(fn())
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def jax_step_times(shape, reps):
    import jax
    import jax.numpy as jnp
    from jax import lax

    import ragdot.jax as rj

    _, t, h, f, e = shape
    sizes = jnp.asarray(group_sizes(t, e))
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = (jax.random.normal(k1, (t, h)) * 0.1).astype(jnp.bfloat16)
    w_up = (jax.random.normal(k2, (e, h, 2 * f)) * 0.02).astype(jnp.bfloat16)
    w_down = (jax.random.normal(k3, (e, f, h)) * 0.02).astype(jnp.bfloat16)

    def step(rd):
        def loss(x, w_up, w_down):
            up = rd(x, w_up, sizes, preferred_element_type=jnp.float32)
            act = (jax.nn.silu(up[:, :f]) * up[:, f:]).astype(jnp.bfloat16)
            y = rd(act, w_down, sizes, preferred_element_type=jnp.float32)
            return jnp.mean(y * y)

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))

    out = {}
    for name, rd in (("ragdot", rj.ragged_dot), ("jax_lax", lax.ragged_dot)):
        fn = step(rd)
        out[name] = median_ms(lambda: fn(x, w_up, w_down), jax.block_until_ready, reps)
    # the unmodified jax.lax step with JAX's ragged dot lowered to ragdot (ragdot.jax.enable())
    with rj.enabled():
        fn = step(lax.ragged_dot)
        out["jax_lax_enabled"] = median_ms(lambda: fn(x, w_up, w_down), jax.block_until_ready, reps)
    return out


def torch_step_times(shape, reps):
    import torch

    import ragdot.torch as rt

    _, t, h, f, e = shape
    dev = torch.device("cuda")
    sizes = torch.tensor(group_sizes(t, e), device=dev)
    offs = torch.cumsum(sizes, 0, dtype=torch.int32)
    x = (torch.randn(t, h, device=dev) * 0.1).bfloat16().requires_grad_()
    # torch._grouped_mm wants its weights [E, N, K] in memory, viewed as [E, K, N]
    w_up_nk = (torch.randn(e, 2 * f, h, device=dev) * 0.02).bfloat16()
    w_down_nk = (torch.randn(e, h, f, device=dev) * 0.02).bfloat16()
    weights = {
        "ragdot": (w_up_nk.transpose(-2, -1).contiguous().requires_grad_(),
                   w_down_nk.transpose(-2, -1).contiguous().requires_grad_()),
        "torch_grouped_mm": (w_up_nk.transpose(-2, -1).requires_grad_(), w_down_nk.transpose(-2, -1).requires_grad_()),
    }
    ops = {"ragdot": rt.grouped_mm, "torch_grouped_mm": torch._grouped_mm}

    def step(mm, w_up, w_down):
        def run():
            up = mm(x, w_up, offs=offs)
            act = torch.nn.functional.silu(up[:, :f]) * up[:, f:]
            y = mm(act, w_down, offs=offs)
            loss = (y.float() ** 2).mean()
            return torch.autograd.grad(loss, (x, w_up, w_down))

        return run

    out = {}
    for name in ("ragdot", "torch_grouped_mm"):
        try:
            out[name] = median_ms(step(ops[name], *weights[name]), lambda _: torch.cuda.synchronize(), reps)
        except RuntimeError as err:
            print(f"[python_moe_step] {name}: {err}", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="the first shape only, fewer repetitions")
    ap.add_argument("--only", choices=["jax", "torch"])
    args = ap.parse_args()
    shapes = SHAPES[:1] if args.quick else SHAPES
    reps = 5 if args.quick else args.reps
    records = []
    for shape in shapes:
        for framework, timer, peer in (("jax", jax_step_times, "jax_lax"), ("torch", torch_step_times, "torch_grouped_mm")):
            if args.only and args.only != framework:
                continue
            print(f"[python_moe_step] {framework} {shape[0]}", file=sys.stderr, flush=True)
            try:
                ms = timer(shape, reps)
            except Exception as err:  # a framework that cannot run here is reported, not fatal
                ms = {"error": f"{type(err).__name__}: {err}"[:300]}
            ratio = ms[peer] / ms["ragdot"] if "ragdot" in ms and peer in ms else None
            records.append({"shape": shape[0], "tokens": shape[1], "hidden": shape[2], "ffn": shape[3],
                            "experts": shape[4], "framework": framework, "peer": peer, "ms": ms,
                            "peer_over_ragdot": ratio})
    with open(args.json, "w") as fh:
        json.dump(records, fh, indent=1)
    lines = ["| shape | framework | ragdot ms | peer | peer ms | peer / ragdot |", "|---|---|---|---|---|---|"]
    for r in records:
        ms = r["ms"]
        fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"
        lines.append(f"| {r['shape']} | {r['framework']} fwd+bwd | {fmt(ms.get('ragdot'))} | {r['peer']} | "
                     f"{fmt(ms.get(r['peer']))} | {fmt(r['peer_over_ragdot'])} |")
        if "jax_lax_enabled" in ms:
            lines.append(f"| {r['shape']} | jax.lax step, ragdot.jax.enable() | {fmt(ms['jax_lax_enabled'])} | "
                         f"{r['peer']} | {fmt(ms.get(r['peer']))} | {fmt(ms.get(r['peer'], 0) / ms['jax_lax_enabled'])} |")
        if "error" in ms:
            lines.append(f"| | error: {ms['error']} | | | | |")
    with open(args.md, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
