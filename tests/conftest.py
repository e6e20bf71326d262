"""Shared test helpers: the C engines to run every op on.

GPU engines carry the ``gpu`` marker and are skipped, with the reason, where
they are not built or no GPU is visible; run them with ``pytest -m gpu``.
"""
import functools
import importlib.util
import os
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import keras_child

import cnncuda
from cnncuda.engine import make_net

GPU_ENGINES = ("cuda", "cudnn")


def engine_params(names=("cpu", "omp", "cuda", "cudnn")):
    params = []
    built = cnncuda.build_info()["engines"]
    runnable = cnncuda.devices()
    for name in names:
        marks = [pytest.mark.gpu] if name in GPU_ENGINES else []
        if name not in built:
            marks.append(pytest.mark.skip(reason="engine %r is not in this build" % name))
        elif name not in runnable:
            marks.append(pytest.mark.skip(reason="engine %r cannot run here: %s"
                                          % (name, cnncuda._C.engine_status(name))))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


C_ENGINES = engine_params()


def tensor_cores():
    """Whether every visible GPU has TF32 tensor cores (compute capability 8.0,
    Ampere, or later): only there does precision='tf32' change any bits. On
    older GPUs (a T4 is 7.5) TF32 computes in float32, as in TensorFlow."""
    caps = cnncuda.cuda_compute_capabilities()
    return bool(caps) and all(cap >= (8, 0) for cap in caps)


def require_tensor_cores():
    """Skips the rest of a test that checks what TF32 does (its bits differ
    from float32's, its rounding error is seen), with the reason, where the
    GPU has no TF32 tensor cores; call it just before those assertions, so
    the test's other checks still run there."""
    if not tensor_cores():
        caps = ["%d.%d" % cap for cap in sorted(set(cnncuda.cuda_compute_capabilities()))]
        where = ("this GPU is " + caps[0] if len(caps) == 1 else
                 "these GPUs are " + ", ".join(caps) if caps else "no GPU is visible")
        pytest.skip("TF32 needs compute capability 8.0 (tensor cores); " + where)

SPARSE_LOGITS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
ADAM = {"kind": "adam"}


def build_seed_net(engine, name, batch=None, seed=0):
    """Seed network `name` (cnncuda.seeds) on `engine`: its layers, input
    shape, loss and optimizer, at `batch` (default: its own batch size)."""
    from cnncuda.seeds import seed_network
    s = seed_network(name)
    return make_net(engine, s["layers"], s["input_shape"], batch or s["batch_size"], s["loss"],
                    s["optimizer"], seed=seed)


def train_seed_epochs(engine, name, batch, images, net_seed, data_seed, epochs=2):
    """`epochs` of seed `name` on `images` resident synthetic samples through
    train_range (a new order each epoch): each epoch's running (loss,
    correct) sums and the final weights."""
    from cnncuda.seeds import synthetic_data
    net = build_seed_net(engine, name, batch, net_seed)
    x, y = synthetic_data(name, images, seed=data_seed)
    net.set_data(x, y)
    sums = []
    for epoch in range(epochs):
        net.set_order(np.random.default_rng(epoch).permutation(images))
        net.train_range(0, images, batch)
        sums.append(net.read_sums(reset=True))
    return sums, net.get_weights()


def assert_close(actual, expected, rtol, atol, what=""):
    """assert_allclose with the largest error in the message."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, "%s: shape %s != %s" % (what, actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def step_losses(net, batch, first, last):
    """Mean loss of each train_range step first..last-1 (net has its data and order)."""
    losses = []
    for k in range(first, last):
        net.train_range(k * batch, batch, batch)
        losses.append(net.read_sums()[0] / batch)
    return np.array(losses)


def max_rel_diff(a, b):
    """The largest |x - y| over max |x| of corresponding arrays of two weight lists."""
    return max(float(np.abs(x - y).max() / (np.abs(x).max() + 1e-30)) for x, y in zip(a, b))


def update_rel_diff(before, a, b):
    """|(a - before) - (b - before)| / |a - before| over all weights
    together (2-norms): how far two optimizer steps from the same weights
    differ."""
    da = np.concatenate([(x - w).ravel() for x, w in zip(a, before)]).astype(np.float64)
    db = np.concatenate([(x - w).ravel() for x, w in zip(b, before)]).astype(np.float64)
    return float(np.linalg.norm(da - db) / np.linalg.norm(da))


def check_agreement(one, group, x, y, order, batch, steps, first_rtol, weight_rtol=1e-5,
                    later_rtol=0.02):
    """A group of replicas against one network from the same weights: the
    first step's loss within first_rtol, its weights within weight_rtol of
    each other (max_rel_diff; None: not checked) and its weight updates
    within 1e-3 (2-norm over all weights: a replica's gradient left out of
    the sum changes the direction of most updates, 0.73 on the cpu engine),
    the losses of steps 2-10 within 1% and of every step within later_rtol,
    and the replicas' weights identical at the end (replicas that step apart
    fail there). test_distributed_gpu.py says when two GPUs need looser
    bounds."""
    before = one.get_weights()
    assert max_rel_diff(before, group.get_weights()) == 0.0
    for net in (one, group):
        net.set_data(x, y)
        net.set_order(order)
    first_one, first_group = step_losses(one, batch, 0, 1), step_losses(group, batch, 0, 1)
    assert abs(first_one[0] - first_group[0]) <= first_rtol * abs(first_one[0])
    if weight_rtol is not None:
        assert max_rel_diff(one.get_weights(), group.get_weights()) < weight_rtol
    assert update_rel_diff(before, one.get_weights(), group.get_weights()) < 1e-3
    rest_one, rest_group = step_losses(one, batch, 1, steps), step_losses(group, batch, 1, steps)
    rel = np.abs(rest_one - rest_group) / np.abs(rest_one)
    print("losses after the first step, relative differences: steps 2-10 at most %.2e, "
          "all at most %.2e" % (rel[:9].max(initial=0.0), rel.max(initial=0.0)))
    assert np.all(rel[:9] <= 0.01), rel[:9]
    assert np.all(rel <= later_rtol), rel
    first = group.replicas[0].get_weights()
    for net in group.replicas[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(first, net.get_weights()))


def _live_net_holders():
    """What holds each live _C.Net: the holder's type, and for a frame its
    function and line and what holds the frame in turn."""
    import gc
    from collections import Counter
    held = Counter()
    for obj in gc.get_objects():
        if not any(type(ref) is cnncuda._C.Net for ref in gc.get_referents(obj)):
            continue
        what = type(obj).__name__
        if what == "frame":
            what = "frame %s:%d (%s) held by %s" % (
                obj.f_code.co_name, obj.f_lineno, obj.f_code.co_filename.rsplit("/", 1)[-1],
                sorted({type(r).__name__ for r in gc.get_referrers(obj)}))
        held[what] += 1
    return held


def pytest_terminal_summary(terminalreporter):
    """Says how many networks are still alive when the session ends (after a
    collection), and what holds them: a network the tests no longer reach
    keeps its engine memory until the process exits."""
    import gc
    gc.collect()
    live = cnncuda._C.live_nets()
    if live:
        terminalreporter.write_line("cnncuda: %d networks alive at the end of the session" % live)
        for what, count in sorted(_live_net_holders().items()):
            terminalreporter.write_line("  %d held by %s" % (count, what))


# Layer specs for the fusion tests, as cnncuda.engine.make_net takes them.
def relu():
    return {"kind": "activation", "activation": "relu"}


def conv(units, k, **kw):
    return dict({"kind": "conv2d", "units": units, "kernel": (k, k)}, **kw)


def pool(kind, k, **kw):
    return dict({"kind": kind, "kernel": (k, k)}, **kw)


def set_env(monkeypatch, env):
    """Each variable of `env` set to its value, or unset where it is None."""
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


def train_three_steps(engine, layers, shape, batch, env, monkeypatch, classes=4, seed=5):
    """With `env` set (set_env): three training steps of a network of
    `layers` on (batch,) + shape inputs, then what a fusion must leave
    unchanged: the steps' sums, the weights, the gradients, the predictions
    and the input gradient of a backward (which wants it)."""
    set_env(monkeypatch, env)
    net = make_net(engine, layers, shape, batch, SPARSE_LOGITS, ADAM, seed=seed)
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch,) + tuple(shape)).astype(np.float32)
    y = rng.integers(0, classes, batch).astype(np.int32)
    sums = [net.train_batch(x, y) for _ in range(3)]
    grads = net.get_gradients()
    net.forward(x, training=True)
    dx = net.backward(rng.standard_normal((batch, classes)).astype(np.float32))
    return [np.array(sums, np.float64)] + net.get_weights() + grads + [net.predict(x), dx]


def assert_same_bits(one, other):
    """Two lists of arrays, equal bit for bit."""
    assert len(one) == len(other)
    for i, (a, b) in enumerate(zip(one, other)):
        assert a.tobytes() == b.tobytes(), "array %d differs" % i


def run_c_check(tmp_path, name):
    """Builds tests/NAME.c with the C sources of csrc and csrc/cpu (no Python,
    no GPU) and runs it: it must exit 0 and print "ok". Skips without gcc."""
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is not installed")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = sorted(os.path.join(d, f) for d in ("csrc", "csrc/net", "csrc/cpu")
                     for f in os.listdir(os.path.join(root, d)) if f.endswith(".c"))
    exe = str(tmp_path / name)
    build = subprocess.run([gcc, "-std=c11", "-O2", "-Icsrc"] + sources
                           + ["tests/fusions/%s.c" % name, "-lm", "-o", exe],
                           cwd=root, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "ok"


def run_both(engine, layers, input_shape, n, seed=3, rtol=1e-5, atol=1e-5, training=True,
             weights=None):
    """Forward, backward and gradients of `layers` on `engine` and on the reference."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + tuple(input_shape)).astype(np.float32)
    net = make_net(engine, layers, input_shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    ref = make_net("numpy", layers, input_shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    ref_64 = type(ref)(layers, input_shape, n, SPARSE_LOGITS, ADAM, seed=seed, dtype=np.float64)
    for a, b in zip(net.get_weights(), ref.get_weights()):
        assert np.array_equal(a, b), "initial weights differ from the reference"
    if weights is not None:
        net.set_weights(weights)
        ref_64.set_weights(weights)
    y = net.forward(x, training=training)
    y_ref = ref_64.forward(x.astype(np.float64), training=training)
    assert_close(y, y_ref, rtol, atol, "forward")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    if not training:
        return net, ref_64
    dx = net.backward(dy)
    dx_ref = ref_64.backward(dy.astype(np.float64))
    assert_close(dx, dx_ref, rtol, atol, "backward data")
    for i, (g, g_ref) in enumerate(zip(net.get_gradients(), ref_64.get_gradients())):
        assert_close(g, g_ref, rtol, atol, "gradient %d" % i)
    return net, ref_64


# Every place a fusion applies or must not: conv + ReLU + max pool (odd
# planes: the pooling's tails), conv without bias + ReLU + average pool
# (full 2x2 windows), an overlapping clipped max pool after a ReLU, a ReLU
# as the first layer (its input gradient is not needed), a conv + ReLU whose
# ReLU is the network's output before Flatten, and a ReLU after a dense layer
# and after batchnorm (not fused).
RELU_FUSION_NETWORKS = {
    "conv_relu_maxpool": [conv(6, 3), relu(), {"kind": "maxpool", "kernel": (2, 2)},
                          conv(5, 3, strides=(2, 2), padding="same", use_bias=False), relu(),
                          {"kind": "avgpool", "kernel": (2, 2)},
                          {"kind": "flatten"}, {"kind": "dense", "units": 7}, relu(),
                          {"kind": "dense", "units": 3}],
    "relu_first": [relu(), {"kind": "maxpool", "kernel": (3, 3), "strides": (2, 2),
                            "padding": "same"},
                   conv(4, 2), {"kind": "batchnorm"}, relu(),
                   {"kind": "avgpool", "kernel": (3, 3), "strides": (2, 2)},
                   conv(3, 1), relu(), {"kind": "flatten"}, {"kind": "dense", "units": 3}],
}


def train_relu_fusion(device, layers, fuse, monkeypatch):
    """Three steps of `layers` (RELU_FUSION_NETWORKS) with the ReLU fusion
    on or off: the weights, gradients, predictions and an input gradient."""
    monkeypatch.setenv("CNNCUDA_FUSE", "1" if fuse else "0")
    net = make_net(device, layers, (11, 13, 3), 8, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 11, 13, 3)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.int32)
    for _ in range(3):
        net.train_batch(x, y)
    grads = net.get_gradients()
    net.forward(x[:5], training=True)
    dx = net.backward(rng.standard_normal((5, 3)).astype(np.float32))
    return net.get_weights() + grads + [net.predict(x), dx]


def random_images(n, shape, classes, seed=0):
    """`n` images of `shape` (HWC), uniform in [0, 1) as float32, and `n`
    labels below `classes` (int64), drawn in that order from `seed`."""
    rng = np.random.default_rng(seed)
    return rng.random((n,) + tuple(shape)).astype(np.float32), rng.integers(0, classes, n)


def same_arrays(a, b, equal_nan=False):
    """Two equally long lists of arrays, equal element for element."""
    return all(np.array_equal(p, q, equal_nan=equal_nan) for p, q in zip(a, b, strict=True))


def assert_same_weights(a, b):
    """Two models' weights, equal array for array."""
    for i, (wa, wb) in enumerate(zip(a.get_weights(), b.get_weights(), strict=True)):
        assert np.array_equal(wa, wb), "weight %d differs" % i


# Keras 3 itself, in a child process, where the tests compare with it
# (keras_child.py: forked from one Python that has imported Keras and JAX)
@functools.lru_cache(maxsize=None)
def keras_importable():
    """Whether a child Python imports Keras and JAX (a find_spec here may
    name the tests' own keras/ folder, a namespace package on sys.path)."""
    if importlib.util.find_spec("jax") is None:
        return False
    return keras_child.run("import keras, jax", [])[0] == 0


def run_keras(code, *args):
    """Runs `code` in a child Python with Keras (JAX on the CPU), as
    `python -c code args` would; its stdout."""
    if not keras_importable():
        pytest.skip("Keras and JAX are not installed (pip install -e '.[test]')")
    status, out, err = keras_child.run(textwrap.dedent(code), [str(a) for a in args])
    assert status == 0, err[-3000:]
    return out
