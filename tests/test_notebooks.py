"""Every notebook runs top to bottom on the CPU (its cells executed in this
process, with the parameters cell's values shrunk) and writes its plot."""
import glob
import json
import os

import pytest

from cnncuda import bench_stages

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = sorted(glob.glob(os.path.join(HERE, "..", "notebooks", "*.ipynb")))
EXPERIMENT_NOTEBOOKS = [p for p in NOTEBOOKS if os.path.basename(p)[:2] in ("01", "02", "03", "04", "05")]
SMALL = {"STEPS": 2, "EPOCHS": 1, "IMAGES": 48, "VAL_IMAGES": 16, "CHECK_STEPS": 3}
PNG = b"\x89PNG\r\n\x1a\n"


def code_cells(path):
    with open(path) as f:
        nb = json.load(f)
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def parameters_index(cells):
    return next((i for i, source in enumerate(cells) if source.startswith("# Parameters")), None)


def run_notebook(path, out_dir, **overrides):
    """Executes the code cells in one scope; after the parameters cell, the
    SMALL values (and `overrides`) replace the names that cell defines."""
    cells = code_cells(path)
    at = parameters_index(cells)
    assert at is not None, "no '# Parameters' cell"
    scope = {"__name__": "__main__"}
    for i, source in enumerate(cells):
        exec(compile(source, "%s[cell %d]" % (os.path.basename(path), i), "exec"), scope)
        if i == at:
            for name, value in dict(SMALL, OUT_DIR=str(out_dir), **overrides).items():
                if name in scope:
                    scope[name] = value
    return scope


def assert_png(path, folder):
    assert os.path.dirname(os.path.abspath(path)) == os.path.abspath(folder)
    with open(path, "rb") as f:
        assert f.read(8) == PNG
    assert os.path.getsize(path) > 5000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_and_writes_its_plot(path, tmp_path):
    scope = run_notebook(path, tmp_path)
    assert_png(scope["PLOT_PATH"], tmp_path)


def test_the_five_experiments_are_here():
    assert [os.path.basename(p) for p in EXPERIMENT_NOTEBOOKS] == [
        "01_cifar10_sequential_vs_gpu.ipynb", "02_imagenette_sequential_gpu_cudnn.ipynb",
        "03_lenet5_threads_gpu.ipynb", "04_tiny_cnn_numpy_cpu_gpu.ipynb",
        "05_kernel_stages.ipynb"]


@pytest.mark.parametrize("path", EXPERIMENT_NOTEBOOKS, ids=os.path.basename)
def test_experiments_install_in_colab_then_take_parameters(path):
    cells = code_cells(path)
    install = cells[0]
    assert "google.colab" in install and "pip" in install and "install" in install
    assert "import cnncuda" not in install
    assert parameters_index(cells) == 1
    params = cells[1]
    for name in ("EPOCHS", "IMAGES", "ENGINES", "OUT_DIR"):
        assert "\n%s = " % name in params
    assert "speedup_plot" in cells[-1] or "stages_plot" in cells[-1]


def test_stages_notebook_reads_the_harness_json(tmp_path):
    stages = tmp_path / "stages.json"
    device = "GPU X (sm_90, 132 SMs)"   # rows as dev/cuda/run_all.sh writes them
    stages.write_text(json.dumps([
        {"op": "sgemm", "version": 2, "name": "shared-memory tiles", "shape": "total",
         "ms": 0.5, "max_err": 1e-7, "ok": True, "device": device},
        {"op": "sgemm", "version": 1, "name": "naive", "shape": "total", "ms": 4.0,
         "max_err": 1e-7, "ok": True, "device": device},
        {"op": "sgemm", "version": 1, "name": "naive", "shape": "conv1 dW", "ms": 1.0,
         "max_err": 1e-7, "ok": True, "device": device},
        {"op": "conv2d_forward", "version": 1, "name": "naive direct", "shape": "total",
         "ms": 1.0, "max_err": 1e-7, "ok": True, "device": device},
        {"op": "conv2d_forward", "version": 2, "name": "register-blocked", "shape": "total",
         "ms": 0.25, "max_err": 1e-7, "ok": True, "device": device}]))
    path = next(p for p in EXPERIMENT_NOTEBOOKS if "05_" in p)
    scope = run_notebook(path, tmp_path, STAGES_JSON=str(stages))
    assert scope["WHAT"] == "kernel versions" and scope["source"] == str(stages)
    assert [b["label"] for b in scope["bars"]][:2] == ["v1 naive", "v2 shared-memory tiles"]
    assert_png(scope["PLOT_PATH"], tmp_path)


def test_stages_notebook_without_the_json_shows_the_recorded_stages(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_stages, "STAGES_JSON", os.path.join("dev", "cuda", "absent.json"))
    monkeypatch.setattr(bench_stages, "MEASURED_STAGES_JSON", os.path.join("docs", "absent.json"))
    path = next(p for p in EXPERIMENT_NOTEBOOKS if "05_" in p)
    scope = run_notebook(path, tmp_path)
    assert scope["WHAT"] == "engine stages" and scope["source"].endswith("BENCHMARKS.md")
    assert_png(scope["PLOT_PATH"], tmp_path)
