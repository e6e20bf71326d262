"""The omp engine: the cpu engine's kernels on N OpenMP threads.

Every op and whole network already runs on omp against the NumPy reference
(conftest lists it). Here: results are bit-identical for 1, 2 and 3 threads
(this machine may have 2 cores: 3 threads share them); everything except the
convolution filter gradient (summed over fixed chunks of the batch instead
of image after image) is bit-identical to the cpu engine, and that gradient
is within float32 rounding of it; the thread-count argument and default; the
cpu engine starts no thread; the portable and AVX2 pooling paths agree bit
for bit.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cnncuda
from cnncuda import _C
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import ADAM, SPARSE_LOGITS, assert_close

pytestmark = pytest.mark.skipif("omp" not in cnncuda.devices(),
                                reason="engine 'omp' is not in this build: %s"
                                % _C.engine_status("omp"))

THREADS = (1, 2, 3)

# Every kind of layer, with shapes that leave remainders everywhere: odd
# planes for the pooling tails, 'same' padding and a stride-2 convolution, a
# dense layer large enough for the threaded GEMM.
NET = [
    {"kind": "conv2d", "units": 8, "kernel": (3, 3), "padding": "same"},
    {"kind": "batchnorm"},
    {"kind": "activation", "activation": "relu"},
    {"kind": "maxpool", "kernel": (2, 2)},
    {"kind": "conv2d", "units": 12, "kernel": (3, 3), "strides": (2, 2)},
    {"kind": "activation", "activation": "tanh"},
    {"kind": "avgpool", "kernel": (2, 2), "padding": "same"},
    {"kind": "dropout", "rate": 0.25},
    {"kind": "flatten"},
    {"kind": "dense", "units": 160},
    {"kind": "activation", "activation": "sigmoid"},
    {"kind": "dense", "units": 10},
]
SHAPE = (19, 21, 3)


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n,) + SHAPE).astype(np.float32),
            rng.integers(0, 10, n).astype(np.int64))


def trained(device, n, steps=3, batch=None, layers=NET, shape=SHAPE):
    """Weights after `steps` train_batch calls and then one fit-style epoch
    (resident data, train_range), plus the last gradients."""
    batch = batch or n
    x, y = data(n)
    net = make_net(device, layers, shape, batch, SPARSE_LOGITS, ADAM, seed=7)
    for _ in range(steps):
        net.train_batch(x[:batch], y[:batch])
    net.set_data(x, y)
    net.set_order(np.random.default_rng(1).permutation(n).astype(np.int32))
    net.train_range(0, n, batch)
    sums = net.read_sums()
    net.compute_gradients(x[:batch], y[:batch])
    return net.get_weights(), net.get_gradients(), sums, net.predict(x)


@pytest.mark.parametrize("n,batch", [(6, None), (1, None), (40, None), (45, 16)])
def test_bit_identical_for_1_2_3_threads(n, batch):
    # n 1: fewer images than threads, the GEMMs themselves are threaded;
    # n 40: more images than filter-gradient chunks (32), uneven chunks.
    runs = [trained("omp:%d" % t, n, batch=batch) for t in THREADS]
    first = runs[0]
    for t, run in zip(THREADS[1:], runs[1:]):
        for what, a, b in zip(("weights", "gradients"), first[:2], run[:2]):
            for i, (u, v) in enumerate(zip(a, b)):
                assert np.array_equal(u, v), "%s %d differ between 1 and %d threads" % (what, i, t)
        assert first[2] == run[2], "loss sums differ between 1 and %d threads" % t
        assert np.array_equal(first[3], run[3]), "predictions differ between 1 and %d threads" % t


def test_seed_networks_bit_identical():
    for model in ("cifar10_cnn", "lenet5"):
        spec = seed_network(model)
        x, y = synthetic_data(model, 64)
        weights = []
        for t in THREADS:
            net = make_net("omp:%d" % t, spec["layers"], spec["input_shape"], 32, spec["loss"],
                           spec["optimizer"], seed=3)
            net.set_data(x, y)
            net.set_order(np.arange(64, dtype=np.int32))
            net.train_range(0, 64, 32)
            weights.append(net.get_weights())
        for t, w in zip(THREADS[1:], weights[1:]):
            assert all(np.array_equal(a, b) for a, b in zip(weights[0], w)), (model, t)


def test_matches_cpu():
    """The same bits as cpu wherever the work is only cut, not re-summed; the
    convolution filter gradients (summed per chunk of the batch, then over
    chunks) within float32 rounding."""
    x, y = data(12)
    nets = {d: make_net(d, NET, SHAPE, 12, SPARSE_LOGITS, ADAM, seed=5) for d in ("cpu", "omp:3")}
    out = {d: net.forward(x, training=True) for d, net in nets.items()}
    assert np.array_equal(out["cpu"], out["omp:3"])
    dy = np.random.default_rng(2).standard_normal(out["cpu"].shape).astype(np.float32)
    dx = {d: net.backward(dy) for d, net in nets.items()}
    assert np.array_equal(dx["cpu"], dx["omp:3"])
    grads = {d: net.get_gradients() for d, net in nets.items()}
    conv_kernels = {0, 4}  # weight indices of the two convolution kernels
    for i, (g, h) in enumerate(zip(grads["cpu"], grads["omp:3"])):
        if i in conv_kernels:
            assert_close(h, g, 1e-5, 1e-5 * np.abs(g).max(), "conv kernel gradient %d" % i)
        else:
            assert np.array_equal(g, h), "gradient %d differs from cpu" % i
    # whole runs stay close
    a, b = trained("cpu", 20), trained("omp:2", 20)
    for u, v in zip(a[0], b[0]):
        assert_close(v, u, 1e-4, 1e-4, "weights after training")


BIG_CONV = [{"kind": "conv2d", "units": 32, "kernel": (3, 3)},
            {"kind": "conv2d", "units": 16, "kernel": (3, 3), "padding": "same"},
            {"kind": "flatten"}, {"kind": "dense", "units": 10}]
DENSE = [{"kind": "dense", "units": 256}, {"kind": "activation", "activation": "relu"},
         {"kind": "dense", "units": 300}, {"kind": "activation", "activation": "softmax"}]


@pytest.mark.parametrize("layers,shape,n", [(BIG_CONV, (34, 34, 16), 1),
                                            (BIG_CONV, (34, 34, 16), 2),
                                            (DENSE, (300,), 37)])
def test_threaded_gemm_matches_cpu(layers, shape, n):
    """Products large enough to be cut into tiles on several threads (a batch
    of one or two images: the convolution's own GEMMs; dense layers) give
    the cpu engine's bits, except the convolution filter gradients."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    res = {}
    for device in ("cpu", "omp:1", "omp:2", "omp:3"):
        net = make_net(device, layers, shape, n, SPARSE_LOGITS, ADAM, seed=1)
        y = net.forward(x, training=True)
        dy = np.random.default_rng(9).standard_normal(y.shape).astype(np.float32)
        res[device] = [y, net.backward(dy)] + net.get_gradients()
    conv_kernels = {0, 2} if layers is BIG_CONV else set()
    for device in ("omp:1", "omp:2", "omp:3"):
        for i, (a, b) in enumerate(zip(res["omp:1"], res[device])):
            assert np.array_equal(a, b), "array %d differs between omp:1 and %s" % (i, device)
        for i, (a, b) in enumerate(zip(res["cpu"], res[device])):
            if i - 2 in conv_kernels:
                assert_close(b, a, 1e-5, 1e-5 * np.abs(a).max(), "conv kernel gradient")
            else:
                assert np.array_equal(a, b), "array %d differs between cpu and %s" % (i, device)


def test_thread_count_argument():
    spec = seed_network("tiny_mnist")
    args = (spec["layers"], spec["input_shape"], 4, spec["loss"], spec["optimizer"])
    with pytest.raises(ValueError, match=r"threads >= 1"):
        make_net("omp:0", *args)
    with pytest.raises(ValueError, match=r"engine 'omp': threads must be in \[1, 1024\], got 5000"):
        make_net("omp:5000", *args)
    saved = cnncuda.runtime._omp_threads[0]
    try:
        cnncuda.set_num_threads(3)
        assert cnncuda.get_num_threads() == 3
        x, y = synthetic_data("tiny_mnist", 4)
        w3 = make_net("omp", *args).train_batch(x, y)
        w1 = make_net("omp:1", *args).train_batch(x, y)
        assert w3 == w1
        cnncuda.set_num_threads(0)
        assert cnncuda.get_num_threads() >= 1
        with pytest.raises(ValueError, match="n: expected an int >= 0"):
            cnncuda.set_num_threads(-1)
    finally:
        cnncuda.runtime._omp_threads[0] = saved


def test_default_is_every_core_or_omp_num_threads():
    code = "import cnncuda; print(cnncuda.get_num_threads())"
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    cores = len(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == str(cores), out.stderr
    env["OMP_NUM_THREADS"] = "5"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "5", out.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_cpu_engine_starts_no_thread():
    """The cpu engine never enters a parallel region, so OpenMP never starts
    its threads; the omp engine does."""
    code = textwrap.dedent("""
        import os
        import numpy as np
        from cnncuda.engine import make_net
        from cnncuda.seeds import seed_network, synthetic_data
        spec = seed_network("cifar10_cnn")
        x, y = synthetic_data("cifar10_cnn", 64)
        def threads():
            return len(os.listdir("/proc/self/task"))
        def train(device):
            net = make_net(device, spec["layers"], spec["input_shape"], 32, spec["loss"],
                           spec["optimizer"])
            for i in range(2):
                net.train_batch(x[32 * i:32 * (i + 1)], y[32 * i:32 * (i + 1)])
            net.evaluate(x, y)
        before = threads()
        train("cpu")
        after_cpu = threads()
        train("omp:3")
        print(before, after_cpu, threads())
    """)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    before, after_cpu, after_omp = map(int, out.stdout.split())
    assert after_cpu == before
    assert after_omp > before


POOL_CASES = [
    ("maxpool", (30, 30, 4)), ("maxpool", (13, 13, 3)), ("maxpool", (7, 40, 2)),
    ("avgpool", (28, 28, 2)), ("avgpool", (11, 9, 3)),
]


def pool_results(layer, shape):
    """Forward and backward of one pooling layer on cpu and omp:3 (many
    ties), as one array."""
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (5,) + shape).astype(np.float32)
    out = []
    for device in ("cpu", "omp:3"):
        net = make_net(device, [{"kind": layer, "kernel": (2, 2)}], shape, 5, SPARSE_LOGITS, ADAM)
        y = net.forward(x, training=True)
        dy = np.random.default_rng(5).standard_normal(y.shape).astype(np.float32)
        out += [y.ravel(), net.backward(dy).ravel()]
    return np.concatenate(out)


@pytest.mark.parametrize("layer,shape", POOL_CASES)
def test_pooling_paths_agree(layer, shape):
    """The AVX2 max-pooling path (when this CPU has it) and the portable one
    (forced with CNNCUDA_GEMM=portable, in a child process) give the same
    bits, on both engines."""
    here = pool_results(layer, shape)
    code = textwrap.dedent("""
        import sys
        import numpy as np
        sys.path[:0] = [%r, %r]
        from test_omp import pool_results
        from cnncuda import _C
        assert _C.gemm_path() == "portable"
        np.save(sys.argv[1], pool_results(%r, %r))
    """ % (os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__)), layer, shape))
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cnncuda_pool_%d.npy" % os.getpid())
    env = dict(os.environ, CNNCUDA_GEMM="portable")
    out = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    try:
        portable = np.load(path)
    finally:
        os.remove(path)
    assert np.array_equal(here, portable)
    half = here.size // 2
    assert np.array_equal(here[:half], here[half:]), "cpu and omp differ"


TEAM_CODE = textwrap.dedent("""
    import os
    import numpy as np
    from cnncuda.engine import make_net
    from cnncuda.seeds import seed_network, synthetic_data
    spec = seed_network("lenet5")
    x, y = synthetic_data("lenet5", 64)
    net = make_net("omp:4", spec["layers"], spec["input_shape"], 32, spec["loss"],
                   spec["optimizer"])
    net.set_data(x, y)
    net.set_order(np.arange(64, dtype=np.int32))
    seen = []
    for _ in range(4):
        net.train_range(0, 64, 32)
        net.read_sums(reset=True)
        seen.append(sorted(os.listdir("/proc/self/task")))
    print(" ".join(",".join(s) for s in seen))
""")


def team_threads():
    """The thread ids of a process after each of 4 epochs of LeNet-5 on
    omp:4."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(cnncuda.__file__)))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([root] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    out = subprocess.run([sys.executable, "-c", TEAM_CODE], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return [set(s.split(",")) for s in out.stdout.split()]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_fixed_team_keeps_its_threads():
    """LeNet-5's ops at batch 32 are cut into 1, 3 and 4 parts on 4 threads
    (Adam's, the step's last region, into 4). libgomp ends the threads that
    a smaller region leaves out and starts new ones for a larger one (a
    team of as many threads as parts showed new thread ids after every
    epoch, BENCHMARKS.md); the engine enters every region with all its threads, so the same threads
    serve every epoch (on the 16-core host, the churn made omp:16 slower
    than omp:4)."""
    seen = team_threads()
    assert all(s == seen[0] for s in seen[1:]), seen
