"""A convolution's data gradient and the backward of the pooling layer before
it in one kernel on the cuda engine (cnn.h conv2d_backward_data_pool,
cuda/conv2d_pool_backward.cu): for a max or average pool whose windows do
not overlap, each element of the pool's input takes its gradient straight
from the convolution's column-matrix gradient, the pool's output gradient
never written. It must give the bits of col2im then the pool's backward
(and the ReLU's before it, fused or not): whole networks train with it on
and off (CNNCUDA_FUSE_POOL_COL2IM=1 or 0, read when a Net is made; on by default) and must
agree bit for bit. Where it does not apply (overlapping windows, a pool as
the first layer when no input gradient is wanted, engines without the
entry) nothing changes."""

import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import (ADAM, SPARSE_LOGITS, assert_same_bits, conv, engine_params, pool, relu,
                      run_c_check, train_seed_epochs, train_three_steps)

GPU = engine_params(("cuda", "cudnn"))
CUDA = engine_params(("cuda",))
HOST = engine_params(("cpu", "omp"))
SHAPE = (15, 13, 3)


HEAD = [{"kind": "flatten"}, {"kind": "dense", "units": 4}]

# Every case of the fused kernel and where it must not apply, on 15x13
# images (odd: the 2x2 pools drop their input's last row or column):
NETWORKS = {
    # conv, ReLU, max pool, conv ('same': col2im with padding) of 33
    # channels (not a multiple of 32), ReLU, max pool, conv: two pairs
    "max_relu": [conv(5, 3), relu(), pool("maxpool", 2), conv(33, 3, padding="same"), relu(),
                 pool("maxpool", 2), conv(6, 2)] + HEAD,
    # LeNet's average pools, the second conv with strides 2 (col2im's
    # remainders)
    "avg_relu": [conv(6, 5, padding="same"), relu(), pool("avgpool", 2),
                 conv(16, 3, strides=(2, 2)), relu(), pool("avgpool", 2), conv(3, 1)] + HEAD,
    # pools of a conv's output, without a ReLU
    "no_relu": [conv(4, 3), pool("maxpool", 2), conv(5, 3, use_bias=False),
                pool("avgpool", 2), conv(3, 1)] + HEAD,
    # disjoint windows with padding (3x3 pool, strides 3, 'same': one row
    # of padding on top) and with gaps between them (2x2 windows, strides 3)
    "padded_and_gaps": [conv(4, 3), relu(), pool("maxpool", 3, strides=(3, 3), padding="same"),
                        conv(5, 2), relu(), pool("avgpool", 2, strides=(3, 3), padding="same"),
                        conv(3, 1)] + HEAD,
    # a pool as the first layer: fused only where the input gradient is
    # wanted (backward); a ReLU first, fused into the pool and the conv
    "pool_first": [pool("maxpool", 2), conv(4, 3), relu(), pool("maxpool", 2), conv(3, 1)] + HEAD,
    "relu_first": [relu(), pool("avgpool", 2), conv(4, 3), relu(), pool("maxpool", 2),
                   conv(3, 2)] + HEAD,
    # a ReLU after batchnorm before the pool (imagenette_cnn's blocks)
    "batchnorm": [conv(4, 3), {"kind": "batchnorm"}, relu(), pool("maxpool", 2), conv(5, 3)]
                 + HEAD,
    # overlapping windows: not fused (the path before)
    "overlapping": [conv(4, 3), relu(), pool("maxpool", 3, strides=(2, 2)), conv(5, 2), relu(),
                    pool("avgpool", 3, strides=(2, 2), padding="same"), conv(3, 1)] + HEAD,
}


# 70x69 images: the second convolution's input (the pool's output) is
# 35x34, and one plane of its 3x3 'same' dcol (9 rows of 1,190) does not fit
# a block's shared memory: col2im_pool_backward_kernel, a thread a pool
# output, where every smaller plane takes col2im_pool_backward_planes.
LARGE_SHAPE = (70, 69, 2)
LARGE = [conv(3, 3, padding="same"), relu(), pool("maxpool", 2), conv(4, 3, padding="same"),
         relu(), pool("maxpool", 2), conv(3, 1)] + HEAD


def train(engine, layers, batch, fuse, monkeypatch, fuse_relu="1", shape=SHAPE):
    """Three training steps, then the gradients, predictions, and the input
    gradient of a backward (which wants it: a first pool's backward runs)."""
    env = {"CNNCUDA_FUSE_POOL_COL2IM": "1" if fuse else "0", "CNNCUDA_FUSE": fuse_relu}
    return train_three_steps(engine, layers, shape, batch, env, monkeypatch)


@pytest.mark.parametrize("fuse_relu", ["1", "0"])
@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("engine", GPU)
def test_gpu_networks_same_bits_fused_or_not(engine, name, batch, fuse_relu, monkeypatch):
    """With the ReLU fused into the pool's backward (CNNCUDA_FUSE=1: the
    fused kernel masks by it) or run as its own layer (0); on cudnn, which
    has no such entry, the switch changes nothing either."""
    fused = train(engine, NETWORKS[name], batch, True, monkeypatch, fuse_relu)
    plain = train(engine, NETWORKS[name], batch, False, monkeypatch, fuse_relu)
    assert_same_bits(fused, plain)


@pytest.mark.parametrize("name,batch", [("max_relu", 3100), ("avg_relu", 3100),
                                        ("max_relu", 3700)])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_the_wide_kernel_path_same_bits(engine, name, batch, monkeypatch):
    """At batch 3,100 the second convolution of max_relu (33 x 93,000 x 45
    multiply-adds) takes the wide SGEMM kernel: the fused call forms dcol
    there as conv2d_backward_data does; and the kernel with whole planes a
    block (col2im_pool_backward_planes) takes several planes a block:
    max_relu's second pair (33 channels, plane groups dividing 33, a 2x2
    kernel after it), avg_relu's first (average pooling, a convolution
    with strides 2 after it), max_relu's first (its 3x3 instance, the seed
    CNN's, over 5 channels)."""
    assert_same_bits(train(engine, NETWORKS[name], batch, True, monkeypatch),
                     train(engine, NETWORKS[name], batch, False, monkeypatch))


@pytest.mark.parametrize("name", ["max_relu", "pool_first"])
@pytest.mark.parametrize("engine", HOST)
def test_host_engines_ignore_the_switch(engine, name, monkeypatch):
    """The host engines have no conv2d_backward_data_pool: the switch is
    read, planned to nothing, and the bits are those of before."""
    assert_same_bits(train(engine, NETWORKS[name], 7, True, monkeypatch),
                     train(engine, NETWORKS[name], 7, False, monkeypatch))


def test_the_net_plans_and_skips_in_c(tmp_path):
    """tests/fusions/pool_col_plan_check.c: the Net on a copy of the cpu table with a
    stand-in for the entry (the two entries apart): the same bits as the cpu
    table for these networks and the seeds, switch on or off, ReLU fused or
    not, batches 1 and 7; and the stand-in called exactly where planned,
    with the arguments cnn.h promises."""
    run_c_check(tmp_path, "pool_col_plan_check")


@pytest.mark.parametrize("name,batch", [("cifar10_cnn", 32), ("cifar10_cnn", 7),
                                        ("lenet5", 32), ("lenet5", 1)])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_seeds_same_bits_fused_or_not(engine, name, batch, monkeypatch):
    """Two epochs of train_range (recorded steps with early launch, and a
    partial last batch) of the seeds: CIFAR-10's two conv-after-max-pool
    pairs, LeNet-5's conv after an average pool; the running sums and the
    weights the same bits with the fusion on and off."""
    runs = []
    for fuse in ("1", "0"):
        monkeypatch.setenv("CNNCUDA_FUSE_POOL_COL2IM", fuse)
        runs.append(train_seed_epochs(engine, name, batch, 100, net_seed=6, data_seed=4))
    (sums_on, w_on), (sums_off, w_off) = runs
    assert sums_on == sums_off
    for i, (a, b) in enumerate(zip(w_on, w_off)):
        assert a.tobytes() == b.tobytes(), "weight %d differs" % i


KERNELS = ("col2im_pool_backward", "col2im32", "max_pool_backward", "avg_pool_backward",
           "act_backward")


def kernel_counts(layers, shape, fuse, monkeypatch, parts=KERNELS):
    """The launches of one train_batch step (CUDA kernels seen by the
    PyTorch profiler, tools/profile_cuda.py), by parts of their names."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    monkeypatch.setenv("CNNCUDA_FUSE_POOL_COL2IM", "1" if fuse else "0")
    net = make_net("cuda", layers, shape, 7, SPARSE_LOGITS, ADAM, seed=1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7,) + tuple(shape)).astype(np.float32)
    y = rng.integers(0, 4, 7).astype(np.int32)
    net.train_batch(x, y)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        net.train_batch(x, y)
        net.get_weights()  # synchronises
    counts = dict.fromkeys(parts, 0)
    for e in prof.key_averages():
        for part in parts:
            if part in e.key:
                counts[part] += e.count
    return counts


@pytest.mark.parametrize("name,fused,apart", [
    # the launches of each of KERNELS, fused and apart (an average pool's
    # backward with a ReLU's is two kernels apart: the pool's, the ReLU's)
    ("cifar10_cnn", (2, 0, 0, 0, 1), (0, 2, 2, 0, 1)),
    ("lenet5", (1, 0, 0, 1, 2), (0, 1, 0, 2, 3)),
    ("tiny_mnist", (0, 0, 1, 0, 0), (0, 0, 1, 0, 0)),
    ("overlapping", (0, 2, 1, 1, 2), (0, 2, 1, 1, 2)),
])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_the_fused_kernel_runs_where_planned(engine, name, fused, apart, monkeypatch):
    """The kernels a training step launches: the fused one in place of
    col2im and the pool's backward for each conv after a disjoint pool (not
    after the first conv, which has no input gradient to form), none for
    overlapping windows."""
    from cnncuda.seeds import seed_network
    if name in NETWORKS:
        layers, shape = NETWORKS[name], SHAPE
    else:
        s = seed_network(name)
        layers, shape = s["layers"], s["input_shape"]
        layers = layers[:-1] + [{"kind": "dense", "units": 4}]  # 4 classes, as the labels
    for fuse, want in ((True, fused), (False, apart)):
        counts = kernel_counts(layers, shape, fuse, monkeypatch)
        assert tuple(counts[k] for k in KERNELS) == want, (fuse, counts)


@pytest.mark.parametrize("name,planes,per_output", [
    ("cifar10_cnn", 2, 0), ("lenet5", 1, 0), ("max_relu", 2, 0), ("large", 1, 1)])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_each_fused_kernel_runs_where_planned(engine, name, planes, per_output,
                                                   monkeypatch):
    """The fused kernel with whole planes a block wherever a plane fits its
    shared memory, at batch 7 too; a thread a pool output where it does not
    (LARGE's second convolution)."""
    from cnncuda.seeds import seed_network
    if name == "large":
        layers, shape = LARGE, LARGE_SHAPE
    elif name in NETWORKS:
        layers, shape = NETWORKS[name], SHAPE
    else:
        s = seed_network(name)
        layers, shape = s["layers"][:-1] + [{"kind": "dense", "units": 4}], s["input_shape"]
    parts = ("col2im_pool_backward_planes", "col2im_pool_backward_kernel")
    counts = kernel_counts(layers, shape, True, monkeypatch, parts)
    assert (counts[parts[0]], counts[parts[1]]) == (planes, per_output), counts


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("engine", CUDA)
def test_gpu_the_per_output_kernel_same_bits(engine, batch, monkeypatch):
    """LARGE's second pair on the kernel with a thread a pool output: the
    bits of col2im then the pool's and the ReLU's backward."""
    assert_same_bits(train(engine, LARGE, batch, True, monkeypatch, shape=LARGE_SHAPE),
                     train(engine, LARGE, batch, False, monkeypatch, shape=LARGE_SHAPE))
