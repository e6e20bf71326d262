"""A data-parallel group of engine networks that fit drives like one network.

Each replica is a ``_C.Net`` on its own device (a GPU, or a CPU engine),
joined to the group by a ``_C.Comm``: the replicas of this process are driven
at once, one Python thread each (every core call releases the GIL), and the
group's other processes drive theirs the same way. Every replica gets the
same calls with the same whole-batch arguments; the core gives each its share
of every batch and sums the gradients over the group (csrc/comm.h).

A failure on one replica aborts every communicator of this process, which
the group's other ranks hear of, so every rank raises instead of waiting;
the exception raised here is the first one, the cause.
"""
import os
import threading
import time

import numpy as np

from .. import _C

__all__ = ["ReplicaGroup", "connect_local", "nccl_defaults", "run_all", "GroupFailedError"]


class GroupFailedError(RuntimeError):
    """A data-parallel group that failed earlier is used again."""


def run_all(pool, calls):
    """Runs calls[i]() at once (one thread each); returns their results, or
    raises the earliest exception after every call has returned."""
    if len(calls) == 1:
        return [calls[0]()]
    failures = []
    lock = threading.Lock()

    def guarded(i, call):
        try:
            return call()
        except BaseException as exc:  # recorded and raised below
            with lock:
                failures.append((time.monotonic(), i, exc))
            raise

    futures = [pool.submit(guarded, i, call) for i, call in enumerate(calls)]
    interrupted = None
    for future in futures:
        while True:
            try:
                future.exception()             # waits for it
                break
            except KeyboardInterrupt as exc:   # Ctrl-C: the replicas finish their call first
                interrupted = exc
    if failures:
        _, index, exc = min(failures, key=lambda f: f[0])
        exc.replica_index = index
        raise exc
    if interrupted is not None:
        raise interrupted
    return [future.result() for future in futures]


def connect_local(world, timeout, pool, devices=None):
    """`world` communicators of one process, connected to each other over the
    loopback (host), then made NCCL communicators on `devices` when given."""
    first = _C.Comm(0, world, "127.0.0.1", 0, timeout)
    comms = [first] + [_C.Comm(rank, world, "127.0.0.1", first.port, timeout)
                       for rank in range(1, world)]
    run_all(pool, [c.connect for c in comms])
    if devices is not None:
        nccl_defaults()
        comms = run_all(pool, [lambda c=c, d=d: c.to_nccl(d, timeout)
                               for c, d in zip(comms, devices)])
    return comms


def nccl_defaults():
    """NVLink multicast (NVLS) off unless the user asked for it: on shared
    hosts it can take the GPUs out of service, and these small all-reduces
    gain nothing from it. NCCL reads it when a communicator is made."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


class ReplicaGroup:
    """This process's replicas of a data-parallel group, with a Net's interface.

    nets: the local replicas (ranks first_rank, first_rank + 1, ...);
    comms: their communicators, connected; world: the group's replica count;
    batch: the whole batch (all replicas together) it was built for."""

    def __init__(self, key, nets, comms, world, batch, pool):
        self.device = key
        self._nets, self._comms, self._world = list(nets), list(comms), world
        self._batch = batch
        self._pool = pool
        self._failed = None
        self._call_all(lambda net, comm: net.set_comm(comm), self._comms)

    # -- the group --------------------------------------------------------------

    @property
    def replicas(self):
        """The local replicas' networks (rank order)."""
        return list(self._nets)

    @property
    def world(self):
        return self._world

    @property
    def failed(self):
        """Why the group failed (a replica raised), or None."""
        return self._failed

    @property
    def spans_processes(self):
        """Whether some of the group's replicas live in other processes."""
        return self._world > len(self._nets)

    def fail(self, why):
        """Marks the group failed and aborts it (its other ranks raise too)."""
        if self._failed is None:
            self._failed = why
            self.abort("rank %d stopped: %s" % (self._comms[0].rank, why))

    def close(self):
        """Ends the replica threads (the networks and communicators go with
        the last reference)."""
        self._pool.shutdown(wait=False)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)

    def abort(self, why="aborted"):
        """Fails every pending and later operation of the group, here and (as
        soon as they hear of it) on its other ranks."""
        for comm in self._comms:
            comm.abort(why)

    def _call_all(self, fn, *per_replica):
        """fn(net, *args_i) on every local replica at once; a failure aborts
        the group (its peers would wait for this rank) and is raised."""
        if self._failed is not None:
            raise GroupFailedError("this data-parallel group failed earlier (%s); the model "
                                   "builds a new one at the next fit" % self._failed)
        args = list(zip(*per_replica)) if per_replica else [()] * len(self._nets)
        calls = [lambda net=net, a=a: fn(net, *a) for net, a in zip(self._nets, args)]
        try:
            return run_all(self._pool, calls)
        except KeyboardInterrupt:
            raise   # every replica finished its call: the group is still whole
        except BaseException as exc:
            self._failed = "%s: %s" % (type(exc).__name__, exc)
            rank = self._comms[getattr(exc, "replica_index", 0)].rank
            self.abort("rank %d failed: %s" % (rank, self._failed))
            raise

    # -- what fit uses -------------------------------------------------------------

    @property
    def max_batch(self):
        return self._batch

    def set_data(self, x, y, **names):
        self._call_all(lambda net: net.set_data(x, y, **names))

    def set_validation(self, x, y, **names):
        """On the first local replica only: it alone evaluates (below)."""
        return self._nets[0].set_validation(x, y, **names)

    def evaluate_validation(self):
        return self._nets[0].evaluate_validation()

    def set_order(self, order):
        order = np.ascontiguousarray(order, dtype=np.int32)
        self._call_all(lambda net: net.set_order(order))

    def train_range(self, start, count, batch):
        self._call_all(lambda net: net.train_range(start, count, batch))

    def read_sums(self, reset=True):
        """This process's replicas' loss and correct sums (every replica's
        when the whole group is in this process). No collective: fit calls
        it whenever its progress bar is due, which differs between ranks."""
        sums = self._call_all(lambda net: net.read_sums(reset=reset))
        return tuple(float(sum(s[k] for s in sums)) for k in (0, 1))

    def epoch_sums(self):
        """The whole group's sums since the last read (a collective call when
        the group spans processes: every rank makes it at the end of an epoch)."""
        if len(self._nets) == self._world:
            return self.read_sums()
        self._call_all(lambda net: net.reduce_sums())
        sums = self._call_all(lambda net: net.read_sums(reset=True))
        return sums[0]

    # -- what one replica answers (they hold the same weights) -----------------------

    def evaluate(self, x, y, **names):
        return self._nets[0].evaluate(x, y, **names)

    def predict(self, x, **names):
        return self._nets[0].predict(x, **names)

    def forward(self, x, training=False):
        return self._nets[0].forward(x, training=training)

    def get_weights(self):
        return self._nets[0].get_weights()

    def get_gradients(self):
        return self._nets[0].get_gradients()

    def get_optimizer_state(self):
        return self._nets[0].get_optimizer_state()

    # dynamic loss scaling: every replica scales, checks the summed gradients
    # (the same on each) and skips alike, so they keep the same state
    @property
    def loss_scale(self):
        return self._nets[0].loss_scale

    def get_loss_scale_state(self):
        return self._nets[0].get_loss_scale_state()

    def set_loss_scale_state(self, state):
        self._call_all(lambda net: net.set_loss_scale_state(state))

    def weight_info(self):
        return self._nets[0].weight_info()

    @property
    def steps(self):
        return self._nets[0].steps

    @property
    def training_forwards(self):
        return self._nets[0].training_forwards

    @property
    def output_shape(self):
        return self._nets[0].output_shape

    @property
    def memory_bytes(self):
        return sum(net.memory_bytes for net in self._nets)

    @property
    def last_range_seconds(self):
        seconds = [net.last_range_seconds for net in self._nets]
        return None if any(s is None for s in seconds) else max(seconds)

    # -- what every replica takes --------------------------------------------------

    def set_weights(self, weights):
        weights = list(weights)
        self._call_all(lambda net: net.set_weights(weights))

    def set_optimizer_state(self, state):
        self._call_all(lambda net: net.set_optimizer_state(state))

    def set_optimizer(self, optimizer):
        self._call_all(lambda net: net.set_optimizer(optimizer))

    # -- not for a group -----------------------------------------------------------

    def _refuse(self, what):
        raise ValueError("%s: a model under a distribution strategy trains with fit (each "
                         "batch split over its %d replicas)" % (what, self._world))

    def train_batch(self, x, y):
        self._refuse("train_batch")

    def compute_gradients(self, x, y):
        self._refuse("compute_gradients")

    def apply_gradients(self):
        self._refuse("apply_gradients")

    def backward(self, dy):
        self._refuse("backward")
