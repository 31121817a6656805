#!/usr/bin/env python3
"""Merges gpu_bench (ragdot + cuBLAS peers) and gpu_peers (torch, JAX) results into one JSON and a
markdown table of TFLOP/s and ratios, with the roof of each case (compute or weight bytes).

    gpu_report.py --bench gpu_bench.json --peers torch.json [--peers jax.json] --json all.json --md table.md
"""
import argparse
import json
import re

PEAK_TFLOPS = 790.0    # bf16 dense, measured on the H200 (WORKLOADS.md)
COPY_TBPS = 4.3        # the H200's copy bandwidth, read + write (WORKLOADS.md)


def copy_tbps(device):
    """The copy roof of the GPU the run was on: WORKLOADS.md's 4.3 TB/s is the H200's (90% of its
    4.8 TB/s); an H100 (3.35 TB/s) gets the same 90%, 3.0 TB/s, so that its decode rows are not
    measured against another GPU's memory."""
    return 3.0 if "H100" in (device or "") else COPY_TBPS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--peers", action="append", default=[])
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--commit", default="")
    a = ap.parse_args()
    bench = json.load(open(a.bench))
    peer_sets = [json.load(open(p))["results"] for p in a.peers]
    copy = copy_tbps(bench.get("device"))
    rows = []
    failed = []
    for i, c in enumerate(bench["cases"]):
        if "error" in c:
            failed.append(c)
            continue
        ms = dict(c["ms"])
        notes = {}
        for ps in peer_sets:
            if i < len(ps) and ps[i]["name"] == c["name"] and ps[i]["skew"] == c["skew"]:
                ms.update(ps[i]["ms"])
                notes.update(ps[i].get("notes", {}))
        tf = {k: (c["flops"] / v / 1e9 if v and v > 0 else None) for k, v in ms.items()}
        roof = c["flops"] / max(c["flops"] / (PEAK_TFLOPS * 1e12), c["min_bytes"] / (copy * 1e12)) / 1e12
        r = dict(c)
        r.pop("group_sizes", None)
        r.update({"ms": ms, "tflops": tf, "roof_tflops": roof, "notes": notes})
        rag = tf.get("ragdot")
        r["ratios"] = {k: (rag / v if rag and v else None) for k, v in tf.items() if k != "ragdot"}
        # ragdot / torch._grouped_mm through the dense yardstick: each was timed in alternating rounds
        # with the same dense cuBLAS GEMM in its own process (gpu_bench's dense roof, gpu_peers.py's
        # dense_yardstick_torch), so the clocks' drift between the two processes cancels
        need = ("ragdot", "dense_roof", "torch_grouped_mm", "dense_yardstick_torch")
        if all((ms.get(k) or 0) > 0 for k in need):
            r["ratios"]["torch_via_dense"] = ((ms["torch_grouped_mm"] / ms["dense_yardstick_torch"]) /
                                              (ms["ragdot"] / ms["dense_roof"]))
        # ragdot with a measured plan (the sweep's "measure": RAGDOT_PLAN_EFFORT=measure with the
        # case's group sizes), beside the same peers
        measured = next((x for x in c.get("sweep", []) if x.get("spec") == "measure" and (x.get("ms") or 0) > 0), None)
        if measured:
            tm = c["flops"] / measured["ms"] / 1e9
            r["measured_plan"] = {"ms": measured["ms"], "tflops": tm, "variant": measured.get("variant", ""),
                                  "ratios": {k: (tm / v if v else None) for k, v in tf.items()}}
        r["ratio_to_roof"] = rag / roof if rag else None
        r["ragdot_gbps_min_bytes"] = c["min_bytes"] / ms["ragdot"] / 1e6 if ms.get("ragdot") else None
        rows.append(r)
    json.dump({"date": bench["date"], "device": bench["device"], "commit": a.commit, "rows": rows, "failed": failed},
              open(a.json, "w"), indent=1)

    # ragdot_weights_nk: ragdot itself with the weights stored [E, N, K], the layout the torch peer gets
    peers = ["ragdot_weights_nk", "ragdot_cublas", "ragdot_padded_gpu", "dense_roof", "torch_grouped_mm",
             "cublas_grouped", "per_expert_loop", "padded", "jax_ragged_dot"]
    def f(x, d=0):
        return "—" if x is None else f"{x:.{d}f}"
    lines = [f"GPU: {bench['device']}, {bench['date']}, commit {a.commit or '?'}; TFLOP/s on useful FLOPs "
             f"(ratio ragdot/peer in parentheses); roof = min(compute {PEAK_TFLOPS:.0f} TF/s, weight bytes at "
             f"{copy} TB/s).", "",
             "| case | skew | M | K | N | ragdot | roof (ratio) | ragdot, measured plan (/ torch, / dense) | " +
             " | ".join(peers) + " | / torch via the dense yardstick | variant |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(peers) + "---|---|"]
    for r in rows:
        cells = []
        for p in peers:
            t = r["tflops"].get(p)
            if t is None:
                note = r["notes"].get(p) or r["notes"].get("jax" if p.startswith("jax") else "torch")
                cells.append("n/a" if not note else note[:20])
            else:
                cells.append(f"{t:.0f} ({r['ratios'][p]:.2f})")
        mp = r.get("measured_plan")
        measured_cell = "n/a" if not mp else (
            f"{mp['tflops']:.0f} ({f(mp['ratios'].get('torch_grouped_mm'), 2)}, {f(mp['ratios'].get('dense_roof'), 2)})")
        lines.append(f"| {r['name']} | {r['skew']:.1f} | {r['M']} | {r['K']} | {r['N']} | {f(r['tflops']['ragdot'], 1)} | "
                     f"{r['roof_tflops']:.0f} ({f(r['ratio_to_roof'], 2)}) | {measured_cell} | " + " | ".join(cells) +
                     f" | {f(r['ratios'].get('torch_via_dense'), 2)} | {r['variant'].split(' grid')[0]} |")
    for c in failed:
        lines.append(f"| {c['name']} | {c['skew']:.1f} | FAILED: {c['error'][:120]} |")
    lines += ["", "/ torch via the dense yardstick: (torch._grouped_mm / dense) / (ragdot / dense), each pair timed "
              "in alternating rounds in its own process with the same dense cuBLAS GEMM; the two processes' "
              "clocks can differ by 10-30%, which this ratio leaves out and the torch_grouped_mm column does not."]
    lines += ["", "Host bridge of the backends that copy group sizes to the host (ms, part of their time above): "
              "device-to-host copy and wait, per-group arrays, pointer upload:", ""]
    for r in rows:
        b = {k: v for k, v in r.get("bridge_ms", {}).items() if v is not None and v >= 0}
        lines.append(f"- {r['name']} skew {r['skew']}: cublas {f(b.get('ragdot_cublas'), 3)} of "
                     f"{f(r['tflops'].get('ragdot_cublas') and r['ms']['ragdot_cublas'], 3)}, padded {f(b.get('ragdot_padded_gpu'), 3)} of "
                     f"{f(r['tflops'].get('ragdot_padded_gpu') and r['ms']['ragdot_padded_gpu'], 3)}")
    swept = [r for r in rows if r.get("sweep")]
    if swept:
        lines += ["", "Variant sweep (RAGDOT_CUDA_VARIANT overrides, and 'measure': a measured plan, with the "
                  "candidate it chose; same process and operands; ms, and the planner's choice / the override, the two "
                  "timed in alternating rounds where the run recorded it: above 1 the override is faster):", "",
                  "| case | skew | planner's choice | " + " | ".join(s["spec"] for s in swept[0]["sweep"]) + " |",
                  "|---|---|---|" + "---|" * len(swept[0]["sweep"])]
        for r in swept:
            base = r["ms"]["ragdot"]
            cells = []
            for s in r["sweep"]:
                if (s.get("error") or "").startswith("the planner's kernel"):
                    cells.append("n/a")  # the override leaves this case's kernel as it is
                elif s.get("error") or not s.get("ms") or s["ms"] <= 0:
                    cells.append("failed: " + (s.get("error") or "?")[:40])
                else:
                    # a measured plan says which candidate won ("measured=swap=ab(0.81x of 4)")
                    won = re.search(r"measured=([^ ]*?)\(", s.get("variant") or "")
                    # the planner's kernel timed in the same alternating rounds, where there is one
                    ref = s["baseline_ms"] if (s.get("baseline_ms") or 0) > 0 else base
                    cells.append(f"{s['ms']:.3f} ({ref / s['ms']:.2f}" + (f", {won.group(1)})" if won else ")"))
            lines.append(f"| {r['name']} | {r['skew']:.1f} | {base:.3f} | " + " | ".join(cells) + " |")
    lines += ["", "JIT: first compile / disk-cache load / memory-cache plan, per case (ms):", ""]
    for r in rows:
        lines.append(f"- {r['name']} skew {r['skew']}: {r['plan_compile_ms']:.0f} / {r['plan_disk_cache_ms']:.2f} / "
                     f"{r['plan_memory_cache_ms']:.3f}")
    open(a.md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
