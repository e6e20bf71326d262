"""Engines by name and by TensorFlow's spellings: tf.device, tf.config."""
import warnings

import pytest

import cnncuda
import cnncuda as tf
from cnncuda import config

GPU_RUNS = any(e in cnncuda.devices() for e in ("cuda", "cudnn"))


@pytest.fixture(autouse=True)
def restore_threads():
    before = config.get_intra_op_parallelism_threads()
    yield
    config.set_intra_op_parallelism_threads(before)


def test_tensorflow_spellings_exist():
    assert tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True).from_logits
    assert tf.keras.Sequential is tf.models.Sequential
    assert tf.config.list_physical_devices("CPU")[0].device_type == "CPU"
    assert tf.keras.utils.to_categorical([1, 0], 3).tolist() == [[0, 1, 0], [1, 0, 0]]
    from cnncuda.keras.layers import Conv2D, Dense, Flatten, MaxPooling2D  # noqa: F401
    from cnncuda.keras.models import Sequential, load_model  # noqa: F401
    from cnncuda.keras.datasets import cifar10, mnist  # noqa: F401


def test_gpu_list_matches_the_gpu_engines():
    gpus = tf.config.experimental.list_physical_devices("GPU")
    assert (len(gpus) == 1) == GPU_RUNS
    if gpus:
        assert gpus[0].name == "/physical_device:GPU:0"
        tf.config.experimental.set_memory_growth(gpus[0], True)
    with pytest.raises(ValueError, match="device_type: expected 'CPU', 'GPU' or None"):
        tf.config.list_physical_devices("TPU")


@pytest.mark.parametrize("name,engine", [("/CPU:0", "cpu"), ("CPU:0", "cpu"), ("cpu:0", "cpu"),
                                         ("/device:CPU:0", "cpu"), ("cpu", "cpu"),
                                         ("numpy", "numpy"), ("/job:localhost/replica:0/task:0/device:CPU:0", "cpu")])
def test_cpu_names(name, engine):
    assert config.engine_for(name) == engine
    with tf.device(name):
        assert config.resolve_device("numpy" if engine != "numpy" else "cpu") == engine


def test_gpu_names_say_why_when_there_is_none():
    if GPU_RUNS:
        assert config.engine_for("/GPU:0") in ("cuda", "cudnn")
        return
    for name in ("/GPU:0", "GPU:0", "gpu", "/device:GPU:0"):
        with pytest.raises(cnncuda.EngineUnavailableError,
                           match=r"no GPU engine can run here \(.*cudnn: .*cuda: .*\)\. "
                                 r"Available: numpy, cpu"):
            config.engine_for(name)
    with tf.device("/GPU:0"):   # entering is fine; using it fails
        with pytest.raises(cnncuda.EngineUnavailableError):
            config.resolve_device()


def test_bad_names():
    for name, message in [("/GPU:1", r"expected GPU:0"), ("tpu", r"expected one of 'numpy'"),
                          ("omp:0", r"threads >= 1"), (3, r"device: expected a str")]:
        with pytest.raises((ValueError, TypeError), match=message):
            with tf.device(name):
                pass


def test_threads_choose_the_cpu_engine():
    assert config.get_intra_op_parallelism_threads() == 1
    with tf.device("/CPU:0"):
        assert config.resolve_device() == "cpu"
        tf.config.threading.set_intra_op_parallelism_threads(3)
        if "omp" in cnncuda.devices():
            assert config.resolve_device() == "omp:3"
        else:
            with pytest.warns(RuntimeWarning, match="3 intra-op threads .* cannot run"):
                assert config.resolve_device() == "cpu"
            with pytest.raises(cnncuda.EngineUnavailableError, match="'omp'.*Available: numpy, cpu"):
                config.engine_for("omp")
    with pytest.raises(ValueError, match=r"num_threads: expected an int >= 0, got -2"):
        tf.config.threading.set_intra_op_parallelism_threads(-2)


def test_default_is_the_gpu_else_the_cpu():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = config.resolve_device()
    assert default == ("cudnn" if "cudnn" in cnncuda.devices() else
                       "cuda" if "cuda" in cnncuda.devices() else "cpu")


def test_scope_beats_compile_device_and_nests():
    with tf.device("numpy"):
        assert config.resolve_device("cpu") == "numpy"
        with tf.device("cpu"):
            assert config.resolve_device("numpy") == "cpu"
        assert config.current_device_scope() == "numpy"
    assert config.current_device_scope() is None
    assert config.resolve_device("numpy") == "numpy"


def test_logical_devices_are_names_device_takes():
    devices = tf.config.list_logical_devices()
    assert devices[0] == ("/device:CPU:0", "CPU") and devices[0].name == "/device:CPU:0"
    assert repr(devices[0]) == "LogicalDevice(name='/device:CPU:0', device_type='CPU')"
    assert [d.device_type for d in devices] == ["CPU"] + (["GPU"] if GPU_RUNS else [])
    assert tf.config.experimental.list_logical_devices("gpu") == devices[1:]
    assert [d.name for d in tf.config.list_logical_devices("GPU")] == \
        (["/device:GPU:0"] if GPU_RUNS else [])
    for d in devices:
        with tf.device(d.name):
            assert config.resolve_device() in (("cuda", "cudnn") if d.device_type == "GPU"
                                               else ("cpu",))
    for bad in ("TPU", 0):
        with pytest.raises(ValueError, match="device_type: expected 'CPU', 'GPU' or None"):
            tf.config.list_logical_devices(bad)


def test_tf_test_gpu_questions_follow_the_build_and_the_engines():
    assert tf.test.is_built_with_cuda() == ("cuda-runtime" in cnncuda.build_info()["features"])
    assert tf.test.is_built_with_gpu_support() == tf.test.is_built_with_cuda()
    with pytest.warns(DeprecationWarning, match="use tf.config.list_physical_devices"):
        assert tf.test.is_gpu_available() is GPU_RUNS
    with pytest.warns(DeprecationWarning):
        assert tf.test.is_gpu_available(cuda_only=True) is GPU_RUNS
    assert tf.test.gpu_device_name() == ("/device:GPU:0" if GPU_RUNS else "")


def test_tf_test_with_a_gpu_engine_and_a_compute_capability(monkeypatch):
    monkeypatch.setattr(config, "_reason", lambda engine: None)   # every engine runs
    monkeypatch.setattr(cnncuda.test, "cuda_compute_capabilities", lambda: [(7, 5)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert tf.test.is_gpu_available() is True
        assert tf.test.is_gpu_available(True, (7, 5)) is True
        assert tf.test.is_gpu_available(min_cuda_compute_capability=(8, 0)) is False
        assert tf.test.is_gpu_available(min_cuda_compute_capability=[3, 0]) is True
    assert tf.test.gpu_device_name() == "/device:GPU:0"
    assert [d.name for d in tf.config.list_logical_devices()] == ["/device:CPU:0",
                                                                  "/device:GPU:0"]
    monkeypatch.setattr(config, "_reason", lambda engine: "no GPU")
    with pytest.warns(DeprecationWarning):
        assert tf.test.is_gpu_available(min_cuda_compute_capability=(3, 0)) is False


@pytest.mark.parametrize("kwargs,error,message", [
    ({"cuda_only": 1}, TypeError, r"cuda_only: expected True or False, got 1"),
    ({"min_cuda_compute_capability": 7}, TypeError,
     r"min_cuda_compute_capability: expected a \(major, minor\) pair of ints .* got 7"),
    ({"min_cuda_compute_capability": (7, 0, 1)}, TypeError, r"got \(7, 0, 1\)"),
    ({"min_cuda_compute_capability": (7.0, 0)}, TypeError, r"got \(7\.0, 0\)"),
    ({"min_cuda_compute_capability": (7, -1)}, ValueError,
     r"major and minor >= 0, got \(7, -1\)"),
])
def test_is_gpu_available_argument_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        tf.test.is_gpu_available(**kwargs)
