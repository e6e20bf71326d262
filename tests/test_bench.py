"""The timing command: rows for every engine asked, labelled synthetic, and
PyTorch rows where torch is installed."""
import json

import pytest

from cnncuda import bench, bench_torch


def test_bench_rows_and_table(capsys):
    rows = bench.run(models=["tiny_mnist"], engines=["cpu", "numpy"], images=96, epochs=2)
    assert [r["device"] for r in rows] == ["cpu", "numpy"]
    for r in rows:
        assert r["data"] == "synthetic" and r["images"] == 96 and r["batch_size"] == 32
        assert r["seconds_per_epoch"] > 0 and r["parameters"] == 80 + 13520 + 10
    assert rows[0]["speedup_vs_cpu"] == 1.0
    out = capsys.readouterr().out
    assert "s/epoch" in out and "synthetic" in out and "tiny_mnist" in out


def test_bench_command_line(tmp_path, capsys):
    path = tmp_path / "rows.json"
    assert bench.main(["--model", "lenet5", "--device", "cpu", "--images", "64",
                       "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert rows[0]["model"] == "lenet5" and rows[0]["device"] == "cpu"


@pytest.mark.skipif(not bench_torch.available(), reason="torch is not installed")
def test_torch_row():
    rows = bench.run(models=["lenet5"], engines=["cpu"], images=64, torch_threads=[1])
    assert rows[1]["device"] == "torch-cpu:1" and rows[1]["seconds_per_epoch"] > 0
