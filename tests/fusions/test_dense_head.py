"""The cuda engine's dense_loss_head (cuda/dense_head.cu): in a training step
the last Dense layer, a softmax after it and the crossentropy run as two
kernels instead of six to eight. Its gradients must be the reference's
(numpy engine) and close to the unfused path's (CNNCUDA_FUSE_HEAD=0: the
forward's sums, and the weight and bias gradients' over more than 32 rows,
are ordered otherwise); its loss sums and gradients must be the same bits
run to run (no float atomics), at batches up to 2048. Also where it must
not apply (a binary loss, too many units) and every entry to it:
compute_gradients, train_batch, train_range recorded and not."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import engine_params, train_seed_epochs

CUDA = engine_params(("cuda",))

SPARSE_LOGITS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
CATEGORICAL_PROBS = {"kind": "categorical_crossentropy", "from_logits": False}
SPARSE_PROBS = {"kind": "sparse_categorical_crossentropy", "from_logits": False}
CATEGORICAL_LOGITS = {"kind": "categorical_crossentropy", "from_logits": True}
ADAM = {"kind": "adam", "learning_rate": 1e-3}


def dense(units, bias=True):
    return {"kind": "dense", "units": units, "use_bias": bias}


def act(name):
    return {"kind": "activation", "activation": name}


# (layers, input shape, loss): every head the engine takes
HEADS = {
    "logits_after_relu": ([{"kind": "flatten"}, dense(37), act("relu"), dense(10)], (5, 3, 2),
                          SPARSE_LOGITS),
    "softmax_categorical": ([{"kind": "flatten"}, dense(7), dense(3), act("softmax")], (4, 4, 1),
                            CATEGORICAL_PROBS),
    "softmax_sparse_relu": ([dense(130), act("relu"), dense(64), act("softmax")], (19,),
                            SPARSE_PROBS),
    "categorical_logits_no_bias": ([dense(65), act("tanh"), dense(2, bias=False)], (33,),
                                   CATEGORICAL_LOGITS),
    "first_layer_is_the_head": ([dense(5)], (1,), SPARSE_LOGITS),
    "conv_then_head": ([{"kind": "conv2d", "units": 4, "kernel": (3, 3)}, act("relu"),
                        {"kind": "maxpool", "kernel": (2, 2)}, {"kind": "flatten"}, dense(11),
                        act("softmax")], (9, 8, 3), SPARSE_PROBS),
}

# The forward kernel's edges (cuda/dense_head.cu head_forward_kernel: 512
# threads, G = 512 // k rows a pass, each thread cnt = about in / G rows in
# rounds of 8 (cnt <= 8) or 32 loads): k = 2 (G = 256; k = 1 the Net refuses
# for a categorical loss, so the head never sees it), k = 64 (G = 8) over
# three rounds and a ragged one, k = 33 (G = 15, 495 threads), in = G * 32
# exactly and one more (a round of one), in = 409 (threads of 8 and 9 rows
# in one warp: both paths), in < G.
EDGE_HEADS = {
    "k2_in_700": ([dense(700), act("relu"), dense(2)], (6,), SPARSE_LOGITS),
    "k64_in_600": ([dense(600), act("relu"), dense(64), act("softmax")], (5,), SPARSE_PROBS),
    "k33_in_801": ([dense(801), act("tanh"), dense(33)], (4,), CATEGORICAL_LOGITS),
    "k10_in_1632": ([dense(1632), act("relu"), dense(10), act("softmax")], (3,),
                    CATEGORICAL_PROBS),
    "k10_in_1633": ([dense(1633), act("relu"), dense(10, bias=False)], (3,), SPARSE_LOGITS),
    "k10_in_409": ([dense(409), act("sigmoid"), dense(10), act("softmax")], (3,), SPARSE_PROBS),
    "k9_in_8": ([dense(8), act("relu"), dense(9)], (2,), SPARSE_LOGITS),
}
HEADS.update(EDGE_HEADS)

# The backward kernel's paths at large batches (head_backward_kernel): dw and
# db over S slices of the rows and a fixed tree (n > 32; up to 32 slices for
# small layers, 8 for in k + k above 8192), dx in tiles of 32 rows by 64
# inputs without db_below, with it blocks of C inputs over every row in
# passes of 224 rows (C = 1 below 256 inputs, 2 from 256, 4 from 512, 8 from
# 1024), the loss sums in chunks of 1024 rows. in and k at their edges
# (in = 1, 64, 300, 600, 1352: a partial 64-input tile; k = 2, 10, 64), with
# and without the ReLU before the head, db_below, db.
LARGE_HEADS = {
    "cifar_tail": ([dense(64), act("relu"), dense(10)], (23,), SPARSE_LOGITS),
    "relu_no_db_below": ([dense(64, bias=False), act("relu"), dense(10)], (23,), SPARSE_LOGITS),
    "dense_below": ([dense(64), dense(10), act("softmax")], (9,), CATEGORICAL_PROBS),
    "in1_k64": ([dense(1), act("relu"), dense(64), act("softmax")], (3,), SPARSE_PROBS),
    "in300_k2": ([dense(300), act("relu"), dense(2)], (4,), CATEGORICAL_LOGITS),
    "in600_k64": ([dense(600), act("relu"), dense(64), act("softmax")], (4,), SPARSE_PROBS),
    "in1352_db_below_no_db": ([dense(1352), act("relu"), dense(10, bias=False)], (5,),
                              SPARSE_LOGITS),
    "in1352_tanh": ([dense(1352), act("tanh"), dense(10), act("softmax")], (5,),
                    CATEGORICAL_PROBS),
}
LARGE_BATCHES = [513, 1031, 2048]


def labels_for(loss, n, k, rng):
    y = rng.integers(0, k, n)
    if loss["kind"] == "categorical_crossentropy":
        return np.eye(k, dtype=np.float32)[y]
    return y.astype(np.int64)


def gradients(engine, name, batch, monkeypatch, fuse=True, seed=3):
    monkeypatch.setenv("CNNCUDA_FUSE_HEAD", "1" if fuse else "0")
    layers, shape, loss = HEADS[name] if name in HEADS else LARGE_HEADS[name]
    net = make_net(engine, layers, shape, max(batch, 1), loss, ADAM, seed=7)
    rng = np.random.default_rng(seed)
    k = layers[-1]["units"] if layers[-1]["kind"] == "dense" else layers[-2]["units"]
    x = rng.standard_normal((batch,) + shape).astype(np.float32)
    y = labels_for(loss, batch, k, rng)
    sums = net.compute_gradients(x, y)
    return sums, net.get_gradients()


@pytest.mark.parametrize("batch", [1, 7, 33])
@pytest.mark.parametrize("name", sorted(HEADS))
@pytest.mark.parametrize("engine", CUDA)
def test_head_gradients_match_the_reference(engine, name, batch, monkeypatch):
    sums, got = gradients(engine, name, batch, monkeypatch)
    ref_sums, ref = gradients("numpy", name, batch, monkeypatch)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-5, atol=1e-5)
    scale = max(float(np.max(np.abs(g))) for g in ref)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert np.max(np.abs(a - b)) <= 1e-4 * scale + 1e-7, "gradient %d" % i


@pytest.mark.parametrize("name", sorted(set(HEADS) - set(EDGE_HEADS)))
@pytest.mark.parametrize("engine", CUDA)
def test_head_matches_the_unfused_path(engine, name, monkeypatch):
    """dx and db_below are summed in the unfused path's orders (from the same
    dz the same bits); the forward's sums, and dw's and db's over 33 rows
    (two slices), in other orders: within float32 rounding."""
    sums, fused = gradients(engine, name, 33, monkeypatch, fuse=True)
    sums0, apart = gradients(engine, name, 33, monkeypatch, fuse=False)
    np.testing.assert_allclose(sums, sums0, rtol=1e-6)
    for i, (a, b) in enumerate(zip(fused, apart)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg="gradient %d" % i)


@pytest.mark.parametrize("name", sorted(EDGE_HEADS))
@pytest.mark.parametrize("engine", CUDA)
def test_edge_heads_match_the_unfused_path(engine, name, monkeypatch):
    """As above for the long rows: the forward's sums over up to 1633 inputs
    are ordered otherwise than the SGEMM's, so the gradients are compared
    to the largest of them."""
    sums, fused = gradients(engine, name, 33, monkeypatch, fuse=True)
    sums0, apart = gradients(engine, name, 33, monkeypatch, fuse=False)
    np.testing.assert_allclose(sums, sums0, rtol=1e-5, atol=1e-6)
    scale = max(float(np.max(np.abs(g))) for g in apart)
    for i, (a, b) in enumerate(zip(fused, apart)):
        assert np.max(np.abs(a - b)) <= 1e-5 * scale + 1e-7, "gradient %d" % i


@pytest.mark.parametrize("name", sorted(HEADS))
@pytest.mark.parametrize("engine", CUDA)
def test_head_same_bits_run_to_run(engine, name, monkeypatch):
    """The forward's sums in a fixed order (no timing in it): two fresh nets
    give the same loss sums and gradients bit for bit, at an odd batch."""
    sums1, g1 = gradients(engine, name, 33, monkeypatch)
    sums2, g2 = gradients(engine, name, 33, monkeypatch)
    assert sums1 == sums2
    for i, (a, b) in enumerate(zip(g1, g2)):
        np.testing.assert_array_equal(a, b, err_msg="gradient %d" % i)


def train_seed(engine, model, monkeypatch, fuse, graphs=True, images=256, batch=32):
    monkeypatch.setenv("CNNCUDA_FUSE_HEAD", "1" if fuse else "0")
    monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
    return train_seed_epochs(engine, model, batch, images, net_seed=2, data_seed=4)


@pytest.mark.parametrize("model", ["cifar10_cnn", "lenet5", "tiny_mnist"])
@pytest.mark.parametrize("engine", CUDA)
def test_seed_training_same_bits_run_to_run_and_recorded(engine, model, monkeypatch):
    """Deterministic sums (no float atomics): two runs, and a run one kernel
    at a time, give the same loss sums and weights bit for bit; the unfused
    path ends close."""
    s1, w1 = train_seed(engine, model, monkeypatch, fuse=True)
    s2, w2 = train_seed(engine, model, monkeypatch, fuse=True)
    s3, w3 = train_seed(engine, model, monkeypatch, fuse=True, graphs=False)
    assert s1 == s2 == s3
    for a, b, c in zip(w1, w2, w3):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    s0, w0 = train_seed(engine, model, monkeypatch, fuse=False)
    for (l1, c1), (l0, c0) in zip(s1, s0):
        assert abs(l1 - l0) <= 1e-4 * abs(l0) and abs(c1 - c0) <= 2
    for a, b in zip(w1, w0):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("engine", CUDA)
def test_train_batch_and_evaluate_through_the_head(engine, monkeypatch):
    """train_batch takes the fused path; evaluate (no gradient) the plain one:
    after a step both engines' evaluations agree."""
    layers, shape, loss = HEADS["softmax_sparse_relu"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((20,) + shape).astype(np.float32)
    y = rng.integers(0, 64, 20).astype(np.int64)
    out = []
    for engine_name in (engine, "numpy"):
        monkeypatch.setenv("CNNCUDA_FUSE_HEAD", "1")
        net = make_net(engine_name, layers, shape, 20, loss, ADAM, seed=9)
        net.train_batch(x, y)
        out.append((net.evaluate(x, y), net.get_weights()))
    (e1, w1), (e0, w0) = out
    np.testing.assert_allclose(e1, e0, rtol=1e-4)
    for a, b in zip(w1, w0):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("batch", LARGE_BATCHES)
@pytest.mark.parametrize("name", sorted(LARGE_HEADS))
@pytest.mark.parametrize("engine", CUDA)
def test_large_batch_head_matches_the_reference(engine, name, batch, monkeypatch):
    """Every gradient (the head's dw, db, the input gradient through the
    layers below, db_below) within 1e-4 of its largest value of the float64
    reference's, and the loss sums within 1e-5."""
    sums, got = gradients(engine, name, batch, monkeypatch)
    ref_sums, ref = gradients("numpy", name, batch, monkeypatch)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-5, atol=1e-5)
    assert len(got) == len(ref)
    for i, (a, b) in enumerate(zip(got, ref)):
        scale = max(float(np.max(np.abs(b))), 1e-6)
        err = float(np.max(np.abs(a - b)))
        assert err <= 1e-4 * scale + 1e-7, "gradient %d: %g against %g" % (i, err, scale)


@pytest.mark.parametrize("batch", [1031, 2048])
@pytest.mark.parametrize("name", sorted(LARGE_HEADS))
@pytest.mark.parametrize("engine", CUDA)
def test_large_batch_head_same_bits_run_to_run(engine, name, batch, monkeypatch):
    """Fixed orders (no float atomics, slices a function of the shapes): two
    fresh nets, the same loss sums and gradients bit for bit."""
    sums1, g1 = gradients(engine, name, batch, monkeypatch)
    sums2, g2 = gradients(engine, name, batch, monkeypatch)
    assert sums1 == sums2
    for i, (a, b) in enumerate(zip(g1, g2)):
        assert a.tobytes() == b.tobytes(), "gradient %d" % i
