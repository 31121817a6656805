"""bench/gpu_power.py: power, clocks and energy per run over gpu_bench's held windows."""
import datetime
import importlib.util
import json
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "gpu_power.py"
_spec = importlib.util.spec_from_file_location("gpu_power", _PATH)
gpu_power = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_power)

T0 = datetime.datetime(2026, 12, 7, 13, 0, 0, tzinfo=datetime.timezone.utc).timestamp()


def stamp(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def write_samples(path, spans):
    """spans: (start offset, end offset, watts, MHz, reasons) every 0.1 s."""
    lines = ["timestamp, power.draw [W], clocks.current.sm [MHz], clocks_event_reasons.active"]  # a header is skipped
    for a, b, watts, mhz, reasons in spans:
        t = a
        while t < b - 1e-9:
            lines.append(f"{stamp(T0 + t)}, {watts:.2f}, {mhz}, 0x{reasons:016x}")
            t += 0.1
    lines.append("garbled, line")
    path.write_text("\n".join(lines) + "\n")


def write_bench(path, holds, flops=1e12):
    case = {"name": "mixtral prefill up", "variant": "wgmma bf16 128x256x64 jit=disk-cache 0.6ms", "flops": flops,
            "hold": [{"name": n, "start": T0 + a, "end": T0 + b, "ms": ms} for n, a, b, ms in holds]}
    path.write_text(json.dumps({"cases": [case]}))


def test_each_window_gets_its_own_samples(tmp_path):
    smi, bench = tmp_path / "smi.csv", tmp_path / "b.json"
    # ragdot 0-4 s at 690 W, capped; idle between; the dense roof 5-9 s at 650 W, half capped
    write_samples(smi, [(0, 4, 690, 1400, 0x4), (4, 5, 80, 1980, 0x1), (5, 7, 650, 1500, 0x4), (7, 9, 650, 1700, 0x0)])
    write_bench(bench, [("ragdot", 0, 4, 2.0), ("dense_roof", 5, 9, 1.0)])
    rows = gpu_power.summarize(gpu_power.read_samples(str(smi)), gpu_power.windows([str(bench)]))
    ragdot, dense = rows
    assert ragdot["kernel"] == "wgmma bf16 128x256x64"
    assert ragdot["watts"] == pytest.approx(690)
    assert ragdot["sm_mhz"] == pytest.approx(1400)
    assert ragdot["power_capped"] == 1.0
    assert ragdot["joules_per_run"] == pytest.approx(690 * 2.0 / 1e3)
    assert ragdot["tflops_per_kw"] == pytest.approx(1e12 / 2e-3 / 1e12 / 0.69)
    assert dense["kernel"].startswith("cuBLAS dense")
    assert dense["watts"] == pytest.approx(650)
    assert dense["sm_mhz"] == pytest.approx(1600, abs=30)
    assert dense["power_capped"] == pytest.approx(0.5, abs=0.1)
    # the samples at a window's edges are left out: the idle second's 80 W never leaks in
    assert all(r["watts"] > 600 for r in rows)


def test_the_command_writes_the_table_and_fails_on_a_window_without_samples(tmp_path, capsys):
    smi, bench, md, out = tmp_path / "smi.csv", tmp_path / "b.json", tmp_path / "t.md", tmp_path / "r.json"
    write_samples(smi, [(0, 4, 700, 1350, 0x4)])
    write_bench(bench, [("ragdot", 0, 4, 3.0)])
    assert gpu_power.main(["--smi", str(smi), "--bench", str(bench), "--md", str(md), "--json", str(out)]) == 0
    table = md.read_text()
    assert "| mixtral prefill up | wgmma bf16 128x256x64 | 3.000 | 700 | 1350 | 100% | 2.100 |" in table
    assert json.loads(out.read_text())[0]["samples"] > 30
    write_bench(bench, [("ragdot", 100, 104, 3.0)])  # nothing sampled then
    assert gpu_power.main(["--smi", str(smi), "--bench", str(bench)]) == 1
    assert "no samples" in capsys.readouterr().out
    bench.write_text(json.dumps({"cases": [{"name": "x", "hold": []}]}))
    assert gpu_power.main(["--smi", str(smi), "--bench", str(bench)]) == 1
