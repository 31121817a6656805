#!/usr/bin/env python3
"""Expert-parallel MoE layer in JAX (ragdot.jax.expert_parallel) on the GPUs jax.devices() shows:
tokens/s of the routed experts of one layer of a preset, for 1, 2, 4, ... up to all devices, with
a fixed number of tokens per device (weak scaling: the experts and the tokens are sharded over
the devices) or a fixed global batch (--global-tokens: strong scaling). Each line: devices,
dispatch, transport, the median time of the jitted layer (forward, or forward and backward with
--grad), tokens/s over all devices and per device, and the speedup over one device.
NCCL_NVLS_ENABLE=0 is set (NVLink multicast off) unless the environment says otherwise.

    bench/ep_jax.py [--preset qwen3-30b-a3b] [--tokens-per-device 4096] [--dtype bf16] [--grad]
                    [--dispatch all_to_all,all_gather] [--transport ragged|dense] [--check] [--json OUT]
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before JAX starts NCCL
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

PRESETS = {  # hidden, expert ffn, experts, top-k, router, routed scaling (docs: WORKLOADS.md)
    "mixtral-8x7b": (4096, 14336, 8, 2, "softmax", 1.0),
    "deepseek-v3": (7168, 2048, 256, 8, "deepseek_v3", 2.5),
    "llama4-scout": (5120, 8192, 16, 1, "llama4", 1.0),
    "qwen3-30b-a3b": (2048, 768, 128, 8, "softmax", 1.0),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="qwen3-30b-a3b", choices=sorted(PRESETS))
    p.add_argument("--shrink", type=int, default=1, help="divide hidden and ffn by this (small runs)")
    p.add_argument("--tokens-per-device", type=int, default=4096)
    p.add_argument("--global-tokens", type=int, default=0, help="fixed global batch instead (strong scaling)")
    p.add_argument("--devices", default="", help="comma-separated device counts (default 1, 2, 4, ... all)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    p.add_argument("--skew", type=float, default=0.0, help="Zipf-like routing skew (0: about uniform)")
    p.add_argument("--dispatch", default="all_to_all", help="all_to_all, all_gather or both, comma-separated")
    p.add_argument("--transport", default="auto", choices=["auto", "ragged", "dense"])
    p.add_argument("--ragged-dot", default="ragdot", choices=["ragdot", "jax.lax"],
                   help="the local experts' ragged dot (jax.lax: only with the all_to_all dispatch)")
    p.add_argument("--grad", action="store_true", help="time forward and backward (grads of x and the weights)")
    p.add_argument("--check", action="store_true",
                   help="compare with the single-device layer (ragdot's ragged dot) on device 0 first")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json", default="")
    return p.parse_args()


def device_counts(spec, available):
    if spec:
        return [int(s) for s in spec.split(",") if int(s) <= available]
    counts, n = [], 1
    while n <= available:
        counts.append(n)
        n *= 2
    if counts[-1] != available:
        counts.append(available)
    return counts


def main():
    args = parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    import ragdot.jax as rj
    from ragdot.jax.moe import MoeParams, moe_layer

    hidden, ffn, experts, top_k, router, scaling = PRESETS[args.preset]
    hidden, ffn = hidden // args.shrink, ffn // args.shrink
    dtype = jnp.bfloat16 if args.dtype == "bf16" else jnp.float32
    devices = jax.devices()
    print(f"# {args.preset} H={hidden} F={ffn} E={experts} k={top_k} {args.dtype}, {len(devices)} x "
          f"{devices[0].device_kind}, jax {jax.__version__}, NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}",
          flush=True)
    ragged_dot = rj.ragged_dot if args.ragged_dot == "ragdot" else jax.lax.ragged_dot

    def make(mesh, tokens, seed=0):
        """Inputs and weights made on the devices, already sharded (no host copy of the weights)."""
        shard = lambda spec: NamedSharding(mesh, spec)

        @jax.jit
        def init(key):
            kx, kr, ku, kd = jax.random.split(key, 4)
            x = jax.random.normal(kx, (tokens, hidden), jnp.float32)
            r = jax.random.normal(kr, (hidden, experts), jnp.float32) / np.sqrt(hidden)
            if args.skew:  # a constant input feature carries a Zipf-like bias per expert
                x = x.at[:, 0].set(1.0)
                rank = jax.random.permutation(kr, experts) + 1
                r = r.at[0].set(-args.skew * jnp.log(rank.astype(jnp.float32)))
            up = jax.random.normal(ku, (experts, hidden, 2 * ffn), jnp.float32) / np.sqrt(hidden)
            down = jax.random.normal(kd, (experts, ffn, hidden), jnp.float32) / np.sqrt(ffn)
            return x.astype(dtype), MoeParams(r, up.astype(dtype), down.astype(dtype))

        out = (shard(P("ep")), MoeParams(shard(P()), shard(P("ep")), shard(P("ep"))))
        return jax.jit(init, out_shardings=out)(jax.random.PRNGKey(seed))

    def median_ms(fn, *a):
        for _ in range(2):
            jax.block_until_ready(fn(*a))
        times = []
        for _ in range(args.reps):
            t = time.perf_counter()
            jax.block_until_ready(fn(*a))
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    records, base = [], {}
    for n in device_counts(args.devices, len(devices)):
        mesh = rj.expert_mesh(n)
        tokens = args.global_tokens or args.tokens_per_device * n
        if tokens % n or experts % n:
            print(f"{n} devices: skipped ({tokens} tokens, {experts} experts not multiples of {n})")
            continue
        x, params = make(mesh, tokens)
        for dispatch in args.dispatch.split(","):
            layer = lambda x, p: rj.expert_parallel_moe(x, p, mesh, top_k=top_k, router=router, scaling=scaling,
                                                        dispatch=dispatch, transport=args.transport,
                                                        ragged_dot=ragged_dot)
            if args.grad:
                fn = jax.jit(jax.grad(lambda x, p: jnp.sum(layer(x, p).astype(jnp.float32)), argnums=(0, 1)))
            else:
                fn = jax.jit(layer)
            rec = dict(preset=args.preset, devices=n, tokens=tokens, dispatch=dispatch, dtype=args.dtype,
                       transport=args.transport if args.transport != "auto" else "ragged", grad=args.grad,
                       skew=args.skew, ragged_dot=args.ragged_dot, hidden=hidden, ffn=ffn)
            try:
                if args.check and not args.grad:
                    single = jax.jit(lambda x, p: moe_layer(x, p, top_k=top_k, router=router, scaling=scaling,
                                                            ragged_dot=rj.ragged_dot))
                    on0 = jax.device_put((x, params), devices[0])
                    want = np.asarray(single(*on0), np.float32)
                    got = np.asarray(fn(x, params), np.float32)
                    rec["rel_err"] = float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))
                ms = median_ms(fn, x, params)
            except Exception as err:  # noqa: BLE001 -- an OOM on one size should not end the sweep
                rec["error"] = str(err).splitlines()[0][:300]
                print(f"{n:3d} dev {dispatch:10s} error: {rec['error']}", flush=True)
                records.append(rec)
                continue
            rec.update(ms=ms, tokens_per_s=tokens / ms * 1e3, tokens_per_s_per_device=tokens / ms * 1e3 / n)
            base.setdefault(dispatch, rec["tokens_per_s"])
            rec["speedup_vs_1"] = rec["tokens_per_s"] / base[dispatch]
            check = f" rel_err {rec['rel_err']:.2e}" if "rel_err" in rec else ""
            print(f"{n:3d} dev {dispatch:10s} {tokens:7d} tok {ms:9.3f} ms {rec['tokens_per_s']:12.0f} tok/s "
                  f"{rec['tokens_per_s_per_device']:10.0f} tok/s/dev x{rec['speedup_vs_1']:.2f}{check}", flush=True)
            records.append(rec)
        del x, params
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    bad = [r for r in records if "error" in r or r.get("rel_err", 0) > (5e-2 if args.dtype == "bf16" else 1e-4)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
