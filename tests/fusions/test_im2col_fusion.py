"""The column matrix of a convolution written by the kernel before it on the
cuda engine, so that the convolution's forward starts from it (cnn.h
conv2d_forward_col) and no im2col is launched: a step's gather on resident
data (gather_batch_im2col, cuda/gather_im2col.cu): where the first layer
is a convolution, each train_range step gathers its batch straight into
that convolution's column matrix (the images' rows into x are not
written). It must give the bits of the launches it replaces: whole
networks train with it on and off and must agree bit for bit (read when a
Net is made: CNNCUDA_FUSE_GATHER_IM2COL=0 turns it off, on when unset).
The kernel itself is checked on the CPU by a host emulation
(tests/dev/test_emu_gather_im2col.py); the Net's plan by a C program on the cpu
engine's table with stand-ins (below).

The pool's forward writing the next convolution's column matrix
(CNNCUDA_FUSE_POOL_IM2COL) is retired from the engine (off by default and
1-4% slower on an H100, BENCHMARKS.md); its kernel lives on in
dev/cuda/pool_im2col_kernels.cuh (dev/cuda/pool_forward_im2col.cu, the host
emulation tests/dev/test_emu_pool_im2col.py). The variable changes nothing now.
"""

import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import (ADAM, SPARSE_LOGITS, assert_same_bits, conv, engine_params, pool, relu,
                      run_c_check, set_env, train_seed_epochs, train_three_steps)

GPU = engine_params(("cuda", "cudnn"))
CUDA = engine_params(("cuda",))
HOST = engine_params(("cpu", "omp"))
SHAPE = (15, 13, 3)
VAR = "CNNCUDA_FUSE_POOL_IM2COL"  # retired
GATHER = "CNNCUDA_FUSE_GATHER_IM2COL"


def switches(on):
    """The environment that turns the gather's fusion on (its default:
    unset) or off ("0")."""
    return {GATHER: None if on else "0"}


HEAD = [{"kind": "flatten"}, {"kind": "dense", "units": 4}]

# On 15x13 images (odd: the 2x2 pools drop their input's last row or column)
NETWORKS = {
    # a first conv (gathered), then pools and convs: a conv of 33 channels
    # after a max pool, a 'same' conv after a 'same' pool, a 1x1 conv
    "max_relu": [conv(5, 3), relu(), pool("maxpool", 2), conv(33, 3), relu(),
                 pool("maxpool", 2, padding="same"), conv(6, 2, padding="same"), relu(),
                 conv(3, 1)] + HEAD,
    # a pool first (on the input: no gather fusion); overlapping windows
    "pool_first": [pool("maxpool", 2), conv(4, 3), relu(),
                   pool("maxpool", 3, strides=(2, 2)), conv(3, 1)] + HEAD,
}


def train(engine, layers, batch, retired, monkeypatch):
    """Three training steps, then the gradients, predictions (evaluation
    forwards in chunks), and the input gradient of a backward; `retired`:
    CNNCUDA_FUSE_POOL_IM2COL=1, else unset."""
    env = {VAR: "1" if retired else None}
    return train_three_steps(engine, layers, SHAPE, batch, env, monkeypatch)


def test_the_net_plans_in_c(tmp_path):
    """tests/fusions/im2col_plan_check.c: the Net on a copy of the cpu table with
    stand-ins for the gather's two entries (the entries they replace): the
    same bits as the cpu table, switches on, off or unset, ReLU fused or not,
    batches 1 and 7, predictions in chunks, train_range epochs with a
    partial last batch; and the stand-ins called exactly where planned, in
    pairs, with the arguments cnn.h promises; never outside a gathered
    step."""
    run_c_check(tmp_path, "im2col_plan_check")


@pytest.mark.parametrize("name", ["max_relu", "pool_first"])
@pytest.mark.parametrize("engine", HOST + GPU)
def test_the_retired_switch_changes_nothing(engine, name, monkeypatch):
    """CNNCUDA_FUSE_POOL_IM2COL=1 gives the bits of the variable unset, on
    every engine."""
    assert_same_bits(train(engine, NETWORKS[name], 7, True, monkeypatch),
                     train(engine, NETWORKS[name], 7, False, monkeypatch))


@pytest.mark.parametrize("name,batch", [("cifar10_cnn", 32), ("cifar10_cnn", 7),
                                        ("lenet5", 32), ("tiny_mnist", 32),
                                        ("binary_100", 5)])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_seeds_same_bits_fused_or_not(engine, name, batch, monkeypatch):
    """Two epochs of train_range (recorded steps with early launch, and a
    partial last batch) of the seeds: every seed's first conv (LeNet-5's
    with 'same' padding, tiny MNIST's with categorical targets); the running
    sums and the weights the same bits with the gather's fusion on and
    off."""
    runs = []
    for on in (True, False):
        set_env(monkeypatch, switches(on))
        runs.append(train_seed_epochs(engine, name, batch, 100, net_seed=6, data_seed=4))
    (sums_on, w_on), (sums_off, w_off) = runs
    assert sums_on == sums_off
    for i, (a, b) in enumerate(zip(w_on, w_off)):
        assert a.tobytes() == b.tobytes(), "weight %d differs" % i


@pytest.mark.parametrize("engine", CUDA)
def test_gpu_gather_fusion_with_targets_and_repeats(engine, monkeypatch):
    """train_range of a network whose first conv has 'same' padding and
    strides 2, with categorical targets (float rows), over an order with
    repeats, batch 5 over 13 samples: the same bits with the gather fusion
    on and off."""
    layers = [conv(4, 3, strides=(2, 2), padding="same"), relu(), pool("maxpool", 2),
              conv(5, 2)] + HEAD[:1] + [{"kind": "dense", "units": 4},
                                        {"kind": "activation", "activation": "softmax"}]
    loss = {"kind": "categorical_crossentropy", "from_logits": False}
    rng = np.random.default_rng(3)
    x = rng.standard_normal((13,) + SHAPE).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 13)]
    order = rng.integers(0, 13, 13)
    results = []
    for on in (True, False):
        set_env(monkeypatch, switches(on))
        net = make_net(engine, layers, SHAPE, 5, loss, ADAM, seed=2)
        net.set_data(x, y)
        sums = []
        for _ in range(2):
            net.set_order(order)
            net.train_range(0, 13, 5)
            sums.append(net.read_sums(reset=True))
        results.append((sums, net.get_weights()))
    (s_on, w_on), (s_off, w_off) = results
    assert s_on == s_off
    for i, (a, b) in enumerate(zip(w_on, w_off)):
        assert a.tobytes() == b.tobytes(), "weight %d differs" % i


KERNELS = ("im2col_kernel", "max_pool_forward", "avg_pool_forward", "gather_batch_kernel",
           "gather_im2col_kernel")


def kernel_counts(layers, shape, fuse, monkeypatch):
    """The launches of one train_range step (CUDA kernels seen by the
    PyTorch profiler, as tools/profile_cuda.py; CNNCUDA_GRAPHS=0: the step
    launched kernel by kernel), by part of their names."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    set_env(monkeypatch, dict(switches(fuse), CNNCUDA_GRAPHS="0"))
    net = make_net("cuda", layers, shape, 7, SPARSE_LOGITS, ADAM, seed=1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((14,) + tuple(shape)).astype(np.float32)
    y = rng.integers(0, 4, 14).astype(np.int32)
    net.set_data(x, y)
    net.set_order(np.arange(14))
    net.train_range(0, 7, 7)
    net.read_sums()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        net.train_range(7, 7, 7)
        net.read_sums()  # synchronises
    counts = dict.fromkeys(KERNELS, 0)
    for e in prof.key_averages():
        for part in KERNELS:
            # (the gather's fused kernel's name holds "im2col_kernel" too)
            if part in e.key and not (part == "im2col_kernel" and "gather" in e.key):
                counts[part] += e.count
    return counts


@pytest.mark.parametrize("name,fused,apart", [
    # the launches of each of KERNELS in one train_range step, fused and apart
    ("cifar10_cnn", (2, 2, 0, 0, 1), (3, 2, 0, 1, 0)),
    ("lenet5", (1, 0, 2, 0, 1), (2, 0, 2, 1, 0)),
    ("tiny_mnist", (0, 1, 0, 0, 1), (1, 1, 0, 1, 0)),
    ("max_relu", (3, 2, 0, 0, 1), (4, 2, 0, 1, 0)),
    ("pool_first", (2, 2, 0, 1, 0), (2, 2, 0, 1, 0)),
])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_the_fused_kernels_run_where_planned(engine, name, fused, apart, monkeypatch):
    """The kernels a train_range step launches: the gather into the first
    convolution's column matrix in place of the gather and that im2col
    (the first layer a conv, 'same' or not), no gather fusion where a pool
    comes first; every pool's own forward and every later convolution's
    im2col either way."""
    from cnncuda.seeds import seed_network
    if name in NETWORKS:
        layers, shape = NETWORKS[name], SHAPE
    else:
        s = seed_network(name)
        layers, shape = s["layers"], s["input_shape"]
        if s["loss"]["kind"] == "sparse_categorical_crossentropy":
            layers = layers[:-1] + [{"kind": "dense", "units": 4}]  # 4 classes, as the labels
        else:  # tiny_mnist: dense, softmax
            layers = layers[:-2] + [{"kind": "dense", "units": 4}]
    for fuse, want in ((True, fused), (False, apart)):
        counts = kernel_counts(layers, shape, fuse, monkeypatch)
        assert tuple(counts[k] for k in KERNELS) == want, (fuse, counts)
