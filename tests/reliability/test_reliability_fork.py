"""fork after the omp engine has run: libgomp's thread pool does not survive
it, and a child that trained a new omp model hung in its first parallel
region. Now such a child runs the omp kernels' parts one after another on
its own thread -- the same bits as the parent's threads give -- and cpu
models train there as before. Each case runs in a subprocess with a
timeout (a hang fails the test instead of the run)."""
import os
import signal
import subprocess
import sys

import pytest

from conftest import engine_params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import os, sys
import numpy as np
from cnncuda.keras import layers, models

def train(device):
    rng = np.random.default_rng(0)
    x, y = rng.random((256, 12, 12, 3)).astype(np.float32), rng.integers(0, 5, 256)
    model = models.Sequential([layers.Conv2D(8, 3, activation="relu", input_shape=(12, 12, 3)),
                               layers.MaxPooling2D(), layers.Flatten(), layers.Dense(5)], seed=1)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device=device)
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    return b"".join(w.tobytes() for w in model.get_weights())

device = sys.argv[1]
train(device)                    # the parent's pool of threads is up
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    try:
        os.write(write, train(device))
        os._exit(0)
    except BaseException as err:
        os.write(2, repr(err).encode())
        os._exit(3)
os.close(write)
got = b""
while True:
    part = os.read(read, 1 << 20)
    if not part:
        break
    got += part
_, status = os.waitpid(pid, 0)
print("child exit:", os.waitstatus_to_exitcode(status))
print("child trained as the parent:", got == train(device))
"""


@pytest.mark.parametrize("device", engine_params(("omp", "cpu")))
def test_a_forked_child_trains_a_new_model(device, tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(SCRIPT)
    engine = "omp:2" if device == "omp" else device
    child = subprocess.Popen([sys.executable, str(script), engine], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True,
                             env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        out, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)          # the hung grandchild too
        child.communicate()
        pytest.fail("the forked child hung (no answer in 120 s)")
    assert child.returncode == 0, err[-3000:]
    assert "child exit: 0" in out, (out, err[-3000:])
    assert "child trained as the parent: True" in out, out
