"""The data-parallel bench (python -m cnncuda.bench.distributed), checked on
CPU replicas (--engine cpu): rows, scaling columns, the table and the JSON.
Its GPU and PyTorch DDP rows need GPUs (BENCHMARKS.md has them)."""
import json

import pytest

from cnncuda.bench import distributed as bench_distributed


def test_cpu_replicas_give_rows_scaling_and_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    rows = bench_distributed.main(["--engine", "cpu", "--gpus", "1,2", "--batch-size", "8",
                                   "--images", "64", "--epochs", "1", "--frameworks", "none",
                                   "--json", str(out)])
    assert [(r["gpus"], r["per_gpu_batch"]) for r in rows] == [(1, 8), (2, 8)]
    assert rows[0]["speedup"] == pytest.approx(1.0) and rows[0]["efficiency"] == pytest.approx(1.0)
    assert rows[1]["efficiency"] == pytest.approx(rows[1]["speedup"] / 2)
    assert all(r["seconds_per_epoch"] > 0 and r["images_per_second"] > 0 for r in rows)
    saved = json.loads(out.read_text())
    assert saved["rows"] == json.loads(json.dumps(rows))
    assert saved["versions"] == bench_distributed._C.cuda_versions()   # names and numbers
    assert "| cnncuda-cpu | 2 | 8 |" in capsys.readouterr().out


def test_scaling_columns_compare_within_one_framework():
    rows = bench_distributed.add_scaling([
        {"framework": "a", "gpus": 1, "per_gpu_batch": 32, "seconds_per_epoch": 2.0},
        {"framework": "a", "gpus": 4, "per_gpu_batch": 32, "seconds_per_epoch": 0.625},
        {"framework": "b", "gpus": 4, "per_gpu_batch": 32, "seconds_per_epoch": 1.0}])
    assert rows[1]["speedup"] == pytest.approx(3.2) and rows[1]["efficiency"] == pytest.approx(0.8)
    assert "speedup" not in rows[2]           # no 1-GPU row of its own
