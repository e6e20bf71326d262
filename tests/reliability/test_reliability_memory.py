"""Out of memory on the host engines: a network whose buffers add up to more
than the machine's memory raises MemoryError naming the bytes, before
anything is allocated (Linux would hand the memory out and kill the process
when the buffers are zeroed); sizes past what the kernels' int arithmetic
holds raise ValueError. The process goes on. (The GPU's out-of-memory test
is tests/net/test_gpu_training.py, run on a GPU machine.)"""
import os
import re

import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.keras import layers, models
from conftest import engine_params

ENGINES = engine_params(("cpu", "omp"))
RAM = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
LOSS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
WIDE = 46340                        # WIDE**2 weights: just below 2**31


def too_big_layers():
    """Dense layers of WIDE**2 weights each (8.6 GB of parameters, 34 GB with
    gradients and Adam's moments), as many as it takes to pass RAM."""
    return [{"kind": "dense", "units": WIDE}] * int(2 + RAM // (16 * WIDE**2))


@pytest.mark.parametrize("device", ENGINES)
def test_a_network_larger_than_memory_raises_memory_error(device):
    with pytest.raises(MemoryError) as info:
        make_net(device, too_big_layers(), (1,), 4, LOSS, {"kind": "adam"})
    message = str(info.value)
    needed = int(re.search(r"needs (\d+) bytes", message).group(1))
    assert needed > RAM and ("machine's %d bytes" % RAM) in message, message
    # and the process goes on
    net = make_net(device, [{"kind": "dense", "units": 3}], (4,), 8, LOSS, {"kind": "adam"})
    net.train_batch(np.ones((8, 4), np.float32), np.arange(8) % 3)


@pytest.mark.parametrize("layer,shape,message", [
    ({"kind": "dense", "units": 2**31 - 1}, (2,), r"layer 0 \(dense\): 2 inputs times 2147483647"),
    ({"kind": "conv2d", "units": 2, "kernel": (2**31 - 1, 1), "padding": "same"}, (5, 5, 1),
     r"layer 0 \(conv2d\): a 2147483647x1 kernel over 1 channels with 2 filters"),
    ({"kind": "flatten"}, (65536, 65536, 1), r"input: max_batch 4 times 4294967296 values"),
])
def test_sizes_past_int_arithmetic_raise_value_error(layer, shape, message):
    with pytest.raises(ValueError, match=message):
        make_net("cpu", [layer], shape, 4, LOSS, {"kind": "adam"})


def test_keras_model_too_big_for_memory():
    model = models.Sequential([layers.Dense(WIDE, input_shape=(1,))]
                              + [layers.Dense(WIDE) for _ in too_big_layers()[1:]])
    model.compile(loss="sparse_categorical_crossentropy", device="cpu")
    with pytest.raises(MemoryError, match=r"needs \d+ bytes of buffers"):
        model.fit(np.zeros((4, 1)), np.zeros(4), verbose=0)
    small = models.Sequential([layers.Dense(3, input_shape=(1,))])
    small.compile(loss="sparse_categorical_crossentropy", device="cpu")
    small.fit(np.zeros((4, 1)), np.zeros(4), verbose=0)
