"""The small-product tiles of the cuda engine's SGEMM (cuda/gemm_kernels.cuh
sgemm_tile): 16, 32 or 64 rows by 32 or 64 columns fitted to the product,
16-byte shared loads and stores; the 64x64 tile with A transposed bound to
four blocks an SM. Checked against the float64 reference on odd shapes
that take every tile, and for determinism on the seed networks. (The 64x64
tiles the engine had before, with float4 or scalar shared loads, are
dev/cuda's sgemm stages 5 and 7 now.)
"""
import numpy as np
import pytest

from conftest import engine_params, run_both, train_seed_epochs
from test_gpu_sgemm import CONV_CASES

CUDA = engine_params(("cuda",))
SEEDS = [("cifar10_cnn", 32, 96), ("lenet5", 7, 35), ("tiny_mnist", 33, 99), ("cifar10_cnn", 5, 20)]
# shapes that take every shaped tile: 16-row (8 filters), 32-row (24 filters),
# 64-row; 32-column (a 24 x 28 filter gradient, a 20-unit dense layer)
TILE_CONV_CASES = CONV_CASES + [((10, 7, 3), 24, (3, 3), (1, 1), "valid", 9),
                                ((9, 8, 5), 17, (2, 3), (1, 2), "same", 13)]


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("shape,filters,size,strides,padding,n", TILE_CONV_CASES)
def test_conv2d_on_every_tile(engine, shape, filters, size, strides, padding, n):
    layers = [{"kind": "conv2d", "units": filters, "kernel": size, "strides": strides,
               "padding": padding}]
    run_both(engine, layers, shape, n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("fan_in,units,n", [(50, 20, 19), (300, 130, 70), (1024, 64, 32),
                                            (129, 7, 13)])
def test_dense_on_every_tile(engine, fan_in, units, n):
    run_both(engine, [{"kind": "dense", "units": units}], (fan_in,), n=n, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("name,batch,images", SEEDS)
def test_shaped_tiles_are_deterministic(engine, name, batch, images):
    sums, shaped = train_seed_epochs(engine, name, batch, images, 3, 4)
    sums2, again = train_seed_epochs(engine, name, batch, images, 3, 4)
    assert sums == sums2
    for b, c in zip(shaped, again):
        assert np.array_equal(b, c)
