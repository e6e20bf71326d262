"""Shared test helpers: the C engines to run every op on.

GPU engines carry the ``gpu`` marker and are skipped, with the reason, where
they are not built or no GPU is visible; run them with ``pytest -m gpu``.
"""
import numpy as np
import pytest

import cnncuda

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

SPARSE_LOGITS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
ADAM = {"kind": "adam"}


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
