"""A model saved from an exit handler registered before ``import cnncuda``
(so that it runs after cnncuda's own release of the engines' memory): the
save works and writes the model as it was. Before, it raised "this Net's
engine memory was released" and wrote nothing -- the model was lost at
exit, even on the CPU. The cuda and cudnn cases run with pytest -m gpu."""
import os
import subprocess
import sys

import numpy as np
import pytest

from cnncuda.keras import models
from conftest import engine_params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import atexit, sys
def late():                  # registered before cnncuda: runs after its release
    MODEL.save(sys.argv[2])
    print("predict after release:", float(abs(MODEL.predict(X, verbose=0)).sum()))
    MODEL.fit(X, Y, epochs=1, verbose=0)
    print("trained after release:", MODEL.optimizer.iterations)
atexit.register(late)
import numpy as np
from cnncuda.keras import layers, models
rng = np.random.default_rng(0)
X, Y = rng.random((64, 6, 6, 2)).astype(np.float32), rng.integers(0, 3, 64)
MODEL = models.Sequential([layers.Conv2D(3, 3, input_shape=(6, 6, 2)), layers.Flatten(),
                           layers.Dense(3)], seed=1)
MODEL.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device=sys.argv[1])
MODEL.fit(X, Y, epochs=2, verbose=0)
MODEL.save(sys.argv[2] + ".before")
print("predict before:", float(abs(MODEL.predict(X, verbose=0)).sum()))
"""


@pytest.mark.parametrize("device", engine_params())
def test_a_save_from_a_late_exit_handler_writes_the_model(device, tmp_path):
    script = tmp_path / "late.py"
    script.write_text(SCRIPT)
    path = tmp_path / "at-exit.cnn"
    done = subprocess.run([sys.executable, str(script), device, str(path)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr[-3000:]
    lines = dict(line.split(": ") for line in done.stdout.splitlines())
    assert lines["predict after release"] == lines["predict before"]
    assert lines["trained after release"] == "6"
    saved, before = models.load_model(path), models.load_model(str(path) + ".before")
    for a, b in zip(saved.get_weights(), before.get_weights(), strict=True):
        assert np.array_equal(a, b)
    assert saved.optimizer.iterations == before.optimizer.iterations == 4
    assert saved._optimizer_state()["steps"] == 4
