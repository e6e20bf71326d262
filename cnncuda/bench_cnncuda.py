"""A bench row's work on one of cnncuda's engines, the way fit trains.

The training set goes to the engine once (``set_data``); each epoch's
shuffled order is given to it (``set_order``), the whole epoch runs as one
``train_range`` call -- batches gathered on the engine, loss and accuracy
summed there -- and the sums are read back at the end (``read_sums``, the
only synchronisation). The timer starts after a synchronisation and stops
after the read. On the GPU engines the epoch's time is the GPU time between
CUDA events recorded on the engine's stream (``net.last_range_seconds``)
where the binding reports it, else the wall clock, and the row says which.
"""
import time

import numpy as np

from .engine import make_net, parse_device
from .seeds import parameter_count, seed_network

__all__ = ["EngineRunner", "GPU_ENGINES"]

GPU_ENGINES = ("cuda", "cudnn")


class EngineRunner:
    """One engine network of seed `model` training on `data` (a BenchData)
    at batch size `batch`."""

    framework = "cnncuda"

    def __init__(self, model, device, data, batch, seed=0):
        spec = seed_network(model)
        self.name = device
        self.gpu = parse_device(device)[0] in GPU_ENGINES
        self.batch = batch
        self.images = len(data.x)
        self.version = None
        self._data = data
        self._rng = np.random.default_rng(seed)
        self._sums = (0.0, 0.0)
        self.net = make_net(device, spec["layers"], spec["input_shape"], batch, spec["loss"],
                            spec["optimizer"], seed=seed)

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

    def epoch(self, order=None, meter=None):
        """Trains one epoch over `order` (default: a new shuffled order);
        returns (seconds, timer, wall_seconds). `meter` (start() and stop())
        brackets the timed part."""
        net = self.net
        net.set_order(self._rng.permutation(self.images) if order is None else order)
        net.read_sums(reset=True)  # waits for the engine
        if meter:
            meter.start()
        start = time.perf_counter()
        net.train_range(0, self.images, self.batch)
        self._sums = net.read_sums()  # waits for the engine
        wall = time.perf_counter() - start
        if meter:
            meter.stop()
        gpu = getattr(net, "last_range_seconds", None)
        if gpu is not None:
            return float(gpu), "cuda-events", wall
        return wall, "wall", wall

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
