"""The timing command: rows for every engine asked, on real data where it is
here and synthetic data (said so) elsewhere, Keras-style progress, the table,
the JSON and the plot, and clear errors for bad arguments."""
import json

import numpy as np
import pytest

import cnncuda
from cnncuda import bench
from cnncuda.bench import torch as bench_torch
from cnncuda.bench.data import bench_data

PNG = b"\x89PNG\r\n\x1a\n"


def test_bench_rows_and_table(capsys):
    rows = bench.run(models=["tiny_mnist"], engines=["cpu", "numpy"], images=96, epochs=2,
                     data="synthetic", val_images=32, frameworks="none")
    assert [r["device"] for r in rows] == ["cpu", "numpy"]
    for r in rows:
        assert r["data"] == "synthetic" and r["dataset"] == "synthetic"
        assert r["images"] == 96 and r["batch_size"] == 32 and r["steps"] == 3
        assert r["seconds_per_epoch"] > 0 and r["parameters"] == 80 + 13520 + 10
        assert r["seconds_per_epoch"] == min(h["seconds"] for h in r["history"])
        assert [h["epoch"] for h in r["history"]] == [1, 2]
        assert 0 <= r["final_accuracy"] <= 1 and 0 <= r["val_accuracy"] <= 1
        assert r["val_images"] == 32 and r["timer"] == "wall" and r["joules_per_epoch"] is None
        assert r["peak_memory_bytes"] > 10 * 2**20 and r["peak_memory_kind"].startswith("host")
    assert rows[0]["speedup_vs_cpu"] == 1.0
    assert rows[1]["speedup_vs_cpu"] == pytest.approx(
        rows[0]["seconds_per_epoch"] / rows[1]["seconds_per_epoch"])
    # the same weights, data and order on both engines: the same training
    assert rows[0]["final_loss"] == pytest.approx(rows[1]["final_loss"], rel=1e-4)
    out = capsys.readouterr().out
    assert "s/epoch" in out and "synthetic" in out and "tiny_mnist" in out
    assert "Epoch 2/2" in out and "3/3 [==============================] - " in out
    assert "GPU:" in out and "CPU:" in out and "NumPy %s" % np.__version__ in out


def test_real_data_where_it_is_here(tmp_path, monkeypatch):
    from cnncuda.datasets import fashion_mnist
    if fashion_mnist.find() is None:
        pytest.skip("Fashion-MNIST is not on this machine (Debian's dataset-fashion-mnist)")
    monkeypatch.setenv("CNNCUDA_DATA", str(tmp_path))      # no MNIST: Fashion-MNIST stands in
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    rows = bench.run(models=["lenet5"], engines=["cpu"], images=64, val_images=40,
                     frameworks="none", verbose=0)
    assert rows[0]["data"] == "real" and rows[0]["dataset"] == "fashion_mnist"
    assert rows[0]["images"] == 64 and rows[0]["val_images"] == 40
    data = bench_data("lenet5", images=64, val_images=40)
    (x, y), (xt, yt) = fashion_mnist.load_data()
    np.testing.assert_array_equal(data.x[..., 0], x[:64] / np.float32(255))
    np.testing.assert_array_equal(data.y, y[:64])
    np.testing.assert_array_equal(data.y_val, yt[:40])
    one_hot = bench_data("tiny_mnist", images=8, val_images=0)          # categorical loss
    np.testing.assert_array_equal(one_hot.y.argmax(1), y[:8])
    with pytest.raises(ValueError, match=r"images: expected at most 60000 \(the training images "
                                         r"of fashion_mnist\), got 60001"):
        bench_data("lenet5", images=60001)


def test_synthetic_when_absent_and_never_a_download(tmp_path, monkeypatch):
    import urllib.request
    from cnncuda.datasets import DatasetNotFoundError, fashion_mnist
    monkeypatch.setenv("CNNCUDA_DATA", str(tmp_path))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv("CNNCUDA_FASHION_MNIST", raising=False)
    monkeypatch.setattr(fashion_mnist, "DEFAULT_DIRS", ())

    def no_network(*args, **kwargs):
        raise AssertionError("the bench tried to download")
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    for model in ("cifar10_cnn", "lenet5", "tiny_mnist", "imagenette_cnn", "binary_100"):
        data = bench_data(model, images=4, val_images=2)
        assert data.kind == "synthetic" and data.label == "synthetic" and data.note
        assert data.x.shape[0] == 4 and data.x_val.shape[0] == 2
    with pytest.raises(DatasetNotFoundError, match=r"data: 'real' asked for lenet5, but mnist or "
                                                   r"fashion_mnist is not on this machine.*--download"):
        bench.run(models=["lenet5"], engines=["cpu"], data="real", images=32)
    with pytest.raises(ValueError, match=r"data: expected 'auto' or 'synthetic' for binary_100"):
        bench_data("binary_100", data="real")


def test_command_line_json_and_plot(tmp_path, capsys):
    out = tmp_path / "results"          # made by the bench
    assert bench.main(["--model", "tiny_mnist", "--device", "cpu", "--device", "numpy",
                       "--images", "64", "--val-images", "0", "--data", "synthetic",
                       "--frameworks", "none", "--json", str(out / "bench.json"),
                       "--plot", str(out / "bench.png")]) == 0
    saved = json.loads((out / "bench.json").read_text())
    assert saved["command"].startswith("python -m cnncuda.bench --model tiny_mnist")
    assert saved["environment"]["engines"] == cnncuda.devices()
    assert saved["environment"]["cores"] >= 1 and saved["environment"]["date"]
    rows = saved["rows"]
    assert [r["device"] for r in rows] == ["cpu", "numpy"]
    assert rows[0]["val_accuracy"] is None and rows[0]["data"] == "synthetic"
    assert (out / "bench.png").read_bytes()[:8] == PNG
    assert "plot written to" in capsys.readouterr().out


def test_batch_sizes_steps_and_every_engine():
    rows = bench.run(models=["tiny_mnist"], engines="all", batch_size=[16, 32], steps=2,
                     data="synthetic", val_images=0, frameworks="none", verbose=0)
    here = [("omp:%d" % cnncuda.get_num_threads() if d == "omp" else d) for d in cnncuda.devices()]
    assert [(r["batch_size"], r["device"]) for r in rows] == \
        [(b, d) for b in (16, 32) for d in here]
    for r in rows:
        assert r["images"] == 2 * r["batch_size"] and r["steps"] == 2
        assert r["speedup_vs_cpu"] > 0


@pytest.mark.parametrize("kwargs, error, message", [
    ({"images": 0}, ValueError, "images: expected an int >= 1, got 0"),
    ({"epochs": 0}, ValueError, "epochs: expected an int >= 1, got 0"),
    ({"batch_size": [32, 0]}, ValueError, "batch_size: expected an int >= 1, got 0"),
    ({"images": 64, "steps": 2}, ValueError, "steps: expected images or steps, not both; "
                                             "got images=64, steps=2"),
    ({"models": ["resnet"]}, ValueError, "models: expected names among cifar10_cnn"),
    ({"engines": ["gpu"]}, ValueError, "engines: expected one of numpy, cpu, omp, cuda, cudnn "
                                       "(or 'omp:N', or 'all'), got 'gpu'"),
    ({"engines": ["omp:0"]}, ValueError, "engines: expected engine names such as 'cpu' or "
                                         "'omp:4' (threads >= 1, for omp only), got 'omp:0'"),
    ({"engines": ["cpu:2"]}, ValueError, "for omp only), got 'cpu:2'"),
    ({"data": "fake"}, ValueError, "data: expected one of 'auto', 'real', 'synthetic', "
                                   "got 'fake'"),
    ({"frameworks": "tensorflow"}, ValueError, "frameworks: expected 'auto', 'none' or names "
                                               "among torch, jax, got 'tensorflow'"),
    ({"val_images": -1}, ValueError, "val_images: expected an int >= 0, got -1"),
    ({"verbose": 3}, ValueError, "verbose: expected 0, 1 or 2, got 3"),
    ({"threads": [0]}, ValueError, "threads: expected an int >= 1, got 0"),
])
def test_bad_arguments_name_the_argument(kwargs, error, message, capsys):
    args = dict(models=["tiny_mnist"], engines=["cpu"], images=32, frameworks="none")
    args.update(kwargs)
    with pytest.raises(error) as info:
        bench.run(**args)
    assert message in str(info.value)
    assert capsys.readouterr().out == ""  # refused before anything ran


def test_an_engine_that_cannot_run_here_is_named():
    missing = [e for e in ("cuda", "cudnn") if e not in cnncuda.devices()]
    if not missing:
        pytest.skip("every engine runs here")
    with pytest.raises(cnncuda.EngineUnavailableError,
                       match=r"engines: '%s' cannot run here \(.*\); engines here: numpy, cpu"
                             % missing[0]):
        bench.run(models=["tiny_mnist"], engines=["cpu", missing[0]], images=32)
    runnable, skipped = bench.split_engines(["cpu", missing[0]])
    assert runnable == ["cpu"] and list(skipped) == [missing[0]]


def test_command_line_errors_exit_with_the_message(capsys):
    for argv, message in ((["--images", "0"], "images: expected an int >= 1, got 0"),
                          (["--device", "gpu"], "engines: expected one of"),
                          (["--batch-size", "32,x"], "expected counts >= 1")):
        with pytest.raises(SystemExit) as info:
            bench.main(argv + ["--frameworks", "none"])
        assert info.value.code == 2
        assert message in capsys.readouterr().err


def test_gpu_timing_and_memory_come_from_the_binding_when_it_reports_them():
    """The engine's CUDA-event time and allocation, where the binding has
    them, are what the row reports (checked through a stand-in network)."""
    from cnncuda.bench.cnncuda import EngineRunner

    class Reporting:
        def __init__(self, net):
            self._net = net
            self.last_range_seconds = None
            self.memory_bytes = 12345

        def train_range(self, *args):
            self._net.train_range(*args)
            self.last_range_seconds = 0.25

        def __getattr__(self, name):
            return getattr(self._net, name)

    data = bench_data("tiny_mnist", images=40, val_images=0, data="synthetic")
    runner = EngineRunner("tiny_mnist", "cpu", data, 32)
    assert runner.engine_memory() is None or runner.engine_memory() > 0
    runner.net = Reporting(runner.net)
    runner.warm_up()
    seconds, timer, wall = runner.epoch()
    assert (seconds, timer) == (0.25, "cuda-events") and wall > 0
    assert runner.engine_memory() == 12345 and runner.device_memory() is None  # a host engine
    runner.gpu = True
    assert runner.device_memory() == (12345, "device (engine)")


@pytest.mark.skipif(not bench_torch.available(), reason="torch is not installed")
def test_torch_row():
    rows = bench.run(models=["lenet5"], engines=["cpu"], images=64, torch_threads=[1],
                     frameworks="none", data="synthetic")
    assert rows[1]["device"] == "torch-cpu:1" and rows[1]["seconds_per_epoch"] > 0
    assert rows[1]["framework"] == "torch" and 0 <= rows[1]["final_accuracy"] <= 1


def test_rows_of_one_experiment_compare_by_throughput():
    """A CUDA-graph row trains only full batches (49,984 of 50,000 images):
    it is still compared with the cpu row of its model and batch, by images
    per second."""
    from cnncuda.bench.table import add_speedups, group_key
    rows = [{"model": "m", "batch_size": 32, "data": "synthetic", "device": "cpu",
             "images": 50000, "seconds_per_epoch": 10.0, "images_per_second": 5000.0},
            {"model": "m", "batch_size": 32, "data": "synthetic", "device": "torch-cuda-graph",
             "images": 49984, "seconds_per_epoch": 0.5, "images_per_second": 99968.0},
            {"model": "m", "batch_size": 512, "data": "synthetic", "device": "cuda",
             "images": 50000, "seconds_per_epoch": 0.2, "images_per_second": 250000.0}]
    add_speedups(rows)
    assert group_key(rows[0]) == group_key(rows[1]) != group_key(rows[2])
    assert rows[1]["speedup_vs_cpu"] == pytest.approx(99968.0 / 5000.0)
    assert rows[2]["speedup_vs_cpu"] is None  # no cpu row at batch 512

