"""precision='tf32' on the cuda engine: its wide SGEMM kernel multiplies on
TF32 tensor cores (cuda/gemm_wide_kernels.cuh, mma.sync m16n8k8; operands
rounded to TF32's 10-bit mantissa, sums in fp32).

Each product runs on the wide kernel (the shapes of test_gpu_sgemm past
2^27 multiply-adds: each row tile, ragged edges, split-K, strides, uneven
padding) in every layout a layer uses (forward NN with the batched NCHW
operands, the filter gradient with B transposed, the data gradient with A
transposed; the dense layer's three). Against the float64 reference the error
must be TF32's: normwise under 4e-3 of the result (a wrong fragment, tile
or slice gives errors of order 1), and above 5e-5 for each of the three
products on tensor cores (TF32's is some 3e-4, the float32 kernel's under
2e-5: the tensor cores were used, not a silent float32 path). A
convolution's short-K and narrow products stay on their float32 kernels
(tensor_core_products): float32's result exactly. That lower bound, and the
bits TF32 changes, are checked only on GPUs with TF32 tensor cores (compute
capability 8.0); on older ones (a T4) TF32 computes in float32 and those
checks skip.
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, SPARSE_LOGITS, engine_params, require_tensor_cores
from test_gpu_sgemm import WIDE_CONV_CASES, WIDE_DENSE_CASES

CUDA = engine_params(("cuda",))
TF32_MAX = 4e-3   # normwise relative error allowed with TF32 operands
TF32_MIN = 5e-5   # ... and seen with them (rounding to 10 bits of mantissa)
FP32_MAX = 2e-5   # the float32 kernel stays under this on these shapes


def normwise(got, ref):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


def errors(engine, layers, shape, n, precision, weights=None, seed=3):
    """Normwise errors of forward, backward data and each gradient of
    `layers` on `engine` against the float64 reference."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + tuple(shape)).astype(np.float32)
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=seed, precision=precision)
    ref = make_net("numpy", layers, shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    ref = type(ref)(layers, shape, n, SPARSE_LOGITS, ADAM, seed=seed, dtype=np.float64)
    if weights is not None:
        net.set_weights(weights)
        ref.set_weights(weights)
    y = net.forward(x, training=True)
    errs = {"forward": normwise(y, ref.forward(x.astype(np.float64), training=True))}
    dy = rng.standard_normal(y.shape).astype(np.float32)
    errs["backward data"] = normwise(net.backward(dy), ref.backward(dy.astype(np.float64)))
    for i, (g, g_ref) in enumerate(zip(net.get_gradients(), ref.get_gradients())):
        if np.any(g_ref):
            errs["gradient %d" % i] = normwise(g, g_ref)
    return net, errs


PRODUCTS = ("forward", "backward data", "gradient 0")   # y, dx and dw: the SGEMM's


def tensor_core_products(layer, shape):
    """Which of a wide layer's three products the cuda engine multiplies on
    tensor cores in a precision other than float32. A convolution's products
    with a K of at most 32 (the short kernel: the forward's K is c kh kw, the
    data gradient's the filters) or at most 32 columns with the bias's column
    of ones (the narrow filter gradient) stay on their float32 kernels
    (cuda/gemm.cu): those beat the tensor-core tiles there."""
    if layer["kind"] != "conv2d":
        return PRODUCTS
    k = shape[2] * layer["kernel"][0] * layer["kernel"][1]
    f = layer["units"]

    def short(m, kk):   # gemm_short_kernels.cuh's short_k_fits
        return kk <= 32 and m * (-(-kk // 4) * 4) <= 4096
    on = {"forward": not short(f, k), "backward data": not short(k, f),
          "gradient 0": k + layer.get("use_bias", True) > 32}
    return tuple(what for what in PRODUCTS if on[what])


def check_rounding(low, fp, layers, shape, floor, name):
    """The products on tensor cores show the rounding (an error above
    `floor`); the others are float32's kernels: float32's error exactly."""
    tc = tensor_core_products(layers[0], shape)
    for what in PRODUCTS:
        if what not in tc:
            assert low[what] == fp[what], "%s: not float32's result" % what
    require_tensor_cores()
    for what in tc:
        assert low[what] > floor, "%s: error %.3g, no %s rounding seen" % (what, low[what], name)


def check_tf32(engine, layers, shape, n, weights=None):
    _, tf = errors(engine, layers, shape, n, "tf32", weights)
    _, fp = errors(engine, layers, shape, n, "float32", weights)
    for what, e in tf.items():
        assert e < TF32_MAX, "%s: TF32 error %.3g over %.3g" % (what, e, TF32_MAX)
        assert fp[what] < FP32_MAX, "%s: float32 error %.3g" % (what, fp[what])
    check_rounding(tf, fp, layers, shape, TF32_MIN, "TF32")


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", WIDE_CONV_CASES)
def test_conv2d_tf32_against_the_reference(engine, shape, filters, size, strides, padding, n):
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding}]
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(2)
    w = [a + 0.5 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    check_tf32(engine, layers, shape, n, w)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("fan_in,units,n", WIDE_DENSE_CASES)
def test_dense_tf32_against_the_reference(engine, fan_in, units, n):
    layers = [{"kind": "dense", "units": units}]
    net = make_net(engine, layers, (fan_in,), n, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(4)
    w = [a + 0.1 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    check_tf32(engine, layers, (fan_in,), n, w)


@pytest.mark.parametrize("engine", CUDA)
def test_tf32_on_large_products_only(engine):
    """The conv's 64 x 8112 x 288 products go to the wide kernel (TF32), a
    small dense layer stays on the float32 tile: the same bits as float32."""
    big = [{"kind": "conv2d", "units": 64, "kernel": (3, 3)}]
    _, tf = errors(engine, big, (15, 15, 32), 48, "tf32")
    assert tf["forward"] < TF32_MAX
    small = [{"kind": "dense", "units": 10}]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 40)).astype(np.float32)
    outs = [make_net(engine, small, (40,), 8, SPARSE_LOGITS, ADAM, seed=1, precision=p)
            .forward(x, training=True) for p in ("float32", "tf32")]
    assert np.array_equal(outs[0], outs[1])
    require_tensor_cores()
    assert TF32_MIN < tf["forward"], "error %.3g, no TF32 rounding seen" % tf["forward"]


@pytest.mark.parametrize("engine", CUDA)
def test_tf32_training_is_deterministic_and_float32_unchanged(engine):
    # batch 512: the second convolution's products (64 x 12,800 x 288) on
    # the wide kernel, so on TF32 tensor cores
    from test_gpu_sgemm import WIDE_NETWORK as layers
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1536, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 1536)

    def train(precision):
        net = make_net(engine, layers, (16, 16, 3), 512, SPARSE_LOGITS, ADAM, seed=4,
                       precision=precision)
        losses = [net.train_batch(x[512 * i:512 * (i + 1)], y[512 * i:512 * (i + 1)])[0]
                  for i in range(3)]
        return losses, net.get_weights()

    l1, w1 = train("tf32")
    l2, w2 = train("tf32")
    assert l1 == l2
    for a, b in zip(w1, w2):
        assert np.array_equal(a, b)
    l3, w3 = train("float32")
    np.testing.assert_allclose(l1, l3, rtol=1e-2)
    require_tensor_cores()
    assert not all(np.array_equal(a, b) for a, b in zip(w1, w3)), "tf32 gave float32's bits"
