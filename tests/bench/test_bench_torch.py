"""The PyTorch rows (skipped where torch is not installed): on the CPU at a
thread count, and on the GPU eager and with a CUDA graph where torch sees one."""
import pytest

torch = pytest.importorskip("torch")

from cnncuda import bench  # noqa: E402


def test_torch_cpu_row_by_default_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU: its default rows are the GPU ones")
    rows = bench.run(models=["tiny_mnist"], engines=["cpu"], images=64, val_images=16,
                     data="synthetic", frameworks="torch", verbose=0)
    assert [r["device"] for r in rows] == ["cpu", "torch-cpu:1"]
    assert rows[1]["framework_version"] == torch.__version__
    assert 0 <= rows[1]["final_accuracy"] <= 1 and rows[0]["speedup_vs_torch"] > 0


@pytest.mark.parametrize("model", ["cifar10_cnn", "imagenette_cnn", "binary_100"])
def test_torch_gpu_rows(model):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    rows = bench.run(models=[model], engines=["cpu"], images=80, val_images=16,
                     data="synthetic", frameworks="torch", verbose=0,
                     batch_size=8 if model == "imagenette_cnn" else None)
    devices = [r["device"] for r in rows]
    assert devices == ["cpu", "torch-cuda", "torch-cuda-graph"]
    for r in rows[1:]:
        assert r["timer"] == "cuda-events" and r["seconds_per_epoch"] > 0
        assert r["peak_memory_kind"] == "device (torch allocator peak)"
        assert r["peak_memory_bytes"] > 0 and 0 <= r["final_accuracy"] <= 1
    graph = rows[2]
    assert graph["images"] == (80 // graph["batch_size"]) * graph["batch_size"]


def test_tf32_rows_allow_tf32_on_the_gpu_only():
    """--precision tf32: the GPU variants run with TF32 allowed in cuDNN and
    matrix products (labelled -tf32), the CPU variant stays float32; the
    settings go back afterwards."""
    from cnncuda.bench.data import bench_data
    from cnncuda.bench.torch import TorchRunner
    backends = torch.backends
    before = (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32)
    data = bench_data("tiny_mnist", images=16, val_images=0, data="synthetic")
    variants = ["cpu"] + (["cuda", "cuda-graph"] if torch.cuda.is_available() else [])
    for variant in variants:
        runner = TorchRunner("tiny_mnist", data, 8, variant, precision="tf32")
        try:
            tf32 = variant != "cpu"
            assert runner.precision == ("tf32" if tf32 else "float32")
            assert runner.name == ("torch-%s-tf32" % variant if tf32 else "torch-cpu:1")
            assert (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32) == (tf32, tf32)
        finally:
            runner.close()
        assert (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32) == before
    runner = TorchRunner("tiny_mnist", data, 8, variants[-1])
    try:
        assert runner.precision == "float32" and not runner.name.endswith("-tf32")
        assert (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32) == (False, False)
    finally:
        runner.close()


def test_tf32_gpu_rows_in_a_run():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    rows = bench.run(models=["cifar10_cnn"], engines=["cpu"], images=80, val_images=16,
                     data="synthetic", frameworks="torch", verbose=0, precision="tf32")
    assert [(r["device"], r["precision"]) for r in rows] == [
        ("cpu", "float32"), ("torch-cuda-tf32", "tf32"), ("torch-cuda-graph-tf32", "tf32")]
