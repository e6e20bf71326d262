"""What a bench row measures besides time: host peak memory, the GPU's energy
counter through NVML, device memory, and the environment header."""
import os
import sys

import numpy as np
import pytest

import cnncuda
from cnncuda.bench import env as bench_env
from cnncuda.bench import timing as bench_timing
from cnncuda.bench.data import bench_data
from cnncuda.bench.memory import HostPeak
from cnncuda.bench.nvml import Nvml
from cnncuda.bench.timing import EnergyMeter, keras_epoch_line, time_row


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux's clear_refs")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer keeps freed memory in quarantine")
def test_host_peak_sees_an_allocation_freed_before_the_read():
    peak = HostPeak().start()
    assert peak.kind == "host peak RSS"
    before = peak.bytes()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    del block                          # freed before the read
    assert peak.bytes() >= before + 60 * 2**20
    again = HostPeak().start()             # the mark was reset: the block is gone from it
    assert again.bytes() < before + 32 * 2**20


def test_host_peak_without_clear_refs_says_lifetime(tmp_path):
    peak = HostPeak(clear_refs=str(tmp_path / "missing" / "clear_refs")).start()
    assert peak.kind == "host peak RSS (process lifetime)"
    if sys.platform != "win32":
        assert peak.bytes() > 2**20
    with pytest.raises(RuntimeError, match="start"):
        HostPeak().bytes()


def test_nvml_absent_is_not_an_error():
    nvml = Nvml(library="libnvidia-ml-not-here.so.1")
    assert not nvml.available and "NVML not found" in nvml.error
    assert nvml.energy_mj() is None and nvml.name() is None and nvml.driver_version() is None
    assert nvml.cuda_driver_version() is None


class _Counter:
    """A stand-in energy counter: 1,500 mJ more at each read."""

    def __init__(self):
        self.value = 10000

    def energy_mj(self):
        self.value += 1500
        return self.value


class _Silent:
    def energy_mj(self):
        return None


def test_energy_meter():
    meter = EnergyMeter(_Counter())
    meter.start()
    meter.stop()
    assert meter.joules == 1.5
    meter = EnergyMeter(_Silent())
    meter.start()
    meter.stop()
    assert meter.joules is None


class _GpuRunner:
    """A stand-in GPU runner: fixed epoch times, reported device memory."""

    name, framework, version, gpu = "fake-gpu", "test", None, True

    def __init__(self, data):
        self.images = len(data.x)
        self.warmed = False

    def warm_up(self):
        self.warmed = True

    def epoch(self, meter=None):
        assert self.warmed
        meter.start()
        meter.stop()
        return 0.5, "cuda-events", 0.6

    def sums(self):
        return 0.25 * self.images, self.images // 2

    def evaluate(self, x, y):
        return 0.5 * len(x), len(x)

    def parameters(self):
        return 7

    def device_memory(self):
        return 3 * 2**20, "device (engine)"

    def engine_memory(self):
        return 3 * 2**20

    def notes(self):
        return []

    def close(self):
        pass


def test_gpu_row_gets_energy_device_memory_and_event_time(monkeypatch):
    monkeypatch.setattr(bench_timing, "nvml", lambda: _Counter())
    data = bench_data("tiny_mnist", images=64, val_images=8, data="synthetic")
    lines = []
    row = time_row(lambda: _GpuRunner(data), "tiny_mnist", 32, data, 2, lines.append, 1)
    assert row["seconds_per_epoch"] == 0.5 and row["timer"] == "cuda-events"
    assert row["wall_seconds_per_epoch"] == 0.6 and row["steps"] == 2
    assert row["images_per_second"] == 128 and row["ms_per_step"] == 250
    assert row["joules_per_epoch"] == 1.5
    assert row["peak_memory_bytes"] == 3 * 2**20 and row["peak_memory_kind"] == "device (engine)"
    assert row["host_peak_bytes"] > 0
    assert row["final_loss"] == 0.25 and row["final_accuracy"] == 0.5
    assert row["val_loss"] == 0.5 and row["val_accuracy"] == 1.0
    assert lines == ["Epoch 1/2", keras_epoch_line(2, 0.5, {"loss": 0.25, "accuracy": 0.5,
                                                            "val_loss": 0.5, "val_accuracy": 1.0}),
                     "Epoch 2/2", lines[1]]
    assert lines[1] == ("2/2 [==============================] - 0s 250ms/step - loss: 0.2500 - "
                        "accuracy: 0.5000 - val_loss: 0.5000 - val_accuracy: 1.0000")


def test_keras_verbose_2_line():
    assert keras_epoch_line(1563, 8.2, {"loss": 1.5175}, verbose=2) == \
        "1563/1563 - 8s - loss: 1.5175 - 8s/epoch - 5ms/step"


def test_environment_header(monkeypatch):
    env = bench_env.environment()
    for key in ("date", "cpu", "cores", "usable_cores", "python", "numpy", "cnncuda", "build",
                "engines", "gpus"):
        assert key in env, key
    assert env["engines"] == cnncuda.devices() and env["numpy"] == np.__version__
    lines = bench_env.format_environment(env)
    assert lines[0].startswith("cnncuda %s | Python " % cnncuda.__version__)
    assert lines[1].startswith("CPU: %s, %d cores" % (env["cpu"], env["cores"]))
    assert lines[2].startswith("GPU: ") and lines[3].startswith("build: ")
    # what the binding reports, where it does, is what the header says
    monkeypatch.setattr(cnncuda._C, "cuda_versions", lambda: {
        "driver": "580.1", "runtime": "13.0", "cudnn": "9.14.0", "cublas": "13.1", "nccl": ""},
        raising=False)
    env = bench_env.environment()
    assert env["cuda_runtime"] == "13.0" and env["cudnn"] == "9.14.0" and "nccl" not in env
    gpu_line = bench_env.format_environment(env)[2]
    assert "driver 580.1" in gpu_line and "CUDA runtime 13.0" in gpu_line
    assert "cuDNN 9.14.0" in gpu_line and "cuBLAS 13.1" in gpu_line
    wheels = cnncuda.build_info()["wheel_libraries"]
    assert len(bench_env.format_environment(env)) == (5 if wheels else 4)
    env["wheel_libraries"] = ["/venv/site-packages/nvidia/cudnn/lib/libcudnn.so.9"]
    assert bench_env.format_environment(env)[4] == \
        "GPU libraries from the Python environment's wheels: libcudnn.so.9"
