"""bench/gpu_plot.py: the merged GPU results as one picture of shares of each case's roof."""
import json
import pathlib
import subprocess
import sys

import pytest

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "gpu_plot.py"


def run(*args):
    return subprocess.run([sys.executable, str(_SCRIPT), *map(str, args)], capture_output=True, text=True)


def write_results(path, rows):
    path.write_text(json.dumps({"device": "NVIDIA H200", "date": "2026-12-07 18:00", "commit": "abc1234",
                                "rows": rows}))


def row(name, roof, **tflops):
    return {"name": name, "skew": 0.0, "roof_tflops": roof, "tflops": tflops}


def test_writes_a_png_of_every_case(tmp_path):
    pytest.importorskip("matplotlib")
    results, png = tmp_path / "r.json", tmp_path / "r.png"
    write_results(results, [
        row("mixtral prefill up", 790, ragdot=621, dense_roof=729, torch_grouped_mm=699, jax_ragged_dot=96),
        # the dense GEMM reads no weights, so it lies past a bytes-bound case's roof: drawn clipped
        row("deepseek-v3 prefill up", 366, ragdot=373, dense_roof=722, torch_grouped_mm=246, cublas_grouped=None),
        row("mixtral decode up", 24, ragdot=24.3, cublas_grouped=24, torch_grouped_mm=None),
    ])
    done = run("--results", results, "--png", png)
    assert done.returncode == 0, done.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000  # three cases' bars, labels and a legend, not an empty canvas


def test_results_without_a_case_are_refused(tmp_path):
    pytest.importorskip("matplotlib")
    results, png = tmp_path / "r.json", tmp_path / "r.png"
    write_results(results, [])
    done = run("--results", results, "--png", png)
    assert done.returncode == 1
    assert "no case" in done.stderr
    assert not png.exists()
