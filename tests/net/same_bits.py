"""The bits of fixed-seed training runs of every seed network, kept so that a
change to how the core is organised can be shown to change no bit.

A run: the seed network built by the engine with seed 3, three epochs of
train_range over synthetic data (a new order each epoch, ranges of two steps
and a rest, a partial last batch), then a forward of evaluate. What is kept
per run: the hex of every loss sum and correct count, and the SHA-256 of the
final weights (Keras layouts), of the optimizer state and of the predictions.

    python tests/net/same_bits.py record cpu omp:2     # writes tests/net/same_bits.json
    python tests/net/same_bits.py record cuda cudnn    # on a GPU machine: keyed by
                                                   # device and recorded steps

The cpu and omp entries were recorded at commit 2bb6fa8, before the core
was reorganised into its step plan (csrc/net/). GPU entries are recorded
the same way from an older commit on a GPU machine (a copy of that commit,
built there, `record cuda cudnn` with and without CNNCUDA_GRAPHS=0), then
test_same_bits.py runs on the new tree there: the NVIDIA H200 entries were
recorded at 74a925d (2026-11-27), before mixed precision, the losses of
several outputs and the inference-mode BatchNormalization, and the tree
after them gave the same bits (20 passed). On 2026-11-28 a convolution's bias
gradient above the wide threshold with at most 31 columns of filter gradient
became that product's row sums (cuda/conv2d.cu) instead of the channel sums:
a deliberate change of summation order, which among the seed networks at this
batch reaches imagenette_cnn's first convolution only. Its cuda entries were
re-recorded on the H100 (every other entry came out the same) and removed for
the H200; they were recorded there on 2026-11-27 (eighth session) from
46b7544, whose other H200 cuda entries came out as recorded before, and the
tree of the narrow filter-gradient kernel gave the same bits (20 passed).
On 2026-11-28 (ninth session) the bias gradient of a float32 filter
gradient on the wide kernel became its row sums too (a row of ones after
the column matrix), another deliberate change of order: among the seed
networks at this batch it reaches binary_100's and imagenette_cnn's. Their
cuda entries were re-recorded on the H100 (every other entry came out the
same, cudnn's included) and removed for the H200; they were recorded there
on 2026-11-28 (eleventh session) from 8980dcf, whose other H200 cuda entries
(both with and without recorded steps) came out as recorded before.

The GPU engines' entries are keyed by the device's name and by whether the
training step is recorded (CNNCUDA_GRAPHS): kernels and cuDNN's algorithm
choices may differ between GPU models. cudnn runs take cuDNN's heuristic
algorithm choice (CNNCUDA_CUDNN_ALGO=heuristic): the default measures the
algorithms in each new process and may pick another of two within the
timing noise, which rounds differently (seen once on an H100: the
imagenette_cnn weights of one recorded run differed, its loss sums not). The CPU engines' are keyed by the
GEMM's micro-kernel: AVX2 and AVX-512 (both fused multiply-adds) give the same
bits, portable C (a product rounded before its sum) others. tests/net/test_same_bits.py compares the runs it can make here.
"""
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "same_bits.json")
# small sample counts: the large seed networks run in seconds on one CPU thread
SAMPLES = {"cifar10_cnn": 70, "lenet5": 70, "tiny_mnist": 70, "imagenette_cnn": 21,
           "binary_100": 30}
BATCH = 8


def _digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def run(engine, name):
    """The bits of one run of seed network `name` on `engine`."""
    from cnncuda.engine import parse_device

    before = os.environ.get("CNNCUDA_CUDNN_ALGO")
    if parse_device(engine)[0] == "cudnn":
        os.environ["CNNCUDA_CUDNN_ALGO"] = "heuristic"     # read when the Net is made
    try:
        return _run(engine, name)
    finally:
        if before is None:
            os.environ.pop("CNNCUDA_CUDNN_ALGO", None)
        else:
            os.environ["CNNCUDA_CUDNN_ALGO"] = before


def _run(engine, name):
    from cnncuda.engine import make_net
    from cnncuda.seeds import seed_network, synthetic_data

    seed = seed_network(name)
    n = SAMPLES[name]
    x, y = synthetic_data(name, n, seed=1)
    net = make_net(engine, seed["layers"], seed["input_shape"], BATCH, seed["loss"],
                   seed["optimizer"], seed=3)
    net.set_data(x, y)
    sums = []
    for epoch in range(3):
        net.set_order(np.random.default_rng(epoch).permutation(n).astype(np.int64))
        net.train_range(0, 2 * BATCH, BATCH)
        net.train_range(2 * BATCH, n - 2 * BATCH, BATCH)
        loss, correct = net.read_sums(reset=True)
        sums.append([float(loss).hex(), float(correct).hex()])
    predictions = net.predict(x[:BATCH + 3])
    return {"sums": sums,
            "weights": _digest(net.get_weights()),
            "optimizer": _digest(np.asarray(v) for v in _state_values(net.get_optimizer_state())),
            "predictions": _digest([predictions])}


def _state_values(state):
    if isinstance(state, dict):
        for key in sorted(state):
            yield from _state_values(state[key])
    elif isinstance(state, (list, tuple)):
        for v in state:
            yield from _state_values(v)
    else:
        yield state


def key(engine):
    """The reference's key for `engine` on this machine."""
    from cnncuda.engine import parse_device
    name, _ = parse_device(engine)
    import cnncuda
    if name not in ("cuda", "cudnn"):
        # AVX2 and AVX-512 give the same bits (both FMA); portable C rounds
        # each product and sum apart
        return "%s/%s" % (engine, "portable" if cnncuda.build_info()["gemm"] == "portable"
                          else "fma")
    graphs = os.environ.get("CNNCUDA_GRAPHS", "1") != "0"
    device = cnncuda.cuda_devices()[0]
    return "%s/%s/%s%s" % (engine, device, "recorded" if graphs else "unrecorded",
                           "/heuristic" if name == "cudnn" else "")


def load():
    if not os.path.exists(REFERENCE):
        return {}
    with open(REFERENCE) as f:
        return json.load(f)


def record(engines):
    from cnncuda.seeds import SEEDS
    reference = load()
    for engine in engines:
        k = key(engine)
        reference[k] = {name: run(engine, name) for name in SEEDS}
        print("recorded", k)
    with open(REFERENCE, "w") as f:
        json.dump(reference, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "record":
        sys.exit(__doc__)
    record(sys.argv[2:])
