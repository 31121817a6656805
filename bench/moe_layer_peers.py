#!/usr/bin/env python3
"""The MoE layer peers of `ragdot layer --backend cuda`, on the same GPU: the same layer (preset
shapes, bf16, the preset's router, shared experts) as

  torch: a PyTorch eager layer on torch._grouped_mm (router, argsort permutation, gather, grouped
         mm for gate+up, SwiGLU, grouped mm down, scatter-add combine in f32), forward and
         forward + backward (autograd, gradients of x and of every weight);
  jax:   a jitted JAX layer on jax.lax.ragged_dot, MaxText's sparse path (router, argsort, take,
         ragged_dot up, SwiGLU, ragged_dot down, unsort, weighted sum), forward and forward +
         backward (jax.vjp).

The input x, the router weights and DeepSeek-V3's router bias are the values ragdot fills on the
device (a counter-based hash of (seed, index): kernels/ragdot/fill_params.h), reproduced here with
NumPy, so the routing is ragdot's up to the rounding of the logits; expert weights are random
with the same scales. Times are medians of CUDA-synchronized wall clock after warm-up. Errors are
recorded, not fatal; JAX's out-of-memory (its dense expansion of ragged_dot on many experts) is
reported as "out of memory".

    moe_layer_peers.py --framework torch|jax --cases qwen3-30b-a3b:4096,deepseek-v3:8192 --json OUT.json
"""
import argparse
import json
import sys
import time

import numpy as np

from python_moe_step import median_ms  # same directory

# preset: hidden, expert ffn, experts, top-k, shared experts, router (as ragdot's presets)
PRESETS = {
    "mixtral-8x7b": (4096, 14336, 8, 2, 0, "softmax_topk"),
    "deepseek-v3": (7168, 2048, 256, 8, 1, "deepseek_v3"),
    "llama4-scout": (5120, 8192, 16, 1, 1, "llama4"),
    "qwen3-30b-a3b": (2048, 768, 128, 8, 0, "softmax_topk_renormalized"),
}
ROUTED_SCALING = {"deepseek_v3": 2.5}
# tensor ids of ragdot's layer_tensor_seed (tools/ragdot/layer_gpu.hpp)
X, ROUTER, ROUTER_BIAS = 1, 2, 3


def _mix(h):
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def fill_values(seed, count, scale):
    """ragdot_fill_value(seed, i, scale) for i in [0, count), as float32 (fill_params.h)."""
    i = np.arange(count, dtype=np.uint64)
    lo = (i & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    hi = (i >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        s = _mix(np.array([(seed + 0x9E3779B9) & 0xFFFFFFFF], dtype=np.uint32))
        h = _mix(lo ^ _mix(hi ^ s))
    u = (h >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    centered = np.float32(2.0) * u - np.float32(1.0)
    return np.float32(scale) * centered


def tensor_seed(seed, tensor):
    return (seed * 16 + tensor) & 0xFFFFFFFF


def routing_inputs(preset, tokens, seed):
    """x [T, H], router [H, E] and bias [E] as float32 NumPy arrays, ragdot's values."""
    h, _, e, _, _, _ = PRESETS[preset]
    x = fill_values(tensor_seed(seed, X), tokens * h, 1.0).reshape(tokens, h)
    router = fill_values(tensor_seed(seed, ROUTER), h * e, 1.0 / np.sqrt(h)).reshape(h, e)
    bias = fill_values(tensor_seed(seed, ROUTER_BIAS), e, 0.05)
    return x, router, bias


def is_oom(err):
    text = f"{type(err).__name__}: {err}"
    return any(s in text for s in ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OutOfMemory"))


# ---------------------------------------------------------------- PyTorch eager, torch._grouped_mm


def torch_case(preset, tokens, seed, warmup, reps):
    import torch
    import torch.nn.functional as F

    h, f, e, k, s, kind = PRESETS[preset]
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    x_np, router_np, bias_np = routing_inputs(preset, tokens, seed)
    x = torch.from_numpy(x_np).to(dev, bf16).requires_grad_()
    router = torch.from_numpy(router_np).to(dev, bf16).requires_grad_()
    bias = torch.from_numpy(bias_np).to(dev)
    del x_np
    gen = torch.Generator(device=dev).manual_seed(seed)

    def uniform(shape, scale):
        return ((torch.rand(shape, device=dev, generator=gen) * 2 - 1) * scale).to(bf16)

    # torch._grouped_mm takes weights [E, K, N] that are contiguous along K: stored [E, N, K]
    w_up = uniform((e, 2 * f, h), 1 / np.sqrt(h)).requires_grad_()
    w_down = uniform((e, h, f), 1 / np.sqrt(f)).requires_grad_()
    s_up = uniform((s, h, 2 * f), 1 / np.sqrt(h)).requires_grad_()
    s_down = uniform((s, f, h), 1 / np.sqrt(f)).requires_grad_()
    dy = uniform((tokens, h), 1.0)
    scaling = ROUTED_SCALING.get(kind, 1.0)
    stats = {}

    def layer():
        logits = F.linear(x, router.t()).float()  # [T, E]
        scale = None
        if kind == "deepseek_v3":
            score = torch.sigmoid(logits)
            idx = torch.topk(score + bias, k, dim=-1).indices
            w = score.gather(1, idx)
            w = w / w.sum(-1, keepdim=True) * scaling
        elif kind == "llama4":
            top, idx = torch.topk(logits, k, dim=-1)
            scale = torch.sigmoid(top[:, :1])
            w = torch.ones_like(top)
        else:  # softmax over the top-k logits (Qwen3's renormalized top-k is the same)
            top, idx = torch.topk(logits, k, dim=-1)
            w = torch.softmax(top, dim=-1) * scaling
        x_in = (x.float() * scale).to(bf16) if scale is not None else x
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=e)
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        tok = order // k
        rows = x_in[tok]
        up = torch._grouped_mm(rows, w_up.transpose(-2, -1), offs=offs)
        act = F.silu(up[:, :f]) * up[:, f:]
        out = torch._grouped_mm(act, w_down.transpose(-2, -1), offs=offs)
        weighted = out.float() * w.reshape(-1)[order].unsqueeze(1)
        y = torch.zeros(tokens, h, device=dev, dtype=torch.float32).index_add_(0, tok, weighted)
        for j in range(s):
            su = x @ s_up[j]
            y = y + ((F.silu(su[:, :f]) * su[:, f:]) @ s_down[j]).float()
        if not stats:
            stats["largest_group"] = int(counts.max())
            stats["empty_experts"] = int((counts == 0).sum())
        return y.to(bf16)

    params = [x, router, w_up, w_down] + ([s_up, s_down] if s else [])

    def forward():
        with torch.no_grad():
            return layer()

    def forward_backward():
        y = layer()
        return torch.autograd.grad(y, params, grad_outputs=dy)

    sync = lambda _: torch.cuda.synchronize()
    out = {"forward_ms": median_ms(forward, sync, reps, warmup)}
    out["forward_backward_ms"] = median_ms(forward_backward, sync, reps, warmup)
    out.update(stats)
    return out


# ---------------------------------------------------------------- JAX, jax.lax.ragged_dot (MaxText-like)


def jax_case(preset, tokens, seed, warmup, reps):
    import jax
    import jax.numpy as jnp

    h, f, e, k, s, kind = PRESETS[preset]
    bf16 = jnp.bfloat16
    x_np, router_np, bias_np = routing_inputs(preset, tokens, seed)
    x = jnp.asarray(x_np).astype(bf16)
    router = jnp.asarray(router_np).astype(bf16)
    bias = jnp.asarray(bias_np)
    del x_np
    keys = jax.random.split(jax.random.PRNGKey(seed), 5)

    def uniform(key, shape, scale):
        return (jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0) * scale).astype(bf16)

    w_up = uniform(keys[0], (e, h, 2 * f), 1 / np.sqrt(h))
    w_down = uniform(keys[1], (e, f, h), 1 / np.sqrt(f))
    s_up = uniform(keys[2], (max(s, 1), h, 2 * f), 1 / np.sqrt(h))
    s_down = uniform(keys[3], (max(s, 1), f, h), 1 / np.sqrt(f))
    dy = uniform(keys[4], (tokens, h), 1.0)
    scaling = ROUTED_SCALING.get(kind, 1.0)

    def layer(x, router, w_up, w_down, s_up, s_down):
        logits = jnp.dot(x, router, preferred_element_type=jnp.float32)
        x_in = x
        if kind == "deepseek_v3":
            score = jax.nn.sigmoid(logits)
            _, idx = jax.lax.top_k(score + bias, k)
            w = jnp.take_along_axis(score, idx, axis=-1)
            w = w / w.sum(-1, keepdims=True) * scaling
        elif kind == "llama4":
            top, idx = jax.lax.top_k(logits, k)
            x_in = (x.astype(jnp.float32) * jax.nn.sigmoid(top[:, :1])).astype(bf16)
            w = jnp.ones_like(top)
        else:
            top, idx = jax.lax.top_k(logits, k)
            w = jax.nn.softmax(top, axis=-1) * scaling
        flat = idx.reshape(-1)
        order = jnp.argsort(flat, stable=True)
        group_sizes = jnp.bincount(flat, length=e).astype(jnp.int32)
        rows = jnp.take(x_in, order // k, axis=0)
        up = jax.lax.ragged_dot(rows, w_up, group_sizes)
        act = (jax.nn.silu(up[:, :f].astype(jnp.float32)) * up[:, f:].astype(jnp.float32)).astype(bf16)
        out = jax.lax.ragged_dot(act, w_down, group_sizes)
        unsorted = jnp.take(out, jnp.argsort(order), axis=0).reshape(tokens, k, h)
        y = jnp.einsum("tkh,tk->th", unsorted.astype(jnp.float32), w)
        for j in range(s):
            su = jnp.dot(x, s_up[j], preferred_element_type=jnp.float32)
            sa = (jax.nn.silu(su[:, :f]) * su[:, f:]).astype(bf16)
            y = y + jnp.dot(sa, s_down[j], preferred_element_type=jnp.float32)
        return y.astype(bf16)

    args = (x, router, w_up, w_down, s_up, s_down)
    forward = jax.jit(layer)

    @jax.jit
    def forward_backward(cotangent, *a):  # dy is an argument, not a constant baked into the program
        y, vjp = jax.vjp(layer, *a)
        return y, vjp(cotangent)

    out = {}
    for name, call in (("forward_ms", lambda: forward(*args)), ("forward_backward_ms", lambda: forward_backward(dy, *args))):
        try:
            out[name] = median_ms(call, jax.block_until_ready, reps, warmup)
        except Exception as err:  # noqa: BLE001: the peer's failure is a result
            out[name.replace("_ms", "_error")] = "out of memory" if is_oom(err) else f"{type(err).__name__}: {err}"[:300]
            if is_oom(err):
                break  # forward + backward needs more
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", choices=["torch", "jax"], required=True)
    ap.add_argument("--cases", required=True, help="comma-separated PRESET:TOKENS")
    ap.add_argument("--json", required=True)
    ap.add_argument("--seed", type=int, default=1, help="ragdot layer's --seed (default 1)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--budget-seconds", type=float, default=0,
                    help="skip the cases left once this much time has gone (0: no limit)")
    args = ap.parse_args()
    run = torch_case if args.framework == "torch" else jax_case
    start = time.time()
    records = []
    for case in args.cases.split(","):
        preset, tokens = case.split(":")
        tokens = int(tokens)
        rec = {"framework": args.framework, "preset": preset, "tokens": tokens, "seed": args.seed}
        if args.budget_seconds and time.time() - start > args.budget_seconds:
            rec["error"] = "skipped (time budget)"
        else:
            print(f"[moe_layer_peers] {args.framework} {preset} {tokens} tokens", file=sys.stderr, flush=True)
            try:
                rec.update(run(preset, tokens, args.seed, args.warmup, args.reps))
            except Exception as err:  # noqa: BLE001: a peer that cannot run here is a result too
                rec["error"] = "out of memory" if is_oom(err) else f"{type(err).__name__}: {err}"[:300]
        if args.framework == "torch":
            import torch

            torch.cuda.empty_cache()  # the next case's layer gets the memory back
        print(f"[moe_layer_peers] {json.dumps(rec)}", file=sys.stderr, flush=True)
        records.append(rec)
        with open(args.json, "w") as fh:  # after every case: a later crash keeps the earlier ones
            json.dump(records, fh, indent=1)


if __name__ == "__main__":
    main()
