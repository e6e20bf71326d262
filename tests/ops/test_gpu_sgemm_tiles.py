"""The small-product tiles of the cuda engine's SGEMM (cuda/gemm_kernels.cuh
sgemm_tile, chosen by CNNCUDA_SGEMM_TILE): "shaped" (the default: 16, 32 or
64 rows by 32 or 64 columns fitted to the product, 16-byte shared loads and
stores), "square" (the same kernel at 64x64 only) and "scalar" (64x64 with
scalar shared loads and stores: the engine's tile before the shaped ones).

Every output is the same chain of fmaf over k in order in all three, so
square and scalar (the same tiles, hence the same split-K plan) must give
the same bits; shaped changes the tiles and so the slices of K, and is
checked against the float64 reference on odd shapes, for determinism, and
against square within float rounding on the seed networks.
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from conftest import ADAM, SPARSE_LOGITS, engine_params, run_both, train_seed_epochs
from test_gpu_sgemm import CONV_CASES

CUDA = engine_params(("cuda",))
TILES = ["shaped", "square", "scalar"]
SEEDS = [("cifar10_cnn", 32, 96), ("lenet5", 7, 35), ("tiny_mnist", 33, 99), ("cifar10_cnn", 5, 20)]
# shapes that take every shaped tile: 16-row (8 filters), 32-row (24 filters),
# 64-row; 32-column (a 24 x 28 filter gradient, a 20-unit dense layer)
TILE_CONV_CASES = CONV_CASES + [((10, 7, 3), 24, (3, 3), (1, 1), "valid", 9),
                                ((9, 8, 5), 17, (2, 3), (1, 2), "same", 13)]


def seed_run(monkeypatch, engine, name, batch, images, tile):
    monkeypatch.setenv("CNNCUDA_SGEMM_TILE", tile)
    return train_seed_epochs(engine, name, batch, images, 3, 4)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", TILE_CONV_CASES)
def test_conv2d_on_every_tile(monkeypatch, engine, tile, shape, filters, size, strides, padding, n):
    monkeypatch.setenv("CNNCUDA_SGEMM_TILE", tile)
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding}]
    run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("fan_in,units,n", [(50, 20, 19), (300, 130, 70), (1024, 64, 32),
                                            (129, 7, 13)])
def test_dense_on_every_tile(monkeypatch, engine, tile, fan_in, units, n):
    monkeypatch.setenv("CNNCUDA_SGEMM_TILE", tile)
    run_both(engine, [{"kind": "dense", "units": units}], (fan_in,), n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name,batch,images", SEEDS)
def test_vector_loads_give_the_scalar_tiles_bits(monkeypatch, engine, name, batch, images):
    (s0, w0) = seed_run(monkeypatch, engine, name, batch, images, "scalar")
    (s1, w1) = seed_run(monkeypatch, engine, name, batch, images, "square")
    assert s0 == s1
    for a, b in zip(w0, w1):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name,batch,images", SEEDS)
def test_shaped_tiles_are_deterministic_and_agree(monkeypatch, engine, name, batch, images):
    _, square = seed_run(monkeypatch, engine, name, batch, images, "square")
    sums, shaped = seed_run(monkeypatch, engine, name, batch, images, "shaped")
    sums2, again = seed_run(monkeypatch, engine, name, batch, images, "shaped")
    assert sums == sums2
    for a, b, c in zip(square, shaped, again):
        assert np.array_equal(b, c)
        np.testing.assert_allclose(b, a, rtol=2e-3, atol=2e-5)


@pytest.mark.parametrize("engine", CUDA)
def test_unknown_tile_is_a_clear_error(monkeypatch, engine):
    monkeypatch.setenv("CNNCUDA_SGEMM_TILE", "round")
    with pytest.raises(ValueError, match="CNNCUDA_SGEMM_TILE: expected 'shaped', 'square' or "
                                         "'scalar', got 'round'"):
        make_net(engine, [{"kind": "dense", "units": 3}], (4,), 2, SPARSE_LOGITS, ADAM)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name,batch,images", SEEDS)
def test_the_bound_transposed_tile_gives_the_same_bits(monkeypatch, engine, name, batch, images):
    """CNNCUDA_TILE_TN=4 (the default: the 64x64 tile with A transposed, a
    convolution's data gradient, bound to four blocks an SM, so 64
    registers) and 3 (unbound): the same code of fmaf, the same bits."""
    monkeypatch.setenv("CNNCUDA_TILE_TN", "3")
    (s0, w0) = train_seed_epochs(engine, name, batch, images, 3, 4)
    monkeypatch.setenv("CNNCUDA_TILE_TN", "4")
    (s1, w1) = train_seed_epochs(engine, name, batch, images, 3, 4)
    assert s0 == s1
    for a, b in zip(w0, w1):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("engine", CUDA)
def test_a_bad_tile_tn_setting_is_refused(monkeypatch, engine):
    monkeypatch.setenv("CNNCUDA_TILE_TN", "5")
    s = {"kind": "dense", "units": 3}
    with pytest.raises(ValueError, match="CNNCUDA_TILE_TN: expected '4' or '3', got '5'"):
        make_net(engine, [s], (4,), 2, SPARSE_LOGITS, ADAM)
