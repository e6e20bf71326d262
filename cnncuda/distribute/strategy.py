"""Keras's distribution strategies: data-parallel training over several GPUs
(or CPU engines), in one process or in one process per GPU.

``MirroredStrategy(devices=[0, 1])``: one process drives every replica (one
Python thread each). ``MultiWorkerMirroredStrategy()``: one replica per
process, started by a launcher that sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT (torchrun, ``python -m cnncuda.distribute.launch``,
or by hand), on one host or several. A model built (or compiled) under
``strategy.scope()`` trains on every replica: each global batch is split
over them, the gradients are summed over the group once per step (NCCL on
GPUs, cnncuda's host communicator on CPU engines), and every replica applies
the same optimizer step, so their weights stay identical.
"""
import contextlib
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

from .. import _C, config, switches
from ..checks import number_in
from ..engine import make_net
from .replicas import ReplicaGroup, run_all, connect_local, nccl_defaults

__all__ = ["MirroredStrategy", "MultiWorkerMirroredStrategy", "get_strategy", "has_strategy"]

_scope = threading.local()
_GPU = re.compile(r"^/?(?:job:[^/]*/)?(?:replica:\d+/)?(?:task:\d+/)?(?:device:)?(?:GPU|gpu):(\d+)$")
_CPU = re.compile(r"^/?(?:job:[^/]*/)?(?:replica:\d+/)?(?:task:\d+/)?(?:device:)?(?:CPU|cpu):\d+$")
DEFAULT_TIMEOUT = 300.0


def _stack():
    if not hasattr(_scope, "stack"):
        _scope.stack = []
    return _scope.stack


def get_strategy():
    """The strategy of the innermost ``strategy.scope()`` block, else None."""
    stack = _stack()
    return stack[-1] if stack else None


def has_strategy():
    return bool(_stack())


def _gpu_engine(arg):
    """The GPU engine a bare GPU number runs on: cudnn where it can, else cuda."""
    for engine in config.GPU_ENGINES:
        if _C.engine_status(engine) is None:
            return engine
    reasons = "; ".join("%s: %s" % (e, _C.engine_status(e)) for e in config.GPU_ENGINES)
    raise _C.EngineUnavailableError("%s: no GPU engine can run here (%s)" % (arg, reasons))


def _replica(spec, arg):
    """(engine, threads, device index) of one replica from an int (a GPU), a
    TensorFlow name ('/gpu:1', '/cpu:0') or an engine name ('cuda:1',
    'cudnn:0', 'cpu', 'omp:4')."""
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise TypeError("%s: expected a GPU number or a device name such as '/gpu:1', "
                        "'cuda:1' or 'cpu', got %r" % (arg, spec))
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError("%s: expected a GPU number >= 0, got %d" % (arg, spec))
        return _gpu_engine(arg), 1, spec
    name = spec.strip()
    match = _GPU.match(name)
    if match:
        return _gpu_engine(arg), 1, int(match.group(1))
    if _CPU.match(name):
        return "cpu", 1, 0
    engine, _, index = name.partition(":")
    if engine in config.GPU_ENGINES:
        if index and not index.isdigit():
            raise ValueError("%s: expected '%s:N' with N a GPU number, got %r" % (arg, engine, spec))
        reason = _C.engine_status(engine)
        if reason is not None:
            raise _C.EngineUnavailableError("%s: %s" % (arg, reason))
        return engine, 1, int(index or 0)
    if engine in ("cpu", "omp"):
        resolved = config.engine_for(name)
        base, _, threads = resolved.partition(":")
        return base, int(threads or 1), 0
    raise ValueError("%s: expected a GPU number or a device name such as '/gpu:1', 'cuda:1', "
                     "'cpu' or 'omp:4', got %r" % (arg, spec))


def _timeout(value):
    return number_in(value, "timeout", 0.0, 1e9, low_open=True)


class MirroredStrategy:
    """Data parallel over several devices of this process (Keras's
    MirroredStrategy). devices: GPU numbers ([0, 1]), TensorFlow names
    (['/gpu:0', '/gpu:1']) or engine names (['cuda:0', 'cuda:1'],
    ['cpu', 'cpu']); all on one engine. None: every GPU of this machine.
    timeout: seconds a replica waits for another before giving up with an
    error (a stuck or lost peer never hangs training)."""

    def __init__(self, devices=None, cross_device_ops=None, timeout=DEFAULT_TIMEOUT):
        if cross_device_ops is not None:
            raise ValueError("cross_device_ops: expected None (cnncuda sums gradients with NCCL "
                             "on GPUs and its host communicator on CPU engines), got %r"
                             % (cross_device_ops,))
        if devices is None:
            count = len(_C.cuda_devices())
            if count < 1:
                raise _C.EngineUnavailableError(
                    "devices: no GPU found; name the replicas' devices, e.g. "
                    "MirroredStrategy(devices=['cpu', 'cpu'])")
            devices = list(range(count))
        if isinstance(devices, (str, int)) or not hasattr(devices, "__iter__"):
            raise TypeError("devices: expected a list of devices, got %r" % (devices,))
        self._replicas = [_replica(d, "devices[%d]" % i) for i, d in enumerate(devices)]
        if not self._replicas:
            raise ValueError("devices: expected at least one device, got an empty list")
        engines = {r[0] for r in self._replicas}
        if len(engines) > 1:
            raise ValueError("devices: expected every replica on one engine, got %s"
                             % ", ".join(sorted(engines)))
        gpus = [r[2] for r in self._replicas]
        if self._gpu and len(set(gpus)) != len(gpus):
            raise ValueError("devices: expected each GPU once, got GPUs %s (NCCL runs one "
                             "replica per GPU)" % gpus)
        self._finish("devices", timeout)

    def _finish(self, arg, timeout):
        """The checks both strategies end with, once the replicas are known."""
        if self._gpu and not _C.nccl_available():
            raise _C.EngineUnavailableError(
                "%s: data parallel over GPUs needs NCCL, which this build of cnncuda lacks "
                "(compiled in: %s)" % (arg, _C.compiled_features()))
        self._timeout = _timeout(timeout)
        self.extended = self

    # -- what Keras code asks of a strategy ------------------------------------------

    @property
    def _gpu(self):
        return self._replicas[0][0] in config.GPU_ENGINES

    @property
    def engine(self):
        """The engine every replica runs on: 'cuda', 'cudnn', 'cpu' or 'omp'."""
        return self._replicas[0][0]

    @property
    def num_replicas_in_sync(self):
        """Replicas in the whole group (every process's)."""
        return len(self._replicas)

    @property
    def rank(self):
        """This process's rank among the group's processes."""
        return 0

    @property
    def is_chief(self):
        """Whether this process saves checkpoints and prints for the group."""
        return self.rank == 0

    @property
    def worker_devices(self):
        return tuple(self._names())

    def _names(self):
        return ["%s:%d" % (e, d) if e in config.GPU_ENGINES else
                (e if t == 1 else "%s:%d" % (e, t)) for e, t, d in self._replicas]

    @contextlib.contextmanager
    def scope(self):
        """Models built or compiled inside train on this strategy's replicas."""
        stack = _stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    @property
    def key(self):
        """What the model compares to know whether its engine network is this one."""
        return "%s[%s]" % (type(self).__name__, ",".join(self._names()))

    def __repr__(self):
        return "%s(devices=%r)" % (type(self).__name__, self._names())

    # -- building the group -----------------------------------------------------------

    def _local_replicas(self):
        return self._replicas

    def _world(self):
        return len(self._replicas)

    def _connect(self, pool):
        devices = [d for _, _, d in self._replicas] if self._gpu else None
        return connect_local(len(self._replicas), self._timeout, pool, devices)

    def make_group(self, layers, input_shape, batch, loss, optimizer, seed=0,
                   precision="float32"):
        """The replicas of a network for whole batches of `batch` samples.
        precision: make_net's, for every replica ('tf32' on GPU engines only;
        a model passes config.precision_for(self.engine))."""
        world = self._world()
        local = self._local_replicas()
        per_replica = max(1, -(-batch // world))
        nets = [make_net(engine if threads == 1 else "%s:%d" % (engine, threads), layers,
                         input_shape, per_replica, loss, optimizer, seed=seed,
                         precision=precision, device_index=index)
                for engine, threads, index in local]
        pool = ThreadPoolExecutor(max_workers=len(local), thread_name_prefix="cnncuda-replica")
        try:
            comms = self._connect(pool)
            return ReplicaGroup(self.key, nets, comms, world, batch, pool)
        except BaseException:
            pool.shutdown(wait=False)
            raise


def _env_int(env, name, low=0):
    value = env.get(name)
    if value is None:
        raise ValueError("%s: expected the environment variable a launcher sets (torchrun, "
                         "python -m cnncuda.distribute.launch), but it is not set" % name)
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if number < low:
        raise ValueError("%s: expected an integer >= %d, got %r" % (name, low, value))
    return number


class MultiWorkerMirroredStrategy(MirroredStrategy):
    """Data parallel over processes, as a launcher starts them (Keras's
    MultiWorkerMirroredStrategy; PyTorch's DDP layout). Reads RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT: rank 0 listens on
    MASTER_ADDR at MASTER_PORT (MASTER_PORT + 1 under torchrun, whose agent
    holds MASTER_PORT; CNNCUDA_PORT overrides both), the others connect, and
    on GPUs the NCCL id travels that way.

    One replica per process by default. device: the engine of this
    process's replica: None (a GPU engine on GPU LOCAL_RANK where one can
    run, else 'cpu'), 'cuda', 'cudnn' (on GPU LOCAL_RANK), 'cpu' or 'omp:N'.
    devices: instead, several replicas in this process, as MirroredStrategy
    takes them ([0, 1]: this host's GPUs 0 and 1), the way a worker of
    Keras's strategy drives every GPU of its host: every process then gives
    the same number, and the group's replicas are numbered process by
    process (RANK * len(devices) + i)."""

    def __init__(self, device=None, timeout=DEFAULT_TIMEOUT, env=None, devices=None):
        env = os.environ if env is None else env
        self._rank = _env_int(env, "RANK")
        world = _env_int(env, "WORLD_SIZE", 1)
        if self._rank >= world:
            raise ValueError("RANK: expected 0 <= RANK < WORLD_SIZE (%d), got %d"
                             % (world, self._rank))
        local_rank = _env_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
        self._addr = env.get("MASTER_ADDR") or "127.0.0.1"
        self._port = switches.port(env)
        if self._port is None:
            self._port = _env_int(env, "MASTER_PORT", 1) + (1 if "TORCHELASTIC_RUN_ID" in env else 0)
        if self._port > 65535:
            raise ValueError("MASTER_PORT: expected a port number up to 65535, got %d" % self._port)
        if devices is not None:
            if device is not None:
                raise ValueError("device, devices: expected one of them, got device=%r and "
                                 "devices=%r" % (device, devices))
            self._local = self._local_devices(devices)
            arg = "devices"
        else:
            if device is None:
                gpu = any(_C.engine_status(e) is None for e in config.GPU_ENGINES)
                device = local_rank if gpu else "cpu"
            elif isinstance(device, str) and device.strip() in config.GPU_ENGINES:
                device = "%s:%d" % (device.strip(), local_rank)
            self._local = [_replica(device, "device")]
            arg = "device"
        self._replicas = self._local * world     # every process's replicas are alike
        self._world_size = world
        self._finish(arg, timeout)

    @staticmethod
    def _local_devices(devices):
        if isinstance(devices, (str, int)) or not hasattr(devices, "__iter__"):
            raise TypeError("devices: expected a list of devices, got %r" % (devices,))
        local = [_replica(d, "devices[%d]" % i) for i, d in enumerate(devices)]
        if not local:
            raise ValueError("devices: expected at least one device, got an empty list")
        engines = {r[0] for r in local}
        if len(engines) > 1:
            raise ValueError("devices: expected every replica on one engine, got %s"
                             % ", ".join(sorted(engines)))
        gpus = [r[2] for r in local]
        if local[0][0] in config.GPU_ENGINES and len(set(gpus)) != len(gpus):
            raise ValueError("devices: expected each GPU once, got GPUs %s (NCCL runs one "
                             "replica per GPU)" % gpus)
        return local

    @property
    def rank(self):
        return self._rank

    @property
    def worker_devices(self):
        return tuple(self._names()[:len(self._local)])

    @property
    def key(self):
        return "%s[rank %d of %d, %s]" % (type(self).__name__, self._rank, self._world_size,
                                          ",".join(self.worker_devices))

    def __repr__(self):
        if len(self._local) == 1:
            return "%s(rank=%d, world=%d, device=%r)" % (type(self).__name__, self._rank,
                                                         self._world_size, self._names()[0])
        return "%s(rank=%d, world=%d, devices=%r)" % (type(self).__name__, self._rank,
                                                      self._world_size, list(self.worker_devices))

    def _local_replicas(self):
        return self._local

    def _world(self):
        return self._world_size * len(self._local)

    def _connect(self, pool):
        local, world = len(self._local), self._world()
        port = self._port if world > 1 else 0
        comms = [_C.Comm(self._rank * local + i, world, self._addr, port, self._timeout)
                 for i in range(local)]
        run_all(pool, [c.connect for c in comms])
        if self._gpu:
            nccl_defaults()
            comms = run_all(pool, [lambda c=c, d=d: c.to_nccl(d, self._timeout)
                                   for c, (_, _, d) in zip(comms, self._local)])
        return comms
