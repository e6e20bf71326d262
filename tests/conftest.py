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
