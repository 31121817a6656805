#!/usr/bin/env python3
"""Draws gpu_report.py's merged results as one PNG: for every benchmark case, ragdot and each peer
as a bar of its share of the case's roof (min(compute, weight bytes at the copy bandwidth)), so
that decode's tens of TFLOP/s and prefill's hundreds sit on one axis. The bars' labels give TFLOP/s.

    gpu_plot.py --results gpu_results.json --png gpu_results.png [--title TEXT]

Needs matplotlib; without it the script says so and exits 3, and gpu_check.sh goes on without the
picture.
"""
import argparse
import json
import sys

# (key in the results' "tflops", legend label, colour): ragdot first, then the peers the targets name
SERIES = [
    ("ragdot", "ragdot (cuda)", "#d62728"),
    ("dense_roof", "dense cuBLAS GEMM, same FLOPs", "#7f7f7f"),
    ("torch_grouped_mm", "torch._grouped_mm", "#1f77b4"),
    ("cublas_grouped", "cublasGemmGroupedBatchedEx", "#2ca02c"),
    ("jax_ragged_dot", "jax.lax.ragged_dot", "#9467bd"),
    ("padded", "padded bmm", "#8c564b"),
]


kMaxShare = 1.25


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True, help="gpu_report.py's --json output")
    ap.add_argument("--png", required=True)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("gpu_plot: matplotlib is not installed; no picture", file=sys.stderr)
        return 3
    res = json.load(open(a.results))
    rows = [r for r in res["rows"] if r.get("roof_tflops")]
    if not rows:
        print("gpu_plot: no case with a roof in " + a.results, file=sys.stderr)
        return 1
    series = [s for s in SERIES if any((r["tflops"].get(s[0]) or 0) > 0 for r in rows)]
    bar = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(9, 0.14 * len(rows) * len(series) + 2.2))
    labels, labelled = [], set()
    for i, r in enumerate(rows):
        roof = r["roof_tflops"]
        labels.append(f"{r['name']}, skew {r['skew']:.1f}\nroof {roof:.0f} TF/s")
        for j, (key, name, colour) in enumerate(series):
            t = r["tflops"].get(key)
            if not t or t <= 0:
                continue
            y = i + (j - (len(series) - 1) / 2) * bar
            # a share past the axis (the dense GEMM beside a case bound by weight bytes, which it
            # does not read) is drawn to the axis's end, its label inside the bar
            share = min(t / roof, kMaxShare)
            ax.barh(y, share, height=bar, color=colour, label=None if name in labelled else name)
            labelled.add(name)
            clipped = t / roof > kMaxShare
            ax.text(share - 0.01 if clipped else share + 0.01, y, f"{t:.0f}" if t >= 10 else f"{t:.1f}", va="center",
                    ha="right" if clipped else "left", fontsize=6, color="white" if clipped else "black")
    # the legend under the x label: 0.55 inches below the axes, whatever the figure's height
    axes_inches = fig.get_figheight() * ax.get_position().height
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.55 / axes_inches), ncol=3, fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("share of the case's roof (bars labelled in TFLOP/s on useful FLOPs)")
    ax.set_xlim(0, kMaxShare)
    title = a.title or f"{res.get('device', '?')}, {res.get('date', '?')}, commit {res.get('commit') or '?'}"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=130, bbox_inches="tight")
    print("gpu_plot: wrote " + a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
