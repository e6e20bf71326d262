"""The scaling benchmark: omp rows per thread count, PyTorch rows at the same
counts where torch is installed, and the ratio between them."""
import json

import pytest

import cnncuda
from cnncuda import bench
from cnncuda.bench import torch as bench_torch

pytestmark = pytest.mark.skipif("omp" not in cnncuda.devices(), reason="no omp engine here")


def test_threads_add_omp_rows(capsys):
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, threads=[1, 2],
                     frameworks="none")
    assert [r["device"] for r in rows] == ["cpu", "omp:1", "omp:2"]
    assert all(r["seconds_per_epoch"] > 0 and r["images"] == 64 for r in rows)
    assert "vs torch" in capsys.readouterr().out


def test_threads_default_engines_are_numpy_and_cpu():
    rows = bench.run(models=["tiny_mnist"], images=32, threads=[2], frameworks="none")
    assert [r["device"] for r in rows] == ["numpy", "cpu", "omp:2"]


def test_command_line_lists(tmp_path):
    path = tmp_path / "rows.json"
    assert bench.main(["--model", "tiny_mnist", "--device", "cpu", "--threads", "1,2",
                       "--threads", "3", "--images", "32", "--frameworks", "none",
                       "--json", str(path)]) == 0
    assert [r["device"] for r in json.loads(path.read_text())["rows"]] == ["cpu", "omp:1", "omp:2",
                                                                           "omp:3"]
    for bad in ("0", "1,x", ""):
        with pytest.raises(SystemExit):
            bench.main(["--threads", bad])


def test_without_torch_the_rows_are_skipped(monkeypatch, capsys):
    monkeypatch.setattr(bench_torch, "available", lambda: False)
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=32, torch_threads=[1],
                     frameworks="none")
    assert [r["device"] for r in rows] == ["cpu"]
    assert "torch is not installed" in capsys.readouterr().out


@pytest.mark.skipif(not bench_torch.available(), reason="torch is not installed")
def test_torch_rows_at_the_same_counts():
    rows = bench.run(models=["lenet5"], engines=["cpu"], images=64, threads=[2],
                     torch_threads=[1, 2], frameworks="none")
    assert [r["device"] for r in rows] == ["cpu", "omp:2", "torch-cpu:1", "torch-cpu:2"]
    assert rows[0]["speedup_vs_torch"] > 0 and rows[1]["speedup_vs_torch"] > 0
