"""The augmentation layers' engine ops (csrc/cpu/random_*.c, cuda/random_*.cu)
against the NumPy reference (cnncuda/reference_augment.py) for fixed seeds:
every layer kind, its fill modes and interpolations, odd image sizes, several
training forwards (each draws anew), inference (the input passed through;
RandomCrop's centre), and the seed's reproducibility.

The float32 reference computes with the engines' roundings, so the cpu and
omp engines give its bits; the GPU engines may differ where a rotation's
double cosine or sine rounds differently (1e-5 here) and in RandomContrast's
double sums' order.
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, C_ENGINES, SPARSE_LOGITS, assert_close


def flip(mode="horizontal_and_vertical", **kw):
    return dict(kind="random_flip", mode=mode, **kw)


def affine(kind, low, high, fill="reflect", interp="bilinear", **kw):
    return dict(kind=kind, low=low, high=high, fill_mode=fill, interpolation=interp, **kw)


LAYERS = {
    "flip_both": flip(),
    "flip_h": flip("horizontal"),
    "flip_v": flip("vertical", seed=11),
    "rotation_reflect": affine("random_rotation", (-90.0, 0.0), (90.0, 0.0)),
    "rotation_constant_nearest": affine("random_rotation", (-180.0, 0.0), (180.0, 0.0),
                                        "constant", "nearest", fill_value=0.5),
    "rotation_wrap": affine("random_rotation", (10.0, 0.0), (50.0, 0.0), "wrap"),
    "rotation_nearest_fill": affine("random_rotation", (-30.0, 0.0), (30.0, 0.0), "nearest"),
    "zoom_same": affine("random_zoom", (0.6, 0.6), (1.5, 1.5), same_zoom=True),
    "zoom_hw_constant": affine("random_zoom", (0.7, 0.5), (1.3, 1.9), "constant", seed=3),
    "zoom_nearest_wrap": affine("random_zoom", (0.5, 0.5), (1.5, 1.5), "wrap", "nearest"),
    "translation_reflect": affine("random_translation", (-0.5, -0.3), (0.5, 0.3)),
    "translation_constant": affine("random_translation", (-1.0, -1.0), (1.0, 1.0), "constant",
                                   fill_value=-2.0),
    "translation_nearest": affine("random_translation", (-0.4, 0.1), (0.2, 0.6), "nearest",
                                  "nearest"),
    "contrast": dict(kind="random_contrast", low=(0.2, 0.0), high=(1.8, 0.0),
                     value_range=(-1.5, 1.5)),
    "contrast_wide": dict(kind="random_contrast", low=(1.0, 0.0), high=(1.5, 0.0)),
    "crop": dict(kind="random_crop", size=(4, 5)),
    "crop_full_height": dict(kind="random_crop", size=(7, 3), seed=2),
}
SHAPES = [(7, 9, 3), (8, 8, 1), (5, 11, 2)]


def _pair(engine, layers, shape, n, seed=4):
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    ref = make_net("numpy", layers, shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    return net, ref


def _tolerance(engine, spec):
    # the GPU's double cos/sin and contrast's double sums: last bits
    return 0.0 if engine in ("cpu", "omp") else 1e-5


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_augment_against_reference(engine, name, shape):
    spec = LAYERS[name]
    if spec["kind"] == "random_crop" and (spec["size"][0] > shape[0] or spec["size"][1] > shape[1]):
        pytest.skip("the crop does not fit this shape")
    n = 5
    net, ref = _pair(engine, [spec], shape, n)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (n,) + shape).astype(np.float32)
    tol = _tolerance(engine, spec)
    outs = []
    for step in range(3):  # each training forward draws anew, the same on both
        y = net.forward(x, training=True)
        assert_close(y, ref.forward(x, training=True), tol, tol, "training forward %d" % step)
        outs.append(y)
    if spec["kind"] != "random_crop" or spec["size"][:2] != shape[:2]:
        assert any(not np.array_equal(outs[0], o) for o in outs[1:]), "no new draw"
    # inference: the input (the centre window for a crop), on both
    y = net.forward(x, training=False)
    assert_close(y, ref.forward(x, training=False), 0, 0, "inference")
    if spec["kind"] == "random_crop":
        oh, ow = spec["size"]
        top, left = (shape[0] - oh) // 2, (shape[1] - ow) // 2
        assert np.array_equal(y, x[:, top:top + oh, left:left + ow])
    else:
        assert np.array_equal(y, x)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("name", ["rotation_reflect", "contrast", "zoom_hw_constant", "crop"])
def test_augment_float64_reference(engine, name):
    """The float64 reference computes the same transform (draws and
    geometry in float32, the pixels' sums in float64)."""
    spec, shape, n = LAYERS[name], (9, 7, 2), 3
    net = make_net(engine, [spec], shape, n, SPARSE_LOGITS, ADAM, seed=8)
    from cnncuda.reference import NumpyNet
    ref = NumpyNet([spec], shape, n, SPARSE_LOGITS, ADAM, seed=8, dtype=np.float64)
    x = np.random.default_rng(1).uniform(0, 1, (n,) + shape).astype(np.float32)
    assert_close(net.forward(x, training=True), ref.forward(x.astype(np.float64), True),
                 1e-5, 1e-5, "forward")


@pytest.mark.parametrize("engine", C_ENGINES)
def test_same_seed_same_batches(engine):
    """A layer's own seed fixes its draws whatever the model's seed; without
    one, the model's seed does; both are the reference's."""
    shape, n = (6, 7, 3), 4
    x = np.random.default_rng(2).uniform(0, 1, (n,) + shape).astype(np.float32)
    spec = affine("random_rotation", (-45.0, 0.0), (45.0, 0.0), seed=21)
    a = make_net(engine, [spec], shape, n, SPARSE_LOGITS, ADAM, seed=1)
    b = make_net(engine, [spec], shape, n, SPARSE_LOGITS, ADAM, seed=2)
    ya = [a.forward(x, training=True) for _ in range(2)]
    yb = [b.forward(x, training=True) for _ in range(2)]
    assert all(np.array_equal(p, q) for p, q in zip(ya, yb))
    unseeded = dict(spec, seed=None)
    c = make_net(engine, [unseeded], shape, n, SPARSE_LOGITS, ADAM, seed=1)
    d = make_net(engine, [unseeded], shape, n, SPARSE_LOGITS, ADAM, seed=2)
    yc, yd = c.forward(x, training=True), d.forward(x, training=True)
    assert not np.array_equal(yc, yd), "the model's seed must change an unseeded layer's draws"
    assert not np.array_equal(yc, ya[0])


def test_omp_equals_cpu_bits():
    import cnncuda
    if "omp" not in cnncuda.build_info()["engines"]:
        pytest.skip("omp is not in this build")
    shape, n = (13, 11, 3), 9
    x = np.random.default_rng(5).uniform(0, 255, (n,) + shape).astype(np.float32)
    for name in ("rotation_reflect", "zoom_same", "contrast_wide", "flip_both", "crop"):
        cpu = make_net("cpu", [LAYERS[name]], shape, n, SPARSE_LOGITS, ADAM, seed=3)
        omp = make_net("omp:3", [LAYERS[name]], shape, n, SPARSE_LOGITS, ADAM, seed=3)
        for _ in range(2):
            assert np.array_equal(cpu.forward(x, training=True), omp.forward(x, training=True)), name


def test_flip_draws_and_geometry():
    """RandomFlip by hand: sample i flips where uniform(key_t, 2 i) <= 0.5."""
    from cnncuda.reference import rng_key, uniform
    shape, n, seed = (3, 4, 2), 64, 9
    x = np.random.default_rng(0).standard_normal((n,) + shape).astype(np.float32)
    net = make_net("cpu", [flip()], shape, n, SPARSE_LOGITS, ADAM, seed=seed)
    y = net.forward(x, training=True)
    key_t = rng_key(rng_key(seed, 1), 0)   # layer 0, the first training forward
    flips = np.array([uniform(key_t, 2 * i) <= np.float32(0.5) for i in range(n)])
    assert 10 < flips.sum() < 54
    expect = np.where(flips[:, None, None, None], x[:, ::-1, ::-1], x)
    assert np.array_equal(y, expect)


def test_crop_offsets_cover_the_image():
    """RandomCrop's offsets take every value in [0, h - oh] (uniform draws)."""
    from cnncuda.reference import rng_key
    from cnncuda.reference_augment import crop_offsets
    off = crop_offsets(rng_key(3, 5), 2000, 9, 8, 4, 8)
    assert set(off[:, 0]) == set(range(6)) and set(off[:, 1]) == {0}


@pytest.mark.parametrize("engine", ["numpy"] + C_ENGINES)
def test_backward_with_augmentation(engine):
    """A model's gradients stop at the augmentation layers (no input
    gradient is asked for); backward asking for the input's is refused."""
    layers = [flip(), affine("random_translation", (-0.2, -0.2), (0.2, 0.2)),
              {"kind": "conv2d", "units": 3, "kernel": 3}, {"kind": "flatten"},
              {"kind": "dense", "units": 4}]
    shape, n = (6, 6, 2), 3
    net = make_net(engine, layers, shape, n, SPARSE_LOGITS, ADAM, seed=0)
    x = np.random.default_rng(0).standard_normal((n,) + shape).astype(np.float32)
    loss, _ = net.compute_gradients(x, np.array([0, 1, 3]))
    assert np.isfinite(loss)
    y = net.forward(x, training=True)
    with pytest.raises(ValueError, match="augmentation layer"):
        net.backward(np.ones_like(y))


@pytest.mark.parametrize("engine", ["numpy", "cpu"])
def test_augmentation_after_weights_refused(engine):
    layers = [{"kind": "conv2d", "units": 2, "kernel": 3}, flip(), {"kind": "flatten"},
              {"kind": "dense", "units": 2}]
    with pytest.raises(ValueError, match="follows a layer with weights"):
        make_net(engine, layers, (6, 6, 1), 2, SPARSE_LOGITS, ADAM)
    # before them, a layer without weights is fine
    ok = [{"kind": "dropout", "rate": 0.5}, flip(), {"kind": "flatten"},
          {"kind": "dense", "units": 2}]
    make_net(engine, ok, (6, 6, 1), 2, SPARSE_LOGITS, ADAM)


@pytest.mark.parametrize("engine", ["numpy", "cpu"])
@pytest.mark.parametrize("spec,match", [
    (dict(kind="random_flip", mode="diagonal"), "mode"),
    (affine("random_rotation", (0.0, 0.0), (1.0, 0.0), fill="mirror"), "fill_mode"),
    (affine("random_zoom", (1.0, 1.0), (1.1, 1.1), interp="bicubic"), "interpolation"),
    (affine("random_zoom", (1.2, 1.0), (1.1, 1.1)), "ordered"),
    (dict(kind="random_crop", size=(9, 2)), "must fit"),
    (dict(kind="random_contrast", low=(0.5, 0), high=(1.5, 0), value_range=(1, 1)),
     "value_range"),
])
def test_bad_specs(engine, spec, match):
    with pytest.raises(ValueError, match=match):
        make_net(engine, [spec], (6, 6, 1), 2, SPARSE_LOGITS, ADAM)


def test_needs_images():
    with pytest.raises(ValueError, match="image input"):
        make_net("cpu", [flip()], (6,), 2, SPARSE_LOGITS, ADAM)
