"""One network on one engine, chosen by name.

``make_net`` builds the same network on the NumPy reference or on a table of
the C core, with one interface (train_batch, compute_gradients,
apply_gradients, forward, backward, evaluate, predict, get_weights,
set_weights, get_gradients). The Keras-style models sit on top of it.

A network is a list of layer dicts, in the order they run:

=============  ================================================================
kind           keys (defaults)
=============  ================================================================
conv2d         units, kernel (kh, kw), strides (1, 1), padding 'valid', use_bias True
maxpool        kernel (ph, pw), strides (= kernel), padding 'valid'
avgpool        as maxpool
flatten        (none)
dense          units, use_bias True
activation     activation: linear, relu, sigmoid, tanh, softmax, elu (alpha 1.0),
               selu, gelu, swish, softplus, softsign, hard_sigmoid, leaky_relu
               (alpha 0.2), relu6, exponential, mish, relu_general (alpha 0.0,
               max_value None, threshold 0.0: Keras's relu with its arguments)
prelu          shared_axes None (Keras's axes 1-3 sharing one alpha)
dropout        rate
batchnorm      momentum 0.99, epsilon 1e-3
rescaling      scale 1.0, offset 0.0: y = x * scale + offset
reshape        shape: the output, (h, w, c) or (f,), in the flat (NHWC) order
zero_padding2d padding ((top, bottom), (left, right)) of zero rows and columns
cropping2d     cropping ((top, bottom), (left, right)) of rows and columns removed
upsampling2d   size (2, 2), interpolation 'nearest' or 'bilinear'
spatial_dropout2d  rate: whole channels dropped per sample in training
add            inputs (at least 2): the sum
concatenate    inputs (at least 2): joined along the channels (the last axis)
input_slice    offset, shape (h, w, c) or (f,): one input of a model of several
               inputs, its values at `offset` of each sample of the packed
               (features,) network input; reads -1 alone, comes before every
               other layer, passes no gradient back
=============  ================================================================

conv2d, dense and batchnorm also take ``trainable`` (True; False freezes the
layer: the optimizer skips its weights, a batchnorm normalizes with its
moving statistics in training too), and conv2d and dense ``kernel_l1``,
``kernel_l2``, ``bias_l1``, ``bias_l2`` (0.0: their regularizers' factors;
docs/semantics.md, "Regularizers").

Any layer may also name the layers whose outputs it reads, ``"inputs"``:
a list of their indices (-1 the network's input); without it a layer reads
the one before it. The layers come in an order where each reads earlier
ones only, and the last is the output (a graph: csrc/net/graph.c).

loss: ``{"kind": "sparse_categorical_crossentropy" | "categorical_crossentropy" |
"binary_crossentropy", "from_logits": bool}``; optimizer: ``{"kind": "adam",
"learning_rate", "beta_1", "beta_2", "epsilon"}`` or ``{"kind": "sgd",
"learning_rate", "momentum", "nesterov"}``.
"""
from . import _C
from .reference import NumpyNet

__all__ = ["make_net", "parse_device", "PRECISIONS", "TF32_ENGINES"]

PRECISIONS = ("float32", "tf32", "bf16", "fp16")
TF32_ENGINES = ("cuda", "cudnn")      # the engines that take a precision other than 'float32'


def parse_device(device):
    """'cpu' -> ('cpu', 1); 'omp:8' -> ('omp', 8). Raises ValueError naming the argument."""
    if not isinstance(device, str):
        raise TypeError("device: expected a str such as 'cpu', got %r" % (device,))
    name, _, threads = device.partition(":")
    if not threads:
        return name, 1
    try:
        count = int(threads)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError("device: expected 'name:threads' with threads >= 1, got %r" % device)
    return name, count


def make_net(device, layers, input_shape, max_batch, loss, optimizer, seed=0,
             precision="float32", device_index=0):
    """A network on `device` ('numpy', 'cpu', ...); see the module docstring.

    precision: 'float32' (the default everywhere: strict IEEE float32) or
    'tf32', an opt-in of the GPU engines (``TF32_ENGINES``) that lets them
    multiply on TF32 tensor cores, whose inputs are rounded to TF32's 10-bit
    mantissa (about 3 decimal digits per product) while sums stay float32:

    - ``cuda``: the engine's own SGEMM runs its large products on tensor
      cores (mma.sync m16n8k8 TF32: inputs rounded to TF32, accumulation in
      float32); smaller products and every other op stay float32.
    - ``cudnn``: cuDNN may pick TF32 tensor-core convolution algorithms
      (CUDNN_TENSOR_OP_MATH) and cuBLAS runs the dense layers in
      CUBLAS_TF32_TENSOR_OP_MATH.

    'bf16' and 'fp16' (keras.mixed_precision's 'mixed_bfloat16' and
    'mixed_float16' policies ask for them): the products on 16-bit tensor
    cores, operands rounded to bfloat16 (8 bits of mantissa) or float16 (11
    bits, range to 65504), sums in float32; activations, weights and
    gradients stay float32 in memory (16-bit storage is a later stage of
    issue #29):

    - ``cuda``: the wide SGEMM's mma.sync m16n8k16 instances (bf16, f16) on
      its large products, as for TF32; smaller products stay float32.
    - ``cudnn``: cuBLAS's dense layers in CUBLAS_COMPUTE_32F_FAST_16BF /
      _FAST_16F; cuDNN's convolutions with CUDNN_TENSOR_OP_MATH_ALLOW_
      CONVERSION for fp16, and for bf16 CUDNN_TENSOR_OP_MATH (TF32: cuDNN's
      legacy API has no conversion of float tensors to bfloat16).

    The CPU engines (numpy, cpu, omp) compute in float32 and refuse the
    others. Results in TF32 or 16 bits are not the bits of float32; losses
    track float32's within a tolerance (tests/net/test_gpu_training.py,
    tests/net/test_gpu_mixed_precision.py), not exactly. Keras-level models
    opt in with ``cnncuda.config.experimental.enable_tensor_float_32_execution``
    or a mixed policy (cnncuda.mixed_precision).

    device_index: the CUDA device of a GPU engine (0, the first, by default)."""
    name, threads = parse_device(device)
    if name == "omp" and ":" not in device:  # 'omp': cnncuda.get_num_threads()
        from .runtime import get_num_threads
        threads = get_num_threads()
    if precision not in PRECISIONS:
        raise ValueError("precision: expected one of %s, got %r"
                         % (", ".join(map(repr, PRECISIONS)), precision))
    if precision != "float32" and name not in TF32_ENGINES:
        raise ValueError("precision: %r is offered by the %s engines only; the %s engine "
                         "computes in float32" % (precision, " and ".join(TF32_ENGINES), name))
    if name in ("cpu", "cuda", "cudnn") and threads != 1:
        raise ValueError("device: the %s engine takes no thread count (use 'omp:N' for N CPU "
                         "threads), got %r" % (name, device))
    if name == "numpy":
        if threads != 1:
            raise ValueError("device: the numpy engine takes no thread count, got %r" % device)
        return NumpyNet(layers, input_shape, max_batch, loss, optimizer, seed=seed)
    if device_index and name not in ("cuda", "cudnn"):
        raise ValueError("device_index: only the GPU engines take a device, got %r for the %s "
                         "engine" % (device_index, name))
    return _C.Net(name, list(layers), tuple(input_shape), int(max_batch), dict(loss),
                  dict(optimizer), int(seed), threads, precision, int(device_index))
