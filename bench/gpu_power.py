#!/usr/bin/env python3
"""Power, clocks and energy per operation of the kernels gpu_bench held back to back (--hold).

A Hopper board under a sustained GEMM load sits at its power cap, and its clocks fall to what
the cap allows: time then follows energy per operation. This reads nvidia-smi's samples (taken
while gpu_bench ran, see scripts/gpu_power.sh) and, for each held window of each gpu_bench JSON,
reports the mean board power, the mean SM clock, the share of samples with the software power
cap among the clock-event reasons, and joules per operation (power x time per run).

    python3 bench/gpu_power.py --smi smi.csv --bench power_*.json [--md table.md] [--json out.json]

smi.csv: nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks_event_reasons.active
         --format=csv,noheader,nounits -lms 100 (timestamps in UTC, as the GPU machines keep them)
"""
import argparse
import datetime
import json
import sys

POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap
# samples this close to a window's ends are left out: nvidia-smi's power reading averages over
# a short period, so the first ones still hold what ran before
EDGE_SECONDS = 0.3


def read_samples(path):
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 3:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
                watts, mhz = float(parts[1]), float(parts[2])
            except ValueError:
                continue  # a header, an "[N/A]" or a torn line
            reasons = int(parts[3], 16) if len(parts) > 3 and parts[3].startswith("0x") else None
            samples.append((t, watts, mhz, reasons))
    return samples


def windows(bench_paths):
    """(label, case name, held name, start, end, ms per run, flops) of every held window."""
    out = []
    for path in bench_paths:
        with open(path) as f:
            cases = json.load(f)["cases"]
        for c in cases:
            for h in c.get("hold", []):
                kernel = c.get("variant", "") if h["name"] == "ragdot" else "cuBLAS dense GEMM of the same FLOPs"
                kernel = kernel.split(" jit=")[0]
                out.append((kernel, c["name"], h["name"], h["start"], h["end"], h["ms"], c.get("flops", 0.0)))
    return out


def summarize(samples, held):
    rows = []
    for kernel, case, name, start, end, ms, flops in held:
        inside = [s for s in samples if start + EDGE_SECONDS <= s[0] <= end - EDGE_SECONDS]
        row = {"case": case, "name": name, "kernel": kernel, "ms": ms, "samples": len(inside)}
        if inside:
            watts = sum(s[1] for s in inside) / len(inside)
            row["watts"] = watts
            row["sm_mhz"] = sum(s[2] for s in inside) / len(inside)
            with_reasons = [s for s in inside if s[3] is not None]
            row["power_capped"] = (sum(1 for s in with_reasons if s[3] & POWER_CAP) / len(with_reasons)
                                   if with_reasons else None)
            row["joules_per_run"] = watts * ms / 1e3
            row["tflops_per_kw"] = flops / (ms / 1e3) / 1e12 / (watts / 1e3) if flops and ms > 0 else None
        rows.append(row)
    return rows


def markdown(rows):
    lines = ["| case | kernel | ms a run | board W | SM MHz | power-capped samples | J a run | TFLOP/s per kW |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "watts" not in r:
            lines.append(f"| {r['case']} | {r['kernel']} | {r['ms']:.3f} | no samples | | | | |")
            continue
        capped = "" if r["power_capped"] is None else f"{100 * r['power_capped']:.0f}%"
        per_kw = "" if r["tflops_per_kw"] is None else f"{r['tflops_per_kw']:.0f}"
        lines.append(f"| {r['case']} | {r['kernel']} | {r['ms']:.3f} | {r['watts']:.0f} | {r['sm_mhz']:.0f} | "
                     f"{capped} | {r['joules_per_run']:.3f} | {per_kw} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smi", required=True, help="nvidia-smi samples (CSV, no header, no units)")
    ap.add_argument("--bench", required=True, nargs="+", help="gpu_bench JSON files run with --hold")
    ap.add_argument("--md", help="write the table here too")
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args(argv)
    held = windows(args.bench)
    if not held:
        print("gpu_power: no held windows in the gpu_bench JSON (run it with --hold SECONDS)", file=sys.stderr)
        return 1
    rows = summarize(read_samples(args.smi), held)
    table = markdown(rows)
    sys.stdout.write(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all("watts" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
