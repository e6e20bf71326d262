"""A bench row's work on one of cnncuda's engines, the way fit trains.

The training set goes to the engine once (``set_data``); each epoch's
shuffled order is given to it (``set_order``), the whole epoch runs as one
``train_range`` call -- batches gathered on the engine, loss and accuracy
summed there -- and the sums are read back at the end (``read_sums``, the
only synchronisation). The timer starts after a synchronisation and stops
after the read. On the GPU engines the epoch's time is the GPU time between
CUDA events recorded on the engine's stream (``net.last_range_seconds``)
where the binding reports it, else the wall clock, and the row says which.

With a progress bar redrawn in place (``epoch(progress=...)``: a terminal or
Jupyter), the epoch runs as consecutive ``train_range`` calls of about the
bar's interval (0.05 s) each, sized by the engine's own time for the call
(the wall clock on the CPU engines); the sums are read only when the bar is
due to redraw. On a GPU engine the epoch's time is then the sum of the
calls' CUDA-event times: each call's events bracket its steps alone, so the
waits between calls (reading a call's time, the bar's reads and redraws)
are not counted, and no wait falls inside a timed span. On the CPU engines
the calls run synchronously and the wall clock times the whole epoch,
redraws included (about 0.1 ms each, 20 a second at most).

Precision: strict float32 by default; ``precision='tf32'``, ``'bf16'`` or
``'fp16'`` builds the GPU engines' networks in that precision (make_net's:
TF32, bfloat16 or float16 operands on tensor cores, float32 sums and
storage) and labels their rows ``cuda-tf32``, ``cudnn-bf16``, ...; CPU
engines compute in float32, so their rows stay float32 and keep their
labels. (The bench's networks have no loss scaling: a row times the
products' precision alone.)
"""
import math
import time

import numpy as np

from ..chunks import StepChunker
from ..engine import PRECISIONS, make_net, parse_device
from ..seeds import parameter_count, seed_network

__all__ = ["EngineRunner", "GPU_ENGINES", "row_precision", "row_label"]

GPU_ENGINES = ("cuda", "cudnn")


def row_precision(gpu, precision):
    """The precision a row runs at: `precision` on the GPU, 'float32' on the
    CPU (where no engine here has TF32 or 16-bit products)."""
    if precision not in PRECISIONS:
        raise ValueError("precision: expected one of %s, got %r"
                         % (", ".join(map(repr, PRECISIONS)), precision))
    return precision if gpu else "float32"


def row_label(name, precision):
    """A row's label: `name`, with '-tf32', '-bf16' or '-fp16' added for a
    row in that precision."""
    return name if precision == "float32" else name + "-" + precision


class EngineRunner:
    """One engine network of seed `model` training on `data` (a BenchData)
    at batch size `batch`."""

    framework = "cnncuda"
    draws_progress = True   # epoch() takes a progress bar to redraw during the epoch

    def __init__(self, model, device, data, batch, seed=0, precision="float32"):
        spec = seed_network(model)
        self.gpu = parse_device(device)[0] in GPU_ENGINES
        self.precision = row_precision(self.gpu, precision)
        self.name = row_label(device, self.precision)
        self.batch = batch
        self.images = len(data.x)
        self.version = None
        self._data = data
        self._rng = np.random.default_rng(seed)
        self._sums = (0.0, 0.0)
        self.net = make_net(device, spec["layers"], spec["input_shape"], batch, spec["loss"],
                            spec["optimizer"], seed=seed, precision=self.precision)

    def warm_up(self):
        """Uploads the data and runs one full batch and, where the epoch ends
        with a smaller one, one of that size (first touch of every buffer,
        algorithm choices per shape); then waits for the engine."""
        n, batch = self.images, self.batch
        self.net.set_data(self._data.x, self._data.y)
        self.net.set_order(np.arange(n))
        self.net.train_range(0, min(batch, n), batch)
        if n > batch and n % batch:
            self.net.train_range(0, n % batch, batch)
        self.net.read_sums(reset=True)

    def epoch(self, order=None, meter=None, progress=None):
        """Trains one epoch over `order` (default: a new shuffled order);
        returns (seconds, timer, wall_seconds). `meter` (start() and stop())
        brackets the timed part. `progress` (a progbar.Progbar redrawn in
        place): the epoch runs in calls of about its interval, and the bar is
        updated whenever it is due (see the module docstring)."""
        net = self.net
        net.set_order(self._rng.permutation(self.images) if order is None else order)
        net.read_sums(reset=True)  # waits for the engine
        if meter:
            meter.start()
        start = time.perf_counter()
        if progress is None:
            net.train_range(0, self.images, self.batch)
            self._sums = net.read_sums()  # waits for the engine
        else:
            engine_seconds = self._chunked_epoch(progress)
        wall = time.perf_counter() - start
        if meter:
            meter.stop()
        if progress is None:
            engine_seconds = getattr(net, "last_range_seconds", None)
        if engine_seconds is not None:
            return float(engine_seconds), "cuda-events", wall
        return wall, "wall", wall

    def _chunked_epoch(self, progress):
        """The epoch in train_range calls of about progress.interval each,
        the bar updated when due; returns the engine's time summed over the
        calls, or None where the engine has no clock of its own."""
        net, n, batch = self.net, self.images, self.batch
        steps = math.ceil(n / batch)
        chunker = StepChunker(progress.interval, steps)
        loss_sum = correct = 0.0
        engine_seconds, done = 0.0, 0
        while done < steps:
            count = chunker.next(done)
            began = time.perf_counter()
            net.train_range(done * batch, min(count * batch, n - done * batch), batch)
            timed = getattr(net, "last_range_seconds", None)  # waits for the call (GPU)
            chunker.took(time.perf_counter() - began if timed is None else timed, count)
            engine_seconds = None if timed is None or engine_seconds is None \
                else engine_seconds + timed
            done += count
            if done < steps and progress.due():
                part_loss, part_correct = net.read_sums()
                loss_sum += part_loss
                correct += part_correct
                seen = done * batch
                progress.update(done, {"loss": loss_sum / seen, "accuracy": correct / seen})
        part_loss, part_correct = net.read_sums()  # waits for the engine
        self._sums = (loss_sum + part_loss, correct + part_correct)
        return engine_seconds

    def sums(self):
        """(loss_sum, correct) of the last epoch."""
        return self._sums

    def evaluate(self, x, y):
        """(loss_sum, correct) over (x, y) in inference mode."""
        return self.net.evaluate(x, y)

    def parameters(self):
        return parameter_count(self.net)

    def device_memory(self):
        """(bytes, kind) of device memory for the GPU engines, else None."""
        allocated = self.engine_memory()
        return (allocated, "device (engine)") if self.gpu and allocated is not None else None

    def engine_memory(self):
        """Bytes the engine allocated for this network (``net.memory_bytes``),
        or None where the binding does not say."""
        value = getattr(self.net, "memory_bytes", None)
        return int(value) if value is not None else None

    def notes(self):
        if self.gpu and getattr(self.net, "last_range_seconds", None) is None:
            return ["GPU row timed by the wall clock: this build reports no CUDA-event time"]
        return []

    def close(self):
        self.net = None
