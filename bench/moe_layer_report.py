#!/usr/bin/env python3
"""Merges `ragdot layer --backend cuda --json` reports with bench/moe_layer_peers.py's records into
one JSON and a markdown table: per preset and token count, ragdot's layer forward and forward +
backward beside the padded baselines, the PyTorch layer on torch._grouped_mm and the JAX layer on
jax.lax.ragged_dot, the ratios (peer time / ragdot time), the share of the permutation and the
combine, and their memory time against one copy of the routed activations; then the issue's
targets, each marked met or not.

    moe_layer_report.py --layer A.json --layer B.json --peers torch.json --peers jax.json \\
        --json OUT.json --md OUT.md [--commit SHA] [--variant SPEC=C.json ... --variants-md V.md]

--variant adds a report of the same layer under an override (scripts/gpu_layer.sh --variant: a
RAGDOT_CUDA_VARIANT spec, or NAME=VALUE of another RAGDOT_ variable); --variants-md tabulates them
against the default reports given with --layer.
"""
import argparse
import json
import os

# The targets on H200 (bf16): forward vs the peers on these presets, and the permutation.
TARGET_PRESETS = ("deepseek-v3", "qwen3-30b-a3b")
TARGET_TORCH, TARGET_JAX, TARGET_SHARE, TARGET_COPY = 1.3, 5.0, 0.10, 1.5


def load(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as err:
        return {"error": f"{path}: {err}"}


def fmt(v, spec=".3f"):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def ratio(peer, ours):
    return peer / ours if isinstance(peer, (int, float)) and isinstance(ours, (int, float)) and ours > 0 else None


def peer_cell(rec, key):
    if rec is None:
        return "-"
    if key in rec:
        return fmt(rec[key])
    return rec.get(key.replace("_ms", "_error")) or rec.get("error") or "-"


def build(layers, peers):
    rows = []
    for rep in layers:
        if "paths" not in rep:
            rows.append({"error": rep.get("error", "no paths"), "preset": rep.get("preset", "?"),
                         "tokens": rep.get("tokens", "?")})
            continue
        ours = rep["paths"][0]
        row = {"preset": rep["preset"], "tokens": rep["tokens"], "device": rep.get("device"), "ragdot": ours,
               "check": rep.get("check")}
        for p in rep["paths"][1:]:
            if "gather fused" in p["name"]:
                key = "fused_gather"
            elif "gather kernel first" in p["name"]:
                key = "gather_first"
            elif "SwiGLU and combine fused" in p["name"]:
                key = "fused_both"
            elif "SwiGLU fused" in p["name"]:
                key = "fused_swiglu"
            elif "combine fused" in p["name"]:
                key = "fused_combine"
            else:
                key = "padded_dropless" if "dropless" in p["name"] else "padded_capacity"
            row[key] = p
        row["activation"] = rep.get("activation", "swiglu")
        for fw in ("torch", "jax"):
            # the peers' layers are SwiGLU: a GeGLU report (ragdot layer --activation) has none
            rec = next((r for r in peers if r.get("framework") == fw and r.get("preset") == rep["preset"]
                        and r.get("tokens") == rep["tokens"]), None) if row["activation"] == "swiglu" else None
            row[fw] = rec
            if rec:
                row[f"{fw}_over_ragdot_forward"] = ratio(rec.get("forward_ms"), ours.get("forward_ms"))
                row[f"{fw}_over_ragdot_forward_backward"] = ratio(rec.get("forward_backward_ms"),
                                                                 ours.get("forward_backward_ms"))
        rows.append(row)
    return rows


def targets(rows):
    out = []
    for r in rows:
        if "ragdot" not in r:
            continue
        ours = r["ragdot"]
        name = f"{r['preset']} {r['tokens']}"
        if r["preset"] in TARGET_PRESETS and 4096 <= r["tokens"] <= 8192:
            t = r.get("torch_over_ragdot_forward")
            out.append((f"{name}: forward >= {TARGET_TORCH}x the torch._grouped_mm layer", t, t is not None and t >= TARGET_TORCH))
            j = r.get("jax_over_ragdot_forward")
            jerr = (r.get("jax") or {}).get("forward_error") or (r.get("jax") or {}).get("error")
            out.append((f"{name}: forward >= {TARGET_JAX}x the jax.lax.ragged_dot layer"
                        + (f" (JAX: {jerr})" if jerr else ""), j, j is not None and j >= TARGET_JAX))
        share = ours.get("permutation_share_forward")
        out.append((f"{name}: permutation + combine <= {TARGET_SHARE:.0%} of the forward", share,
                    share is not None and share <= TARGET_SHARE))
        share_fb = ours.get("permutation_share_forward_backward")
        out.append((f"{name}: permutation + combine <= {TARGET_SHARE:.0%} of forward + backward", share_fb,
                    share_fb is not None and share_fb <= TARGET_SHARE))
        for step in ("gather", "combine"):
            v = ours.get(f"{step}_over_copy")
            if v is None:  # ragdot's path runs no such kernel (fused into a ragged dot): no copy to compare
                continue
            out.append((f"{name}: {step} memory time <= {TARGET_COPY}x one copy of the routed activations", v,
                        v <= TARGET_COPY))
    return out


def markdown(rows, checks, commit):
    device = next((r.get("device") for r in rows if r.get("device")), "")
    lines = [f"MoE layer on the GPU{(' (' + device + ')') if device else ''}{(', commit ' + commit) if commit else ''}; "
             "times in ms (medians, bf16); ratios = peer time / ragdot time", "",
             "| preset | tokens | ragdot fwd | ragdot fwd+bwd | torch fwd | torch fwd+bwd | jax fwd | jax fwd+bwd "
             "| torch/ragdot fwd | jax/ragdot fwd | torch/ragdot fwd+bwd | jax/ragdot fwd+bwd | padded dropless fwd "
             "| padded cf fwd (dropped) | other gather path fwd (perm. share) | fused-SwiGLU fwd (perm. share) "
             "| fused-combine fwd (perm. share) | SwiGLU + combine fused fwd (perm. share) "
             "| perm. share fwd | perm. share fwd+bwd | gather / copy | combine / copy |",
             "|" + "---|" * 22]
    for r in rows:
        if "ragdot" not in r:
            lines.append(f"| {r.get('preset')} | {r.get('tokens')} | error: {r.get('error')} |" + " |" * 20)
            continue
        o = r["ragdot"]
        dl, cf = r.get("padded_dropless") or {}, r.get("padded_capacity") or {}
        cf_cell = (f"{fmt(cf.get('forward_ms'))} ({cf.get('dropped_pairs')} of {cf.get('pairs')})"
                   if "forward_ms" in cf else (cf.get("error") or "-"))
        # ragdot's path fuses the gather into the up projection where that pays (kAuto): this
        # column is the other path, the gather kernel first ("first") or fused ("fused")
        gf_key = "gather_first" if r.get("gather_first") else "fused_gather"
        gf = r.get(gf_key) or {}
        gf_cell = (f"{'first' if gf_key == 'gather_first' else 'fused'}: {fmt(gf.get('forward_ms'))} "
                   f"({fmt(gf.get('permutation_share_forward'), '.1%')})"
                   if "forward_ms" in gf else (gf.get("error") or "-"))
        def fused_cell(key):
            f = r.get(key) or {}
            return (f"{fmt(f.get('forward_ms'))} ({fmt(f.get('permutation_share_forward'), '.1%')})"
                    if "forward_ms" in f else (f.get("error") or "-"))
        sf_cell = fused_cell("fused_swiglu")
        cf2_cell, both_cell = fused_cell("fused_combine"), fused_cell("fused_both")
        lines.append(
            f"| {r['preset']} | {r['tokens']} | {fmt(o.get('forward_ms'))} | {fmt(o.get('forward_backward_ms'))} "
            f"| {peer_cell(r.get('torch'), 'forward_ms')} | {peer_cell(r.get('torch'), 'forward_backward_ms')} "
            f"| {peer_cell(r.get('jax'), 'forward_ms')} | {peer_cell(r.get('jax'), 'forward_backward_ms')} "
            f"| {fmt(r.get('torch_over_ragdot_forward'), '.2f')} | {fmt(r.get('jax_over_ragdot_forward'), '.2f')} "
            f"| {fmt(r.get('torch_over_ragdot_forward_backward'), '.2f')} "
            f"| {fmt(r.get('jax_over_ragdot_forward_backward'), '.2f')} "
            f"| {fmt(dl.get('forward_ms')) if 'forward_ms' in dl else (dl.get('error') or '-')} | {cf_cell} | {gf_cell} | {sf_cell} | {cf2_cell} | {both_cell} "
            f"| {fmt(o.get('permutation_share_forward'), '.1%')} "
            f"| {fmt(o.get('permutation_share_forward_backward'), '.1%')} "
            f"| {fmt(o.get('gather_over_copy'), '.2f')} | {fmt(o.get('combine_over_copy'), '.2f')} |")
    lines += ["", "Targets:", ""]
    for what, value, met in checks:
        lines.append(f"- {'met' if met else 'NOT met'}: {what} (measured {fmt(value, '.3g')})")
    checks_failed = [r for r in rows if r.get("check") and not r["check"].get("ok")]
    for r in checks_failed:
        lines.append(f"- CHECK FAILED: {r['preset']} {r['tokens']}: y differs from the dropless baseline "
                     f"(relative error {fmt(r['check'].get('relative_error_y'), '.3g')})")
    return "\n".join(lines) + "\n"


def share(x):
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"


def variants_markdown(layers, variants):
    """ragdot's layer under each override beside the default, per preset and token count."""
    specs = list(dict.fromkeys(spec for spec, _ in variants))
    lines = ["ragdot's layer under overrides (a RAGDOT_CUDA_VARIANT spec, or NAME=VALUE of another RAGDOT_ "
             "variable) (ms, medians; in parentheses the default's time over the override's: above 1 the "
             "override is faster; perm.: permutation + combine share of the forward):", "",
             "| preset | tokens | default fwd | default fwd+bwd | default perm. | " +
             " | ".join(f"{s} fwd | {s} fwd+bwd | {s} perm." for s in specs) + " |",
             "|---|---|---|---|---|" + "---|---|---|" * len(specs)]
    for rep in layers:
        if "paths" not in rep:
            continue
        ours = rep["paths"][0]
        cells = []
        for spec in specs:
            rec = next((r for s, r in variants if s == spec and r.get("preset") == rep["preset"]
                        and r.get("tokens") == rep["tokens"]), None)
            path = rec["paths"][0] if rec and rec.get("paths") else {"error": (rec or {}).get("error", "no report")}
            for key in ("forward_ms", "forward_backward_ms"):
                r = ratio(ours.get(key), path.get(key))
                cells.append(f"{fmt(path[key])} ({fmt(r, '.2f')})" if key in path else (path.get("error") or "-")[:40])
            cells.append(share(path.get("permutation_share_forward")))
        lines.append(f"| {rep['preset']} | {rep['tokens']} | {fmt(ours.get('forward_ms'))} | "
                     f"{fmt(ours.get('forward_backward_ms'))} | {share(ours.get('permutation_share_forward'))} | " +
                     " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", action="append", default=[], help="a ragdot layer --json report")
    ap.add_argument("--peers", action="append", default=[], help="a moe_layer_peers.py --json file")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--variant", action="append", default=[], help="SPEC=FILE: a report under an override")
    ap.add_argument("--variants-md", help="write the override reports' table here")
    args = ap.parse_args()
    # a missing or empty report (the run failed) becomes a row that says so
    layers = [load(p) if os.path.exists(p) else {"error": f"{p}: no report (see layer_runs.txt)"} for p in args.layer]
    peers = []
    for p in args.peers:
        if os.path.exists(p):
            data = load(p)
            peers += data if isinstance(data, list) else []
    rows = build(layers, peers)
    checks = targets(rows)
    with open(args.json, "w") as fh:
        json.dump({"commit": args.commit, "rows": rows, "peers": peers,
                   "targets": [{"what": w, "value": v, "met": m} for w, v, m in checks]}, fh, indent=1)
    md = markdown(rows, checks, args.commit)
    with open(args.md, "w") as fh:
        fh.write(md)
    print(md)
    if args.variants_md:
        variants = []
        for item in args.variant:
            # SPEC may itself hold '=' (cluster=2): the file is what follows the last '='
            spec, path = item.rsplit("=", 1)
            variants.append((spec, load(path) if os.path.exists(path) else {"error": f"{path}: no report"}))
        vmd = variants_markdown(layers, variants)
        with open(args.variants_md, "w") as fh:
            fh.write(vmd)
        print(vmd)


if __name__ == "__main__":
    main()
