"""Every notebook runs top to bottom on the CPU in a Jupyter kernel (nbclient
and ipykernel, as Jupyter and Colab run it; its parameters shrunk in a cell
injected after the one tagged `parameters`, as papermill does), shows its
plots in the notebook and writes them as PNG files; notebook 05's sources
are also checked with its cells executed in this process."""
import ast
import base64
import glob
import json
import os
import sys

import pytest

from cnncuda.bench import stages as bench_stages
from cnncuda.bench.data import bench_data

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
EXPERIMENT_NOTEBOOKS = [p for p in NOTEBOOKS if os.path.basename(p)[:2] in ("01", "02", "03", "04", "05")]
SMALL = {"STEPS": 2, "EPOCHS": 1, "IMAGES": 48, "VAL_IMAGES": 16, "CHECK_STEPS": 3,
         "PROFILE_STEPS": 1}
PNG = b"\x89PNG\r\n\x1a\n"
KERNEL = "cnncuda-tests-python"


def code_cells(path):
    with open(path) as f:
        nb = json.load(f)
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def parameters_index(cells):
    return next((i for i, source in enumerate(cells) if source.startswith("# Parameters")), None)


def run_notebook(path, out_dir, **overrides):
    """Executes the code cells in one scope, in this process; after the
    parameters cell, the SMALL values (and `overrides`) replace the names
    that cell defines."""
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


def assigned_names(source):
    return {target.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)}


def inject_parameters(nb, values):
    """Adds a cell after the one tagged `parameters` that assigns `values`
    to the names that cell assigns (papermill's injected-parameters cell)."""
    import nbformat
    at = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(at) == 1, "expected one cell tagged 'parameters', found %d" % len(at)
    names = assigned_names(nb.cells[at[0]].source)
    source = "\n".join("%s = %r" % (k, v) for k, v in values.items() if k in names)
    nb.cells.insert(at[0] + 1, nbformat.v4.new_code_cell(
        source, metadata={"tags": ["injected-parameters"]}))


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec that starts ipykernel on this Python, and the kernel's
    environment: this checkout's cnncuda first on its path, Jupyter's and
    IPython's files in a scratch folder (no user profile, no home needed)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    scratch = tmp_path_factory.mktemp("jupyter")
    kernel = scratch / "kernels" / KERNEL
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "cnncuda tests", "language": "python"}))
    path = [ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return {"JUPYTER_PATH": str(scratch), "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
            "IPYTHONDIR": str(scratch / "ipython"), "PYTHONPATH": os.pathsep.join(path)}


def execute_in_kernel(path, out_dir, env, monkeypatch, **overrides):
    """The notebook executed by a Jupyter kernel in the notebooks folder,
    with the SMALL values (and `overrides`) injected: the executed notebook
    (a cell that raises fails the test: nbclient raises CellExecutionError)."""
    import nbformat
    from nbclient import NotebookClient
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    inject_parameters(nb, dict(SMALL, OUT_DIR=str(out_dir), **overrides))
    NotebookClient(nb, timeout=600, kernel_name=KERNEL,
                   resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    return nb


def outputs(nb, kind):
    """The outputs of `kind` (a MIME type such as 'image/png') in `nb`."""
    return [o["data"][kind] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type in ("display_data", "execute_result") and kind in o.get("data", {})]


def assert_png(path, folder):
    assert os.path.dirname(os.path.abspath(path)) == os.path.abspath(folder)
    with open(path, "rb") as f:
        assert f.read(8) == PNG
    assert os.path.getsize(path) > 5000


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_in_a_kernel_and_shows_the_plots_it_writes(path, tmp_path, kernel_env,
                                                                 monkeypatch):
    nb = execute_in_kernel(path, tmp_path, kernel_env, monkeypatch)
    written = sorted(p for p in os.listdir(tmp_path) if p.endswith(".png"))
    assert written, "no plot written to OUT_DIR"
    for name in written:
        assert_png(os.path.join(tmp_path, name), tmp_path)
    shown = outputs(nb, "image/png")
    assert len(shown) == len(written), (written, len(shown))   # every plot shown once
    assert all(base64.b64decode(png)[:8] == PNG for png in shown)


def test_notebook_04_validates_on_what_its_parameters_say():
    cells = code_cells(next(p for p in NOTEBOOKS if "04_" in os.path.basename(p)))
    params = cells[parameters_index(cells)]
    scope = {}
    exec(params, scope)
    data = bench_data("tiny_mnist", images=scope["IMAGES"], val_images=scope["VAL_IMAGES"],
                      data="synthetic")
    comment = params[params.index("VAL_IMAGES = "):params.index("BATCH = ")]
    comment = " ".join(comment.replace("#", " ").split())
    assert "None: a fifth of IMAGES (%s for %s)" % (
        format(len(data.x_val), ","), format(scope["IMAGES"], ",")) in comment


def test_the_five_experiments_are_here():
    assert [os.path.basename(p) for p in EXPERIMENT_NOTEBOOKS] == [
        "01_cifar10_sequential_vs_gpu.ipynb", "02_imagenette_sequential_gpu_cudnn.ipynb",
        "03_lenet5_threads_gpu.ipynb", "04_tiny_cnn_numpy_cpu_gpu.ipynb",
        "05_kernel_stages.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebooks_install_in_colab_then_take_parameters(path):
    cells = code_cells(path)
    install = cells[0]
    assert "google.colab" in install and "pip" in install and "install" in install
    assert "import cnncuda" not in install
    assert 'REPO_URL = "https://github.com/<owner>/cnncuda.git"' in install
    scope = {}
    exec(install, scope)                            # outside Colab: nothing happens
    assert "src" not in scope and "google.colab" not in sys.modules
    with open(path) as f:
        markdown = "".join(json.load(f)["cells"][0]["source"])
    assert "no public repository yet" in markdown and "REPO_URL" in markdown
    assert parameters_index(cells) == 1
    params = cells[1]
    sizes = ("STEPS",) if os.path.basename(path).startswith("00_") else ("EPOCHS", "IMAGES")
    for name in sizes + ("ENGINES", "OUT_DIR"):
        assert "\n%s = " % name in params
    if os.path.basename(path)[:2] in ("01", "02", "03", "04"):     # the experiments end
        assert "plot_profiles" in cells[-1] and "speedup_plot" in cells[-2]   # with a profile
    else:
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
