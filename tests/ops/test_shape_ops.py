"""The shape and image layers' ops (Rescaling, Reshape, ZeroPadding2D,
Cropping2D, UpSampling2D, SpatialDropout2D), forward and backward, on every C
engine against the NumPy reference (float64) on random odd sizes, as
tests/ops/test_ops.py does for the other ops; and inside networks, where a
reshape meets the engines' NCHW layout (before and after a convolution, a
pooling, a Dense layer). Tolerances: 1e-5 (moves of values, one product);
networks with convolutions 1e-4."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.reference_shapes import spatial_dropout_mask
from cnncuda.reference import rng_key
from conftest import ADAM, C_ENGINES, SPARSE_LOGITS, assert_close, engine_params, run_both


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape", [(5, 7, 3), (1, 1, 1), (13,), (9, 1, 4)])
@pytest.mark.parametrize("scale,offset", [(1 / 255, 0.0), (-2.5, 0.75), (0.0, 1.0)])
def test_rescaling(engine, shape, scale, offset):
    run_both(engine, [{"kind": "rescaling", "scale": scale, "offset": offset}], shape, n=3)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,scale,offset", [
    ((5, 7, 3), [1 / 255, -2.0, 0.5], [0.0, 1.0, -0.25]),
    ((5, 7, 3), [2.0, 3.0, 4.0], 0.5),
    ((4, 1, 2), 1.5, [-1.0, 1.0]),
    ((6,), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.5] * 6),
])
def test_rescaling_per_channel(engine, shape, scale, offset):
    run_both(engine, [{"kind": "rescaling", "scale": scale, "offset": offset}], shape, n=3)


def test_rescaling_rounds_the_product_before_the_sum():
    """In float32 the engines compute x*scale then + offset, each rounded:
    the bits of NumPy's float32 x * s + o (a fused multiply-add would differ)."""
    rng = np.random.default_rng(4)
    x = (rng.random((64, 5)) * 255).astype(np.float32)
    scale, offset = np.float32(1 / 255), np.float32(-0.5)
    for engine in ("cpu", "omp:2"):
        net = make_net(engine, [{"kind": "rescaling", "scale": 1 / 255, "offset": -0.5}], (5,),
                       64, SPARSE_LOGITS, ADAM)
        assert np.array_equal(net.forward(x), x * scale + offset), engine


RESHAPE_CASES = [
    # input shape, target (engine shapes: (H, W, C) or (F,))
    ((3, 5, 7), (105,)),
    ((3, 5, 7), (7, 5, 3)),
    ((3, 5, 7), (15, 1, 7)),      # the same channels: a regrouping of the pixels
    ((3, 5, 7), (1, 15, 7)),
    ((3, 5, 7), (5, 21, 1)),
    ((6, 1, 1), (1, 2, 3)),
    ((35,), (5, 7, 1)),
    ((35,), (1, 5, 7)),
    ((35,), (35,)),
    ((4, 4, 2), (2, 2, 8)),
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,target", RESHAPE_CASES)
def test_reshape(engine, shape, target):
    run_both(engine, [{"kind": "reshape", "shape": target}], shape, n=3)


def test_reshape_is_the_flat_order():
    x = np.arange(2 * 3 * 5 * 7, dtype=np.float32).reshape(2, 3, 5, 7)
    for target in [(7, 5, 3), (105,), (1, 35, 3)]:
        net = make_net("cpu", [{"kind": "reshape", "shape": target}], (3, 5, 7), 2,
                       SPARSE_LOGITS, ADAM)
        assert np.array_equal(net.forward(x), x.reshape((2,) + target))


PAD_CASES = [
    # input, ((top, bottom), (left, right))
    ((5, 7, 3), ((1, 1), (1, 1))),
    ((5, 7, 3), ((0, 2), (3, 0))),
    ((1, 1, 2), ((2, 3), (1, 4))),
    ((4, 9, 1), ((0, 0), (0, 0))),
]
CROP_CASES = [
    ((5, 7, 3), ((1, 1), (1, 1))),
    ((5, 7, 3), ((0, 2), (3, 0))),
    ((9, 6, 2), ((4, 4), (0, 5))),   # one pixel row left
    ((4, 9, 1), ((0, 0), (0, 0))),
]


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,padding", PAD_CASES)
def test_zero_padding(engine, shape, padding):
    run_both(engine, [{"kind": "zero_padding2d", "padding": padding}], shape, n=3)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("shape,cropping", CROP_CASES)
def test_cropping(engine, shape, cropping):
    run_both(engine, [{"kind": "cropping2d", "cropping": cropping}], shape, n=3)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("shape,size", [((5, 7, 3), (2, 2)), ((3, 4, 2), (1, 3)),
                                        ((1, 1, 5), (3, 2)), ((4, 3, 1), (1, 1)),
                                        ((6, 5, 2), (4, 3)), ((2, 9, 1), (5, 2))])
def test_upsampling(engine, interpolation, shape, size):
    run_both(engine, [{"kind": "upsampling2d", "size": size, "interpolation": interpolation}],
             shape, n=3)


def test_bilinear_upsampling_is_linear_between_pixel_centres():
    """A ramp stays a ramp between the first and last pixel centres and is
    flat outside them (the edges clamped): Keras's half-pixel rule."""
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 4, 1)
    net = make_net("cpu", [{"kind": "upsampling2d", "size": (1, 4),
                            "interpolation": "bilinear"}], (1, 4, 1), 1, SPARSE_LOGITS, ADAM)
    got = net.forward(x).reshape(-1)
    want = np.clip((np.arange(16) + 0.5) / 4 - 0.5, 0, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_bilinear_omp_is_cpus_bits():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 7, 6, 3)).astype(np.float32)
    layers = [{"kind": "upsampling2d", "size": (3, 2), "interpolation": "bilinear"}]
    outs = []
    for engine in ("cpu", "omp:2"):
        net = make_net(engine, layers, (7, 6, 3), 5, SPARSE_LOGITS, ADAM)
        y = net.forward(x, training=True)
        outs.append((y, net.backward(np.cos(y))))
    for a, b in zip(*outs):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("rate", [0.0, 0.4, 0.8])
@pytest.mark.parametrize("shape", [(5, 7, 9), (3, 3, 1), (1, 1, 40)])
def test_spatial_dropout(engine, rate, shape):
    layers = [{"kind": "spatial_dropout2d", "rate": rate}]
    net, ref = run_both(engine, layers, shape, n=6)       # the same masks: the same RNG
    x = np.random.default_rng(9).standard_normal((6,) + shape).astype(np.float32)
    first = net.forward(x, training=True)
    second = net.forward(x, training=True)
    assert_close(first, ref.forward(x.astype(np.float64), training=True), 1e-6, 1e-6, "step 1")
    assert_close(second, ref.forward(x.astype(np.float64), training=True), 1e-6, 1e-6, "step 2")
    # whole channels: each (sample, channel) plane is all kept or all zero
    planes = np.moveaxis(first, -1, 1).reshape(6 * shape[-1], -1)
    kept = np.all(planes != 0, axis=1)
    assert np.all(kept | np.all(planes == 0, axis=1))
    if rate > 0:
        assert not np.array_equal(first, second), "a new step must draw a new mask"
        if planes.shape[0] >= 40:
            assert abs(kept.mean() - (1 - rate)) < 0.25
        xs = np.moveaxis(x, -1, 1).reshape(planes.shape)
        assert_close(planes[kept], xs[kept] * np.float32(1 / (1 - np.float32(rate))), 1e-6,
                     1e-6, "scale")
    assert_close(net.forward(x, training=False), x, 0, 0, "inference")


def test_spatial_dropout_mask_is_dropouts_stream():
    """Layer i's masks come from Dropout's stream key(key(seed, 2i + 1), t),
    one draw per (sample, channel) at counter i*C + ch."""
    seed, rate = 11, 0.5
    layers = [{"kind": "rescaling", "scale": 1.0}, {"kind": "spatial_dropout2d", "rate": rate}]
    net = make_net("cpu", layers, (2, 3, 8), 4, SPARSE_LOGITS, ADAM, seed=seed)
    x = np.ones((4, 2, 3, 8), np.float32)
    for t in range(2):
        y = net.forward(x, training=True)
        keep = spatial_dropout_mask((4, 2, 3, 8), rate, rng_key(rng_key(seed, 3), t))
        assert np.array_equal(y != 0, np.broadcast_to(keep, y.shape))


# networks where the NHWC order of Keras meets the engines' NCHW images
NETWORKS = {
    "conv_reshape_dense": [
        {"kind": "conv2d", "units": 4, "kernel": (3, 3)}, {"kind": "reshape", "shape": (48,)},
        {"kind": "dense", "units": 5}],
    "conv_reshape_conv": [
        {"kind": "conv2d", "units": 4, "kernel": (3, 3)}, {"kind": "reshape", "shape": (4, 4, 3)},
        {"kind": "conv2d", "units": 2, "kernel": (2, 2)}, {"kind": "flatten"},
        {"kind": "dense", "units": 3}],
    "pad_conv_crop_up_pool": [
        {"kind": "rescaling", "scale": 0.5, "offset": -1.0},
        {"kind": "zero_padding2d", "padding": ((1, 0), (2, 1))},
        {"kind": "conv2d", "units": 3, "kernel": (3, 3), "padding": "same"},
        {"kind": "activation", "activation": "relu"},
        {"kind": "cropping2d", "cropping": ((0, 1), (1, 1))},
        {"kind": "upsampling2d", "size": (2, 1)},
        {"kind": "spatial_dropout2d", "rate": 0.3},
        {"kind": "maxpool", "kernel": (2, 2)}, {"kind": "flatten"}, {"kind": "dense", "units": 4}],
}


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_networks(engine, name):
    run_both(engine, NETWORKS[name], (5, 6, 2), n=4, rtol=1e-4, atol=1e-4)


def test_features_to_an_image_before_a_conv():
    layers = [{"kind": "dense", "units": 24}, {"kind": "reshape", "shape": (4, 2, 3)},
              {"kind": "conv2d", "units": 2, "kernel": (2, 2)}, {"kind": "flatten"}]
    for engine in ("cpu", "omp:2"):
        run_both(engine, layers, (7,), n=3, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layer,message", [
    ({"kind": "reshape", "shape": (7, 1, 1)}, "values cannot become"),
    ({"kind": "cropping2d", "cropping": ((3, 3), (0, 0))}, "cropping2d"),
    ({"kind": "zero_padding2d", "padding": ((-1, 0), (0, 0))}, ">= 0"),
    ({"kind": "upsampling2d", "size": (2, 2), "interpolation": "bicubic"}, "nearest"),
    ({"kind": "spatial_dropout2d", "rate": 1.0}, r"\[0, 1\)"),
    ({"kind": "rescaling", "scale": float("inf")}, "finite"),
    ({"kind": "rescaling", "scale": [1.0, float("nan")]}, "finite"),
    ({"kind": "rescaling", "scale": [1.0, 2.0, 3.0]}, "3 scales and offsets per channel"),
    ({"kind": "rescaling", "scale": [1.0, 2.0], "offset": [1.0]}, "one length|same number"),
])
@pytest.mark.parametrize("engine", ["numpy", "cpu"])
def test_bad_layers_are_refused(engine, layer, message):
    with pytest.raises(ValueError, match=message):
        make_net(engine, [layer], (3, 4, 2), 2, SPARSE_LOGITS, ADAM)


@pytest.mark.parametrize("kind", ["zero_padding2d", "cropping2d", "upsampling2d",
                                  "spatial_dropout2d"])
def test_image_layers_refuse_features(kind):
    layer = {"kind": kind, "padding": ((0, 0), (0, 0)), "cropping": ((0, 0), (0, 0)),
             "rate": 0.5}
    for engine in ("numpy", "cpu"):
        with pytest.raises(ValueError, match="image|H, W, C"):
            make_net(engine, [layer], (6,), 2, SPARSE_LOGITS, ADAM)


ONLY_MOVES = [
    {"kind": "rescaling", "scale": 1 / 255, "offset": -0.5},
    {"kind": "zero_padding2d", "padding": ((1, 2), (0, 3))},
    {"kind": "upsampling2d", "size": (2, 3), "interpolation": "bilinear"},
    {"kind": "cropping2d", "cropping": ((2, 1), (3, 2))},
    {"kind": "spatial_dropout2d", "rate": 0.4},
    {"kind": "reshape", "shape": (19, 51, 1)},
    {"kind": "upsampling2d", "size": (3, 2)},
    {"kind": "reshape", "shape": (5814,)},
]


@pytest.mark.parametrize("engine", engine_params(("omp", "cuda", "cudnn")))
def test_engines_give_the_cpus_bits(engine):
    """No op of these layers sums in an engine's own order: every engine
    gives the cpu engine's bits, forward and backward, over two training
    steps (two dropout masks)."""
    rng = np.random.default_rng(5)
    x = (rng.random((4, 7, 5, 3)) * 255).astype(np.float32)
    nets = [make_net(e, ONLY_MOVES, (7, 5, 3), 4, SPARSE_LOGITS, ADAM, seed=2)
            for e in ("cpu", engine)]
    for _ in range(2):
        ys = [net.forward(x, training=True) for net in nets]
        assert ys[0].tobytes() == ys[1].tobytes()
        dy = np.sin(ys[0])
        dxs = [net.backward(dy) for net in nets]
        assert dxs[0].tobytes() == dxs[1].tobytes()
    assert [net.forward(x).tobytes() for net in nets][0] == nets[1].forward(x).tobytes()
