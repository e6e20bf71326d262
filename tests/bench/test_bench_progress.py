"""The bench's progress bar, redrawn during an epoch in a terminal or Jupyter
(the epoch in calls of about the bar's interval, the engine's sums read only
when the bar is due), and its timing: one engine call per epoch elsewhere,
the engine's own time summed over the calls where it has a clock."""
import math
import re
import sys
import time
import types

import pytest

from cnncuda.bench.cnncuda import EngineRunner
from cnncuda.bench.data import bench_data
from cnncuda.bench.timing import keras_epoch_line, time_row

BATCH = 8
STEPS = 240


class SlowNet:
    """An engine network whose steps each take `delay` seconds longer,
    counting its train_range calls and its read_sums (each one a device
    synchronisation on a GPU engine)."""

    def __init__(self, net, delay):
        self.net, self.delay, self.calls, self.reads, self.last_steps = net, delay, 0, 0, 0

    def __getattr__(self, name):
        return getattr(self.net, name)

    def train_range(self, start, count, batch):
        self.calls += 1
        self.last_steps = math.ceil(count / batch)
        time.sleep(self.delay * self.last_steps)
        return self.net.train_range(start, count, batch)

    def read_sums(self, reset=True):
        self.reads += 1
        return self.net.read_sums(reset)


class ClockedNet(SlowNet):
    """A SlowNet with a clock of its own, as the GPU engines' CUDA events:
    `per_step` seconds a step of the last train_range call."""

    per_step = 0.003

    @property
    def last_range_seconds(self):
        return self.per_step * self.last_steps


@pytest.fixture(scope="module")
def data():
    return bench_data("tiny_mnist", images=STEPS * BATCH, val_images=0, data="synthetic")


def timed(data, net_class=SlowNet, delay=0.005, **kwargs):
    """(row, net): one epoch of STEPS steps of at least `delay` seconds each."""
    nets = []

    def make():
        runner = EngineRunner("tiny_mnist", "cpu", data, BATCH)
        runner.net = net_class(runner.net, delay)
        nets.append(runner.net)
        return runner

    row = time_row(make, "tiny_mnist", BATCH, data, 1, **kwargs)
    return row, nets[0]


def in_jupyter(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))


def final_line(row):
    return keras_epoch_line(STEPS, row["seconds_per_epoch"],
                            {"loss": row["final_loss"], "accuracy": row["final_accuracy"]})


def test_an_epoch_of_seconds_redraws_in_place_in_jupyter(data, capsys, monkeypatch):
    in_jupyter(monkeypatch)
    start = time.perf_counter()
    row, net = timed(data)
    seconds = time.perf_counter() - start
    out = capsys.readouterr().out
    assert out.startswith("Epoch 1/1\n")
    frames = out[len("Epoch 1/1\n"):].split("\r")
    assert frames[0] == ""
    drawn, last = frames[1:-1], frames[-1]
    assert len(drawn) >= 10, out                       # 1.2 s of steps, redrawn every 0.05 s
    done = [int(re.match(r" *(\d+)/%d \[" % STEPS, f).group(1)) for f in drawn]
    assert done == sorted(set(done)) and done[-1] < STEPS
    for frame in drawn:
        assert re.fullmatch(r" *\d+/240 \[[=>.]{30}\] - ETA: \d+s - loss: \d\.\d{4} - "
                            r"accuracy: \d\.\d{4}(e[+-]\d\d)? *", frame), frame
    assert last.rstrip(" \n") == final_line(row) and last.endswith("\n")
    assert net.calls > 10                              # warm-up, then the epoch in calls
    assert net.reads <= 3 + len(drawn)                 # as above, and one per redraw at most
    assert net.reads <= seconds / 0.05 + 4
    assert row["timer"] == "wall" and row["steps"] == STEPS


def test_without_a_bar_in_place_the_epoch_is_one_engine_call(data, capsys, monkeypatch):
    row, net = timed(data, delay=0.0005)               # a file or a pipe: no redraws
    assert net.calls == 2 and net.reads == 3           # warm-up; the epoch: before, after
    assert capsys.readouterr().out == "Epoch 1/1\n%s\n" % final_line(row)
    in_jupyter(monkeypatch)
    lines = []
    row, net = timed(data, delay=0.0005, log=lines.append)   # another log: no bar in place
    assert net.calls == 2 and lines == ["Epoch 1/1", final_line(row)]
    row, net = timed(data, delay=0.0005, verbose=2)    # Keras's verbose=2: one line per epoch
    assert net.calls == 2 and capsys.readouterr().out.startswith("Epoch 1/1\n240/240 - ")


@pytest.mark.parametrize("jupyter", [False, True], ids=["one call", "in calls"])
def test_an_engine_clock_times_the_steps_alone(data, capsys, monkeypatch, jupyter):
    if jupyter:
        in_jupyter(monkeypatch)
    row, net = timed(data, ClockedNet, delay=0.001)
    assert (net.calls > 2) == jupyter
    assert row["timer"] == "cuda-events"
    assert row["seconds_per_epoch"] == pytest.approx(STEPS * ClockedNet.per_step)
    assert row["wall_seconds_per_epoch"] >= STEPS * 0.001
