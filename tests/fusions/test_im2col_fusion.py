"""The column matrix of a convolution written by the kernel before it on the
cuda engine, so that the convolution's forward starts from it (cnn.h
conv2d_forward_col) and no im2col is launched:
- a pooling layer's forward (pool_forward_im2col, cuda/pool_im2col.cu):
  the pool writes its output and also each element of it into the places
  of the next convolution's column matrix that read it; only where that
  convolution reads inside its input (no padding to fill);
- a step's gather on resident data (gather_batch_im2col,
  cuda/gather_im2col.cu): where the first layer is a convolution, each
  train_range step gathers its batch straight into that convolution's
  column matrix (the images' rows into x are not written).
Each must give the bits of the launches it replaces: whole networks train
with them on and off and must agree bit for bit (read when a Net is made:
CNNCUDA_FUSE_POOL_IM2COL=1 turns the pool's on, off when unset: slower on
an H100; CNNCUDA_FUSE_GATHER_IM2COL=0 turns the gather's off, on when
unset). The kernels themselves are checked on the
CPU by a host emulation (tests/dev/test_emu_pool_im2col.py,
tests/dev/test_emu_gather_im2col.py); the Net's plan by a C program on the cpu
engine's table with stand-ins (below)."""

import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import (ADAM, SPARSE_LOGITS, assert_same_bits, conv, engine_params, pool, relu,
                      run_c_check, set_env, train_seed_epochs, train_three_steps)

GPU = engine_params(("cuda", "cudnn"))
CUDA = engine_params(("cuda",))
HOST = engine_params(("cpu", "omp"))
SHAPE = (15, 13, 3)
VAR = "CNNCUDA_FUSE_POOL_IM2COL"
GATHER = "CNNCUDA_FUSE_GATHER_IM2COL"


def switches(fusions, on):
    """The environment that turns each of `fusions` on or off, through its
    default where it has one: the pool's fusion on with "1" (off unset),
    the gather's off with "0" (on unset)."""
    env = {VAR: "1" if on else None, GATHER: None if on else "0"}
    return {var: env[var] for var in fusions}


HEAD = [{"kind": "flatten"}, {"kind": "dense", "units": 4}]

# On 15x13 images (odd: the 2x2 pools drop their input's last row or column)
NETWORKS = {
    # a conv of 33 channels (not a multiple of 32) after a max pool: fused;
    # a 'same' conv after a 'same' pool (padding to fill): not fused
    "max_relu": [conv(5, 3), relu(), pool("maxpool", 2), conv(33, 3), relu(),
                 pool("maxpool", 2, padding="same"), conv(6, 2, padding="same"), relu(),
                 conv(3, 1)] + HEAD,
    # average pools; a conv with strides 2 after one, and a 1x1 conv
    "avg_relu": [conv(6, 5, padding="same"), relu(), pool("avgpool", 2),
                 conv(16, 3, strides=(2, 2)), relu(), pool("avgpool", 2), conv(3, 1)] + HEAD,
    # no ReLU after the convs, a conv without bias, a non-square kernel
    "no_relu": [conv(4, 3), pool("maxpool", 2), {"kind": "conv2d", "units": 5, "kernel": (3, 2),
                                                 "use_bias": False},
                pool("avgpool", 2), conv(3, 1)] + HEAD,
    # a pool first (on the input); overlapping windows with strides
    "pool_first": [pool("maxpool", 2), conv(4, 3), relu(),
                   pool("maxpool", 3, strides=(2, 2)), conv(3, 1)] + HEAD,
    # pooling windows with padding ('same', strides 3; the avg pool's
    # windows with gaps between them), each followed by a 'valid' conv
    "padded_pool": [conv(4, 2), relu(), pool("maxpool", 3, strides=(3, 3), padding="same"),
                    conv(5, 2), relu(), pool("avgpool", 2, strides=(3, 3), padding="same"),
                    conv(3, 1)] + HEAD,
    # imagenette_cnn's blocks: a conv, batchnorm, ReLU, pool, conv
    "batchnorm": [conv(4, 3), {"kind": "batchnorm"}, relu(), pool("maxpool", 2), conv(5, 3),
                  {"kind": "batchnorm"}, relu()] + HEAD,
}


def train(engine, layers, batch, fuse, monkeypatch, fuse_relu="1"):
    """Three training steps, then the gradients, predictions (evaluation
    forwards in chunks), and the input gradient of a backward."""
    env = {VAR: "1" if fuse else None, "CNNCUDA_FUSE": fuse_relu}
    return train_three_steps(engine, layers, SHAPE, batch, env, monkeypatch)


def test_the_net_plans_in_c(tmp_path):
    """tests/fusions/im2col_plan_check.c: the Net on a copy of the cpu table with
    stand-ins for the three entries (the entries they replace): the same
    bits as the cpu table, switches on, off or unset, ReLU fused or not,
    batches 1 and 7, predictions in chunks, train_range epochs with a
    partial last batch; and the stand-ins called exactly where planned, in
    pairs, with the arguments cnn.h promises."""
    run_c_check(tmp_path, "im2col_plan_check")


@pytest.mark.parametrize("name", ["max_relu", "pool_first"])
@pytest.mark.parametrize("engine", HOST)
def test_host_engines_ignore_the_switch(engine, name, monkeypatch):
    """The host engines have neither entry: the switch is read, planned to
    nothing, and the bits are those of before."""
    assert_same_bits(train(engine, NETWORKS[name], 7, True, monkeypatch),
                     train(engine, NETWORKS[name], 7, False, monkeypatch))


@pytest.mark.parametrize("fuse_relu", ["1", "0"])
@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("engine", GPU)
def test_gpu_networks_same_bits_fused_or_not(engine, name, batch, fuse_relu, monkeypatch):
    """With the ReLU after the convolution fused into its forward
    (CNNCUDA_FUSE=1) or run as its own layer (0); on cudnn, which has no such
    entries, the switch changes nothing either."""
    fused = train(engine, NETWORKS[name], batch, True, monkeypatch, fuse_relu)
    plain = train(engine, NETWORKS[name], batch, False, monkeypatch, fuse_relu)
    assert_same_bits(fused, plain)


@pytest.mark.parametrize("sgemm", ["tile64", "wide"])
@pytest.mark.parametrize("name", ["max_relu", "avg_relu"])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_every_sgemm_path_same_bits(engine, name, sgemm, monkeypatch):
    """The forward from the pool's column matrix under every CNNCUDA_SGEMM:
    tile64 (through t and the bias scatter), wide (the wide kernel)."""
    monkeypatch.setenv("CNNCUDA_SGEMM", sgemm)
    assert_same_bits(train(engine, NETWORKS[name], 7, True, monkeypatch),
                     train(engine, NETWORKS[name], 7, False, monkeypatch))


@pytest.mark.parametrize("fusions", [(VAR,), (GATHER,), (VAR, GATHER)])
@pytest.mark.parametrize("name,batch", [("cifar10_cnn", 32), ("cifar10_cnn", 7),
                                        ("lenet5", 32), ("tiny_mnist", 32),
                                        ("binary_100", 5)])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_seeds_same_bits_fused_or_not(engine, name, batch, fusions, monkeypatch):
    """Two epochs of train_range (recorded steps with early launch, and a
    partial last batch) of the seeds: CIFAR-10's two conv-after-max-pool
    pairs, LeNet-5's conv after an average pool, every seed's first conv
    (LeNet-5's with 'same' padding, tiny MNIST's with categorical targets);
    the running sums and the weights the same bits with the fusions on and
    off."""
    runs = []
    for on in (True, False):
        set_env(monkeypatch, switches(fusions, on))
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
        set_env(monkeypatch, switches((GATHER, VAR), on))
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


KERNELS = ("pool_forward_im2col", "im2col_kernel", "max_pool_forward", "avg_pool_forward",
           "gather_batch_kernel", "gather_im2col_kernel")


def kernel_counts(layers, shape, fuse, monkeypatch):
    """The launches of one train_range step (CUDA kernels seen by the
    PyTorch profiler, as tools/profile_cuda.py; CNNCUDA_GRAPHS=0: the step
    launched kernel by kernel), by part of their names."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    set_env(monkeypatch, dict(switches((VAR, GATHER), fuse), CNNCUDA_GRAPHS="0"))
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
            # (the fused kernels' names hold "im2col_kernel" too)
            if part in e.key and not (part == "im2col_kernel" and
                                      ("pool_forward_im2col" in e.key or "gather" in e.key)):
                counts[part] += e.count
    return counts


@pytest.mark.parametrize("name,fused,apart", [
    # the launches of each of KERNELS in one train_range step, fused and apart
    ("cifar10_cnn", (2, 0, 0, 0, 0, 1), (0, 3, 2, 0, 1, 0)),
    ("lenet5", (1, 0, 0, 1, 0, 1), (0, 2, 0, 2, 1, 0)),
    ("tiny_mnist", (0, 0, 1, 0, 0, 1), (0, 1, 1, 0, 1, 0)),
    ("max_relu", (1, 2, 1, 0, 0, 1), (0, 4, 2, 0, 1, 0)),
    ("pool_first", (2, 0, 0, 0, 1, 0), (0, 2, 2, 0, 1, 0)),
])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_the_fused_kernels_run_where_planned(engine, name, fused, apart, monkeypatch):
    """The kernels a train_range step launches: the gather into the first
    convolution's column matrix in place of the gather and that im2col
    (the first layer a conv, 'same' or not), and the pool's fused forward
    in place of the pool's forward and the next convolution's im2col for
    each pool followed by a convolution that reads inside its input (its
    windows overlapping or not); neither for a 'same' convolution after a
    pool, and no gather fusion where a pool comes first."""
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
