"""precision='bf16' and 'fp16' on the GPU engines (keras.mixed_precision's
'mixed_bfloat16' and 'mixed_float16'): products on 16-bit tensor cores,
operands rounded to bfloat16 (8 significant bits) or float16 (11), sums in
float32; storage float32.

cuda: the wide SGEMM's mma.sync m16n8k16 instances (cuda/gemm_wide_kernels.cuh)
on the shapes of test_gpu_sgemm_tf32 (each row tile, ragged edges, split-K,
strides, uneven padding) in every layout a layer uses. Against the float64
reference the normwise error must be that of 16-bit operands: under 2.5e-2
for bf16 (unit roundoff 2^-9: some 2e-3 expected on these random operands)
and 4e-3 for fp16 (2^-12, TF32's mantissa: TF32's bound, some 3e-4
expected); a wrong fragment layout or packing order gives errors of order 1.
And above a floor (bf16 5e-4, fp16 5e-5; float32 stays under 2e-5) that
shows the 16-bit rounding happened, on GPUs with tensor cores (compute
capability 8.0) only. The small products stay on the float32 tile kernel,
and a convolution's short-K and narrow products on theirs
(test_gpu_sgemm_tf32.tensor_core_products): the same bits as float32.

cudnn: cuBLAS's dense products (CUBLAS_COMPUTE_32F_FAST_16BF / _16F) and
cuDNN's convolutions (fp16: CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; bf16:
TF32 tensor cores, cuDNN having no float-to-bfloat16 conversion) within the
same upper bounds (no floor: the libraries choose their kernels).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, SPARSE_LOGITS, engine_params, require_tensor_cores
from test_gpu_sgemm import WIDE_CONV_CASES, WIDE_DENSE_CASES
from test_gpu_sgemm_tf32 import FP32_MAX, check_rounding, errors

CUDA = engine_params(("cuda",))
GPU = engine_params(("cuda", "cudnn"))
MAX = {"bf16": 2.5e-2, "fp16": 4e-3}   # normwise relative error allowed
MIN = {"bf16": 5e-4, "fp16": 5e-5}     # ... and seen (the rounding to 16 bits)


def check_16bit(engine, precision, layers, shape, n, weights=None, floor=True):
    _, low = errors(engine, layers, shape, n, precision, weights)
    _, fp = errors(engine, layers, shape, n, "float32", weights)
    for what, e in low.items():
        assert e < MAX[precision], \
            "%s: %s error %.3g over %.3g" % (what, precision, e, MAX[precision])
        assert fp[what] < FP32_MAX, "%s: float32 error %.3g" % (what, fp[what])
    if floor:
        check_rounding(low, fp, layers, shape, MIN[precision], precision)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", GPU)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", WIDE_CONV_CASES)
def test_conv2d_16bit_against_the_reference(engine, precision, shape, filters, size, strides,
                                            padding, n):
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding}]
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(2)
    w = [a + 0.5 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    check_16bit(engine, precision, layers, shape, n, w, floor=engine == "cuda")


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", GPU)
@pytest.mark.parametrize("fan_in,units,n", WIDE_DENSE_CASES)
def test_dense_16bit_against_the_reference(engine, precision, fan_in, units, n):
    layers = [{"kind": "dense", "units": units}]
    net = make_net(engine, layers, (fan_in,), n, SPARSE_LOGITS, ADAM, seed=3)
    rng = np.random.default_rng(4)
    w = [a + 0.1 * rng.standard_normal(a.shape).astype(np.float32) for a in net.get_weights()]
    check_16bit(engine, precision, layers, (fan_in,), n, w, floor=engine == "cuda")


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", CUDA)
def test_16bit_on_large_products_only(engine, precision):
    """The conv's 64 x 8112 x 288 products go to the wide kernel (16-bit), a
    small dense layer stays on the float32 tile: the same bits as float32."""
    big = [{"kind": "conv2d", "units": 64, "kernel": (3, 3)}]
    _, low = errors(engine, big, (15, 15, 32), 48, precision)
    assert low["forward"] < MAX[precision]
    small = [{"kind": "dense", "units": 10}]
    x = np.random.default_rng(0).standard_normal((8, 40)).astype(np.float32)
    outs = [make_net(engine, small, (40,), 8, SPARSE_LOGITS, ADAM, seed=1, precision=p)
            .forward(x, training=True) for p in ("float32", precision)]
    assert np.array_equal(outs[0], outs[1])
    require_tensor_cores()
    assert low["forward"] > MIN[precision]


@pytest.mark.parametrize("engine", CUDA)
def test_fp16_overflows_where_bf16_does_not(engine):
    """float16's range ends at 65504: an operand past it becomes inf in the
    fp16 product (what loss scaling guards against), while bfloat16 (float32's
    range) and float32 keep it finite."""
    layers = [{"kind": "dense", "units": 256, "use_bias": 0}]
    n, fan_in = 600, 1100           # 600 x 256 x 1100: the wide kernel
    x = np.ones((n, fan_in), np.float32)
    x[0, 0] = 1e5
    outs = {}
    for p in ("float32", "bf16", "fp16"):
        net = make_net(engine, layers, (fan_in,), n, SPARSE_LOGITS, ADAM, seed=1, precision=p)
        outs[p] = net.forward(x, training=False)
    assert np.all(np.isfinite(outs["float32"])) and np.all(np.isfinite(outs["bf16"]))
    require_tensor_cores()
    assert not np.all(np.isfinite(outs["fp16"][0])), "fp16 operand 1e5 did not overflow"
    assert np.all(np.isfinite(outs["fp16"][1:]))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", GPU)
def test_16bit_training_is_deterministic_and_tracks_float32(engine, precision):
    # batch 512: the second convolution's products (64 x 12,800 x 288) on
    # the wide kernel (cuda), cuDNN's and cuBLAS's 16-bit math (cudnn)
    from test_gpu_sgemm import WIDE_NETWORK as layers
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1536, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 1536)

    def train(p):
        net = make_net(engine, layers, (16, 16, 3), 512, SPARSE_LOGITS, ADAM, seed=4,
                       precision=p)
        losses = [net.train_batch(x[512 * i:512 * (i + 1)], y[512 * i:512 * (i + 1)])[0]
                  for i in range(3)]
        return losses, net.get_weights()

    l1, w1 = train(precision)
    l2, w2 = train(precision)
    if engine == "cuda":            # cuDNN's 16-bit algorithms need not be deterministic
        assert l1 == l2
        for a, b in zip(w1, w2):
            assert np.array_equal(a, b)
    l3, w3 = train("float32")
    np.testing.assert_allclose(l1, l3, rtol=5e-2 if precision == "bf16" else 1e-2)
    require_tensor_cores()
    assert not all(np.array_equal(a, b) for a, b in zip(w1, w3)), \
        "%s gave float32's bits" % precision


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", CUDA)
def test_16bit_column_matrix_gives_the_float32_column_matrix_bits(engine, precision):
    """A 16-bit convolution whose products both take B in 16 bits stores its
    column matrix in 16 bits (cuda/conv2d.cu's cnn_cuda_conv2d_col16: at
    batch 48 here, 8112 columns, a multiple of 8), rounded as the SGEMM would
    round a float32 one (at batch 47, 7943 columns: float32): the same mma
    operands, so each image's forward has the same bits at either batch
    (both on the wide kernel with the same slices of K)."""
    layers = [{"kind": "conv2d", "units": 64, "kernel": (3, 3)}]
    x = np.random.default_rng(5).standard_normal((48, 15, 15, 32)).astype(np.float32)
    out = {}
    for n in (48, 47):
        net = make_net(engine, layers, (15, 15, 32), n, SPARSE_LOGITS, ADAM, seed=3,
                       precision=precision)
        out[n] = net.forward(x[:n], training=True)
    assert out[48][:47].tobytes() == out[47].tobytes()
