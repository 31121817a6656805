#!/usr/bin/env python3
"""GPU benchmark, peer side: times the framework peers on exactly the cases (shapes and group
sizes) that gpu_bench wrote, in the same run: torch._grouped_mm, the capacity-padded baseline
(scatter, torch.bmm, gather), the dense roof through torch.mm, and jax.lax.ragged_dot under jit
(in its own process, so that XLA's allocator does not compete with PyTorch's).

    gpu_peers.py --cases gpu_bench.json --out peers.json [--reps N] [--jax]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def cuda_median_ms(fn, reps):
    """Median milliseconds of `reps` runs of `fn` on the current CUDA stream (CUDA events), after
    three warm-up runs."""
    return statistics.median(cuda_times_ms(fn, reps))


def cuda_times_ms(fn, reps):
    """Milliseconds of each of `reps` runs of `fn` (CUDA events), after three warm-up runs."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def cuda_alternating_ms(fa, fb, reps, rounds=4):
    """Medians (ms) of `fa` and `fb` timed in alternating rounds (a b, b a, a b, b a), each round
    warmed up: the GPU's clocks drift within a case, and timing one after the other would put that
    drift into their ratio; the mirrored order gives each the first place in a round, which runs on
    a cooler GPU, equally often (gpu_bench's time_alternating does the same)."""
    ta, tb = [], []
    per_round = max(1, -(-reps // rounds))
    for r in range(rounds):
        if r % 2 == 0:
            ta += cuda_times_ms(fa, per_round)
            tb += cuda_times_ms(fb, per_round)
        else:
            tb += cuda_times_ms(fb, per_round)
            ta += cuda_times_ms(fa, per_round)
    return statistics.median(ta), statistics.median(tb)


def torch_peers(cases, reps):
    import torch

    dev = torch.device("cuda")
    results = []

    def timed(fn):
        return cuda_median_ms(fn, reps)

    for c in cases:
        if "error" in c:  # ragdot could not run this case: nothing to compare against
            results.append({"name": c["name"], "skew": c["skew"], "mode": c["mode"], "ms": {}, "notes": {}})
            continue
        M, K, N, E, mode = c["M"], c["K"], c["N"], c["E"], c["mode"]
        sizes = torch.tensor(c["group_sizes"], dtype=torch.int32, device=dev)
        offs = torch.cumsum(sizes, 0, dtype=torch.int32)
        r = {"name": c["name"], "skew": c["skew"], "mode": mode, "ms": {}, "notes": {}}
        print(f"[peers] {c['name']} skew={c['skew']} mode={mode}", file=sys.stderr, flush=True)
        try:
            x = (torch.rand(M, K, device=dev, dtype=torch.bfloat16) * 2 - 1)
            if mode == 1:
                # [E, N, K] storage viewed as [E, K, N]: the layout the CUTLASS sm90 path asks for
                w = (torch.rand(E, N, K, device=dev, dtype=torch.bfloat16) * 2 - 1).transpose(-2, -1)
                # torch._grouped_mm in alternating rounds with a yardstick: the dense GEMM that
                # gpu_bench times in alternating rounds with ragdot (its dense roof: the same
                # cuBLAS product of [M, K] by a row-major [K, N]). The two ratios to it give a
                # ragdot / torch ratio that the clocks' drift between the two processes leaves out.
                w_kn = (torch.rand(K, N, device=dev, dtype=torch.bfloat16) * 2 - 1)
                r["ms"]["torch_grouped_mm"], r["ms"]["dense_yardstick_torch"] = cuda_alternating_ms(
                    lambda: torch._grouped_mm(x, w, offs=offs), lambda: torch.mm(x, w_kn), reps)
                del w_kn
                r["ms"]["dense_roof_torch"] = timed(lambda: torch.mm(x, w[0]))
                # padded: scatter rows to [E, cap, K], bmm, gather back
                cap = max(int(c["max_group"]), 1)
                starts = torch.cumsum(sizes, 0) - sizes
                row_expert = torch.repeat_interleave(torch.arange(E, device=dev), sizes.long())
                row_slot = torch.arange(M, device=dev) - starts.long()[row_expert]
                flat = row_expert * cap + row_slot
                wc = w.contiguous()

                def padded():
                    buf = torch.zeros(E * cap, K, device=dev, dtype=torch.bfloat16)
                    buf.index_copy_(0, flat, x)
                    y = torch.bmm(buf.view(E, cap, K), wc)
                    return y.view(E * cap, N).index_select(0, flat)

                try:
                    r["ms"]["padded"] = timed(padded)
                except torch.OutOfMemoryError:
                    r["notes"]["padded"] = "out of memory"
                del wc
            else:
                dy = (torch.rand(M, N, device=dev, dtype=torch.bfloat16) * 2 - 1)
                xt = x.t()  # [K, M] viewed; the ragged dim is the contraction
                r["ms"]["torch_grouped_mm"] = timed(lambda: torch._grouped_mm(xt, dy, offs=offs))
                r["ms"]["dense_roof_torch"] = timed(lambda: torch.mm(xt, dy))
        except Exception as e:  # a peer that cannot run this case is reported, not fatal
            r["notes"]["torch"] = f"{type(e).__name__}: {e}"[:300]
        torch.cuda.empty_cache()
        results.append(r)
    return results


def jax_peers(cases, reps):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import numpy as np

    results = []
    for c in cases:
        if "error" in c:
            results.append({"name": c["name"], "skew": c["skew"], "mode": c["mode"], "ms": {}, "notes": {}})
            continue
        M, K, N, E, mode = c["M"], c["K"], c["N"], c["E"], c["mode"]
        r = {"name": c["name"], "skew": c["skew"], "mode": mode, "ms": {}, "notes": {}}
        print(f"[jax] {c['name']} skew={c['skew']} mode={mode}", file=sys.stderr, flush=True)
        if mode != 1:
            r["notes"]["jax"] = "mode 2 not timed"
            results.append(r)
            continue
        try:
            key = jax.random.PRNGKey(0)
            k1, k2 = jax.random.split(key)
            x = jax.random.uniform(k1, (M, K), jnp.bfloat16, -1, 1)
            w = jax.random.uniform(k2, (E, K, N), jnp.bfloat16, -1, 1)
            gs = jnp.asarray(np.array(c["group_sizes"], dtype=np.int32))
            f = jax.jit(lambda a, b, g: jax.lax.ragged_dot(a, b, g))
            for _ in range(2):
                f(x, w, gs).block_until_ready()
            times = []
            for _ in range(max(3, reps // 2)):
                t0 = time.perf_counter()
                f(x, w, gs).block_until_ready()
                times.append((time.perf_counter() - t0) * 1e3)
            r["ms"]["jax_ragged_dot"] = statistics.median(times)
            del x, w
        except Exception as e:
            msg = f"{type(e).__name__}: {e}"
            r["notes"]["jax"] = "out of memory" if "RESOURCE_EXHAUSTED" in msg or "out of memory" in msg.lower() else msg[:300]
        results.append(r)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--jax", action="store_true", help="time jax.lax.ragged_dot (run in its own process)")
    a = ap.parse_args()
    with open(a.cases) as f:
        cases = json.load(f)["cases"]
    res = jax_peers(cases, a.reps) if a.jax else torch_peers(cases, a.reps)
    with open(a.out, "w") as f:
        json.dump({"results": res}, f, indent=1)


if __name__ == "__main__":
    main()
