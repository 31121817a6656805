#!/usr/bin/env python3
"""An unmodified JAX MoE training step (written with jax.lax.ragged_dot only) timed with JAX's own
lowering and with ragdot.jax.enable(), on the model presets: the speedup, and the peak device
memory of each (jax.devices()[0].memory_stats()["peak_bytes_in_use"]).

The step is one routed-expert MoE layer as MaxText's sparse path writes it: router logits, top-k,
softmax over the chosen logits, argsort of the (token, slot) pairs by expert, gather, one ragged
dot for gate and up, SwiGLU, one ragged dot down, unsort, weighted combine; loss = mean square;
jax.value_and_grad with respect to x, the router and both expert weight stacks; bf16 parameters
and activations, jitted. Each (preset, lowering) runs in a process of its own, so that its peak
memory is its own and an out-of-memory failure is reported, not fatal.

    jax_enable_step.py --json OUT.json --md OUT.md [--quick] [--reps N] [--shrink F]

--shrink F divides tokens, hidden and ffn by F (a smoke test on the CPU).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PRESETS = [  # name, tokens, hidden, expert ffn, experts, top-k
    ("mixtral-8x7b", 4096, 4096, 14336, 8, 2),
    ("qwen3-30b-a3b", 8192, 2048, 768, 128, 8),
    ("deepseek-v3", 4096, 7168, 2048, 256, 8),
]


def moe_step(tokens, hidden, ffn, experts, top_k):
    """The jitted training step and its inputs; only jax.lax.ragged_dot does the expert GEMMs."""
    import jax
    import jax.numpy as jnp

    def layer(x, router, w_up, w_down):
        logits = (x @ router).astype(jnp.float32)                       # [T, E]
        top_logits, top_experts = jax.lax.top_k(logits, top_k)           # [T, k]
        weights = jax.nn.softmax(top_logits, axis=-1)
        flat = top_experts.reshape(-1)                                   # pair p = (token p // k, slot p % k)
        order = jnp.argsort(flat, stable=True)
        rows = jnp.take(x, order // top_k, axis=0)                       # [T k, H], sorted by expert
        sizes = jnp.bincount(flat, length=experts).astype(jnp.int32)
        up = jax.lax.ragged_dot(rows, w_up, sizes, preferred_element_type=jnp.float32)
        act = (jax.nn.silu(up[:, :ffn]) * up[:, ffn:]).astype(x.dtype)
        down = jax.lax.ragged_dot(act, w_down, sizes, preferred_element_type=jnp.float32)
        unsorted = jnp.zeros_like(down).at[order].set(down)             # back to pair order
        y = (unsorted.reshape(tokens, top_k, hidden) * weights[..., None]).sum(axis=1)
        return y

    def loss(x, router, w_up, w_down):
        y = layer(x, router, w_up, w_down)
        return jnp.mean(y * y)

    key = jax.random.PRNGKey(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    x = (jax.random.normal(k1, (tokens, hidden)) * 0.5).astype(jnp.bfloat16)
    router = (jax.random.normal(k2, (hidden, experts)) * hidden ** -0.5).astype(jnp.bfloat16)
    w_up = (jax.random.normal(k3, (experts, hidden, 2 * ffn)) * hidden ** -0.5).astype(jnp.bfloat16)
    w_down = (jax.random.normal(k4, (experts, ffn, hidden)) * ffn ** -0.5).astype(jnp.bfloat16)
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    return step, (x, router, w_up, w_down)


def run_one(name, lowering, reps, shrink):
    """Child process: one preset under one lowering; prints a JSON line."""
    import jax

    if lowering == "ragdot":
        import ragdot.jax

        ragdot.jax.enable()
    _, tokens, hidden, ffn, experts, top_k = next(p for p in PRESETS if p[0] == name)
    tokens, hidden, ffn = tokens // shrink, hidden // shrink, ffn // shrink
    result = {"preset": name, "lowering": lowering}
    try:
        step, args = moe_step(tokens, hidden, ffn, experts, top_k)
        text = step.lower(*args).as_text()
        result["ragdot_custom_calls"] = text.count("custom_call @ragdot")
        for _ in range(3):
            jax.block_until_ready(step(*args))
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(step(*args))
            times.append((time.perf_counter() - t) * 1e3)
        result["ms"] = statistics.median(times)
        loss, _ = step(*args)
        result["loss"] = float(loss)
    except Exception as err:  # out of memory under XLA's dense expansion, most often
        msg = f"{type(err).__name__}: {err}"
        result["error"] = "out of memory" if "RESOURCE_EXHAUSTED" in msg or "out of memory" in msg.lower() else msg[:300]
    stats = jax.devices()[0].memory_stats() or {}
    result["peak_bytes"] = stats.get("peak_bytes_in_use")
    print("RESULT " + json.dumps(result), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="mixtral and deepseek-v3 only, fewer repetitions")
    ap.add_argument("--shrink", type=int, default=1, help="divide tokens, hidden and ffn by this")
    ap.add_argument("--one", nargs=2, metavar=("PRESET", "LOWERING"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        run_one(args.one[0], args.one[1], args.reps, args.shrink)
        return
    # quick: mixtral, and deepseek-v3, where JAX's own lowering runs out of memory
    presets = [PRESETS[0], PRESETS[2]] if args.quick else PRESETS
    reps = 3 if args.quick else args.reps
    records = []
    for name, *_ in presets:
        for lowering in ("jax", "ragdot"):
            print(f"[jax_enable_step] {name} with the {lowering} lowering", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, "--one", name, lowering, "--reps", str(reps),
                                   "--shrink", str(args.shrink)],
                                  capture_output=True, text=True, timeout=600, env=dict(os.environ))
            line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
            if line:
                records.append(json.loads(line[len("RESULT "):]))
            else:
                records.append({"preset": name, "lowering": lowering,
                                "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1)
    lines = ["| preset | JAX's lowering ms | enable() ms | speedup | peak GiB (JAX) | peak GiB (enable) | ragdot calls | loss (JAX / enable) |",
             "|---|---|---|---|---|---|---|---|"]
    gib = lambda b: f"{b / 2**30:.1f}" if isinstance(b, (int, float)) else "-"
    for name, *_ in presets:
        jx = next((r for r in records if r["preset"] == name and r["lowering"] == "jax"), {})
        rd = next((r for r in records if r["preset"] == name and r["lowering"] == "ragdot"), {})
        fmt = lambda r: f"{r['ms']:.2f}" if "ms" in r else r.get("error", "-")
        speed = f"{jx['ms'] / rd['ms']:.1f}x" if "ms" in jx and "ms" in rd else "-"
        losses = f"{jx.get('loss', float('nan')):.5g} / {rd.get('loss', float('nan')):.5g}"
        lines.append(f"| {name} | {fmt(jx)} | {fmt(rd)} | {speed} | {gib(jx.get('peak_bytes'))} | "
                     f"{gib(rd.get('peak_bytes'))} | {rd.get('ragdot_custom_calls', '-')} | {losses} |")
    table = "\n".join(lines) + "\n"
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(table)
    print(table)


if __name__ == "__main__":
    main()
